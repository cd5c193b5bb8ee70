"""The check rules. Each takes (Facts, Options) and returns results; none touches the outside.

Thresholds and their sources are in the project's field notes, section 2 (DCGM's
diagnostics and health watches, NVIDIA's CUDA compatibility documents, PyTorch's errors).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudiag.checks import CheckResult, Facts, Options, Status
from gpudiag.checks.compat import ArchSupport, Verdict, arch_support, driver_vs_runtime, parse_version
from gpudiag.model import ComputeMode, Gpu, GpuState, NvmlStatus, Reason, cuda_version_text
from gpudiag.probe.env import DCGM_WARNED_VARS
from gpudiag.probe.nvml import CLOCK_EVENT_NAMES

DRIVER = "Driver and NVML"
COMPAT = "Compatibility"
CONFIG = "Configuration"
HEALTH = "Health"
REQUIRE = "Requirements"
FUNCTIONAL = "Functional test"

RETIRED_PAGES_LIMIT = 63  # DCGM: 63 or more retired pages fails
UNCORRECTABLE_REMAP_LIMIT = 512  # DCGM: uncorrectable row remaps
TEMP_MARGIN_C = 5  # warn this close to the GPU's own slowdown threshold
MATMUL_TOLERANCE = 1e-4  # fp32 (TF32 off) vs float64, relative Frobenius error

RECOVERY_ACTIONS = {
    1: ("GPU reset required", "drain the node and reset the GPU (nvidia-smi -r)"),
    2: ("node reboot required", "drain the node and reboot it"),
    3: ("drain peer-to-peer traffic required", "drain the node; NVIDIA asks to stop P2P traffic"),
    4: ("drain and reset required", "drain the node and reset the GPU"),
    5: ("IMEX domain recovery required", "recover the IMEX domain (NVIDIA's recovery steps)"),
    6: ("bus reset required", "drain the node and reset the PCIe bus"),
    7: ("system reboot required", "drain the node and reboot it"),
}


Rule = Callable[[Facts, Options], list[CheckResult]]


@dataclass(frozen=True)
class Check:
    id: str
    area: str
    title: str
    rule: Rule


def _usable(facts: Facts) -> list[Gpu]:
    return [g for g in facts.machine.gpus if g.state is GpuState.OK]


def _no_nvml(check_id: str, area: str, facts: Facts) -> list[CheckResult]:
    return [CheckResult(check_id, area, Status.SKIP, f"NVML unavailable: {facts.machine.nvml.status.value}")]


def _per_gpu(
    check_id: str, area: str, facts: Facts, judge: Callable[[Gpu], tuple[Status, str, str]]
) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return _no_nvml(check_id, area, facts)
    gpus = _usable(facts)
    if not gpus:
        return [CheckResult(check_id, area, Status.SKIP, "no usable GPU")]
    out = []
    for gpu in gpus:
        status, finding, fix = judge(gpu)
        out.append(CheckResult(check_id, area, status, finding, fix, gpu.label))
    return out


def _skip_reason(reading_reason: Reason | None, detail: str) -> str:
    if reading_reason is Reason.NOT_SUPPORTED:
        return "not supported on this GPU"
    return detail or (reading_reason.label if reading_reason else "unavailable")


# --- driver and NVML ---------------------------------------------------------------


def nvml_init(facts: Facts, options: Options) -> list[CheckResult]:
    nvml = facts.machine.nvml
    if nvml.status is NvmlStatus.OK:
        version = nvml.driver_version.get("?")
        cuda = nvml.cuda_driver_version.map(cuda_version_text).get("?")
        return [
            CheckResult(
                "nvml.init", DRIVER, Status.PASS, f"NVML {nvml.nvml_version.get('?')}, driver {version}, CUDA {cuda}"
            )
        ]
    finding = nvml.detail
    if nvml.status is NvmlStatus.VERSION_MISMATCH and nvml.kernel_module_version.value:
        finding += f" (loaded kernel module: {nvml.kernel_module_version.value})"
    fixes = {
        NvmlStatus.LIBRARY_NOT_FOUND: "install the NVIDIA driver, or start the container with the NVIDIA runtime",
        NvmlStatus.DRIVER_NOT_LOADED: "load the driver (modprobe nvidia) or rebuild it for this kernel (DKMS)",
        NvmlStatus.VERSION_MISMATCH: "reboot the node, or unload and reload the nvidia kernel modules",
        NvmlStatus.NO_PERMISSION: "give this user access to /dev/nvidia* (video group / job cgroup)",
        NvmlStatus.ERROR: "check `dmesg` for NVRM errors",
    }
    return [CheckResult("nvml.init", DRIVER, Status.FAIL, finding, fixes[nvml.status])]


def gpu_count(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return _no_nvml("nvml.gpu_count", DRIVER, facts)
    n = len(facts.machine.gpus)
    if options.expect_gpus is not None and n != options.expect_gpus:
        return [
            CheckResult(
                "nvml.gpu_count",
                DRIVER,
                Status.FAIL,
                f"NVML sees {n} GPU(s), expected {options.expect_gpus}",
                "a missing GPU fell off the bus or is unbound: check `dmesg` for XID errors, reseat or replace it",
            )
        ]
    if n == 0:
        return [
            CheckResult("nvml.gpu_count", DRIVER, Status.FAIL, "NVML sees no GPU", "check `lspci | grep -i nvidia`")
        ]
    return [CheckResult("nvml.gpu_count", DRIVER, Status.PASS, f"{n} GPU(s)")]


def gpu_lost(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return _no_nvml("nvml.gpu_lost", DRIVER, facts)
    bad = [g for g in facts.machine.gpus if g.state is not GpuState.OK]
    if not bad:
        return [CheckResult("nvml.gpu_lost", DRIVER, Status.PASS, "every GPU answers")]
    return [
        CheckResult(
            "nvml.gpu_lost", DRIVER, Status.FAIL, g.state_detail, "drain the node; reset the GPU or reboot", g.label
        )
        for g in bad
    ]


def device_nodes(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.devices is None:
        return [CheckResult("host.device_nodes", DRIVER, Status.SKIP, "not recorded in this snapshot")]
    missing = [n.path for n in facts.devices.nodes if not n.exists]
    denied = [n.path for n in facts.devices.nodes if n.exists and not n.accessible]
    if missing:
        uvm = any(p.endswith("nvidia-uvm") for p in missing)
        fix = "run `nvidia-modprobe -u -c=0` (or load nvidia_uvm)" if uvm else "load the driver; run nvidia-modprobe"
        why = " (PyTorch then fails with 'CUDA unknown error')" if uvm else ""
        return [CheckResult("host.device_nodes", DRIVER, Status.FAIL, f"missing {', '.join(missing)}{why}", fix)]
    if denied:
        return [
            CheckResult(
                "host.device_nodes",
                DRIVER,
                Status.FAIL,
                f"no read/write access to {', '.join(denied)}",
                "add the user to the group owning the devices, or fix the job's device cgroup",
            )
        ]
    return [CheckResult("host.device_nodes", DRIVER, Status.PASS, f"{len(facts.devices.nodes)} device nodes present")]


def kernel_modules(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.devices is None:
        return [CheckResult("host.kernel_modules", DRIVER, Status.SKIP, "not recorded in this snapshot")]
    if not facts.devices.modules_known:
        return [CheckResult("host.kernel_modules", DRIVER, Status.SKIP, "/proc/modules not readable")]
    mods = facts.devices.modules
    if "nouveau" in mods:
        return [
            CheckResult(
                "host.kernel_modules",
                DRIVER,
                Status.FAIL,
                "the nouveau driver is loaded",
                "blacklist nouveau (modprobe.d) and rebuild the initramfs",
            )
        ]
    if "nvidia" in mods and "nvidia_uvm" not in mods:
        return [
            CheckResult(
                "host.kernel_modules",
                DRIVER,
                Status.FAIL,
                "nvidia is loaded but nvidia_uvm is not (CUDA needs it)",
                "modprobe nvidia_uvm",
            )
        ]
    if "nvidia" not in mods:
        return [CheckResult("host.kernel_modules", DRIVER, Status.SKIP, "no nvidia kernel module (in a container?)")]
    return [CheckResult("host.kernel_modules", DRIVER, Status.PASS, "nvidia and nvidia_uvm loaded, no nouveau")]


# --- compatibility -----------------------------------------------------------------


def _torch_skip(check_id: str, facts: Facts) -> list[CheckResult] | None:
    t = facts.torch
    if t.value is None:
        if t.reason is Reason.NOT_FOUND or t.reason is Reason.UNAVAILABLE:
            return [CheckResult(check_id, COMPAT, Status.SKIP, t.detail or "torch not probed")]
        return [CheckResult(check_id, COMPAT, Status.SKIP, "torch is broken (see compat.torch)")]
    return None


def torch_works(facts: Facts, options: Options) -> list[CheckResult]:
    t = facts.torch
    if t.value is None:
        if t.reason in (Reason.NOT_FOUND, Reason.UNAVAILABLE):
            return [
                CheckResult(
                    "compat.torch",
                    COMPAT,
                    Status.SKIP,
                    t.detail or "torch not probed",
                    "pip install torch, or point --python at your training environment",
                )
            ]
        return [CheckResult("compat.torch", COMPAT, Status.FAIL, t.detail, "reinstall torch in that environment")]
    rt = t.value
    if rt.cuda is None:
        return [
            CheckResult(
                "compat.torch",
                COMPAT,
                Status.FAIL,
                f"torch {rt.version} is a CPU-only build ('Torch not compiled with CUDA enabled')",
                "install a CUDA build of torch (pip install torch --index-url …/cu12x)",
            )
        ]
    gpus = len(_usable(facts))
    if not rt.cuda_available and gpus:
        return [
            CheckResult(
                "compat.torch",
                COMPAT,
                Status.FAIL,
                f"torch {rt.version} cannot use CUDA: {rt.cuda_error or 'unknown'}",
                "see the driver and compatibility checks above",
            )
        ]
    if rt.cuda_available and gpus and rt.device_count != gpus:
        env = facts.machine.env_map.get("CUDA_VISIBLE_DEVICES")
        note = f" (CUDA_VISIBLE_DEVICES={env!r})" if env is not None else ""
        return [CheckResult("compat.torch", COMPAT, Status.WARN, f"torch sees {rt.device_count} of {gpus} GPUs{note}")]
    timing = f"import {rt.import_seconds:.1f} s, CUDA init {rt.init_seconds:.1f} s"
    return [
        CheckResult(
            "compat.torch",
            COMPAT,
            Status.PASS,
            f"torch {rt.version} (CUDA {rt.cuda}) sees {rt.device_count} GPU(s); {timing}",
        )
    ]


def driver_cuda(facts: Facts, options: Options) -> list[CheckResult]:
    m = facts.machine
    if m.nvml.status is not NvmlStatus.OK:
        return _no_nvml("compat.driver_cuda", COMPAT, facts)
    built = m.torch_runtime.value.cuda if m.torch_runtime.value else None
    build = (
        facts.torch.value.cuda
        if facts.torch.value is not None
        else (m.torch_build.value.cuda if m.torch_build.value else None)
    )
    build = build or built
    if build is None:
        return [CheckResult("compat.driver_cuda", COMPAT, Status.SKIP, "no CUDA build of torch to compare with")]
    cuda = m.nvml.cuda_driver_version.value
    if cuda is None:
        return [CheckResult("compat.driver_cuda", COMPAT, Status.SKIP, "the driver's CUDA version is unknown")]
    driver_cuda_v = (cuda // 1000, (cuda % 1000) // 10)
    runtime = parse_version(build)[:2]
    driver = parse_version(m.nvml.driver_version.get("0"))
    verdict = driver_vs_runtime(driver_cuda_v, (runtime[0], runtime[1] if len(runtime) > 1 else 0), driver)
    supported = cuda_version_text(cuda)
    text = f"driver {m.nvml.driver_version.get('?')} supports CUDA {supported}; torch is built for CUDA {build}"
    if verdict is Verdict.OK:
        return [CheckResult("compat.driver_cuda", COMPAT, Status.PASS, text)]
    if verdict is Verdict.MINOR_COMPAT:
        return [
            CheckResult(
                "compat.driver_cuda",
                COMPAT,
                Status.WARN,
                f"{text}: runs under minor-version compatibility; PTX "
                "built by the newer toolkit cannot JIT (error 222)",
                f"upgrade the driver to one supporting CUDA {build}",
            )
        ]
    return [
        CheckResult(
            "compat.driver_cuda",
            COMPAT,
            Status.FAIL,
            f"{text}: 'The NVIDIA driver on your system is too old' (error 35)",
            f"upgrade the driver to one supporting CUDA {build}, or install a torch built for CUDA ≤ {supported}",
        )
    ]


def compute_capability(facts: Facts, options: Options) -> list[CheckResult]:
    skip = _torch_skip("compat.arch", facts)
    if skip:
        return skip
    assert facts.torch.value is not None
    arch_list = facts.torch.value.arch_list
    if not arch_list:
        return [CheckResult("compat.arch", COMPAT, Status.SKIP, "torch reports no CUDA architectures (no CUDA)")]

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        cc = gpu.compute_capability.value
        if cc is None:
            return Status.SKIP, "compute capability unknown", ""
        support, arch = arch_support(cc, arch_list)
        label = f"sm_{cc[0]}{cc[1]}"
        if support is ArchSupport.CUBIN:
            return Status.PASS, f"{label}: native kernels ({arch})", ""
        if support is ArchSupport.PTX:
            return Status.WARN, f"{label}: only PTX ({arch}): kernels JIT-compile at first launch (slow start)", ""
        return (
            Status.FAIL,
            f"{label} is not in torch's architectures ({' '.join(arch_list)}): 'no kernel image is available'",
            "install a torch build that includes this GPU's architecture",
        )

    return _per_gpu("compat.arch", COMPAT, facts, judge)


def cudnn(facts: Facts, options: Options) -> list[CheckResult]:
    skip = _torch_skip("compat.cudnn", facts)
    if skip:
        return skip
    rt = facts.torch.value
    assert rt is not None
    if rt.cudnn_version is None:
        return [CheckResult("compat.cudnn", COMPAT, Status.SKIP, "no cuDNN in this torch")]
    run = (rt.cudnn_version // 10000, rt.cudnn_version % 10000 // 100, rt.cudnn_version % 100)
    if run[0] < 9:  # cuDNN 8 encodes 8902 as 8.9.2
        run = (rt.cudnn_version // 1000, rt.cudnn_version % 1000 // 100, rt.cudnn_version % 100)
    text = f"cuDNN {'.'.join(map(str, run))}"
    if rt.cudnn_compiled is not None:
        compiled = rt.cudnn_compiled
        text += f" (torch built with {'.'.join(map(str, compiled))})"
        if run[0] != compiled[0] or run[1] < compiled[1]:
            return [
                CheckResult(
                    "compat.cudnn",
                    COMPAT,
                    Status.FAIL,
                    f"{text}: incompatible runtime cuDNN",
                    "install the cuDNN that torch was built with (nvidia-cudnn-cu12 wheel)",
                )
            ]
    old = [g.label for g in _usable(facts) if g.compute_capability.value and g.compute_capability.value < (7, 5)]
    if run >= (9, 11, 0) and old:
        return [
            CheckResult(
                "compat.cudnn",
                COMPAT,
                Status.FAIL,
                f"{text} dropped GPUs below sm_75: {', '.join(old)}",
                "use cuDNN < 9.11 on these GPUs",
            )
        ]
    return [CheckResult("compat.cudnn", COMPAT, Status.PASS, text)]


def nccl(facts: Facts, options: Options) -> list[CheckResult]:
    skip = _torch_skip("compat.nccl", facts)
    if skip:
        return skip
    rt = facts.torch.value
    assert rt is not None
    gpus = len(_usable(facts))
    if rt.nccl_version is None:
        if gpus > 1:
            return [
                CheckResult(
                    "compat.nccl",
                    COMPAT,
                    Status.WARN,
                    f"{gpus} GPUs but this torch has no NCCL",
                    "multi-GPU training (DDP) needs a torch build with NCCL",
                )
            ]
        return [CheckResult("compat.nccl", COMPAT, Status.SKIP, "no NCCL (single GPU)")]
    return [CheckResult("compat.nccl", COMPAT, Status.PASS, f"NCCL {'.'.join(map(str, rt.nccl_version))}")]


def visible_devices(facts: Facts, options: Options) -> list[CheckResult]:
    from gpudiag.visibility import VISIBLE_VAR, resolve

    m = facts.machine
    if m.nvml.status is not NvmlStatus.OK:
        return _no_nvml("env.visible_devices", CONFIG, facts)
    env = m.env_map
    if VISIBLE_VAR not in env:
        return [CheckResult("env.visible_devices", CONFIG, Status.PASS, f"{VISIBLE_VAR} unset: all GPUs visible")]
    r = resolve(m, env[VISIBLE_VAR], env.get("CUDA_DEVICE_ORDER"))
    value = env[VISIBLE_VAR]
    if not r.devices and _usable(facts):
        return [
            CheckResult(
                "env.visible_devices",
                CONFIG,
                Status.FAIL,
                f"{VISIBLE_VAR}={value!r} leaves no device ('no CUDA-capable device is detected', error 100)",
                "fix the value: `gpudiag visible` explains it",
            )
        ]
    gpus = ", ".join(str(d.gpu_index) for d in r.devices)
    if r.warnings:
        return [
            CheckResult(
                "env.visible_devices",
                CONFIG,
                Status.WARN,
                f"{VISIBLE_VAR}={value!r} → GPU {gpus}; {r.warnings[0]}",
                "run `gpudiag visible` for details",
            )
        ]
    return [CheckResult("env.visible_devices", CONFIG, Status.PASS, f"{VISIBLE_VAR}={value!r} → GPU {gpus}")]


def environment(facts: Facts, options: Options) -> list[CheckResult]:
    env = facts.machine.env_map
    found = [f"{k}={env[k]}" for k in DCGM_WARNED_VARS if k in env]
    if env.get("CUDA_LAUNCH_BLOCKING", "0") not in ("", "0"):
        found.append("CUDA_LAUNCH_BLOCKING=1 (serialises every kernel launch)")
    if found:
        return [
            CheckResult(
                "env.variables",
                CONFIG,
                Status.WARN,
                f"set: {'; '.join(found)}",
                "unset these for production runs (debuggers, profilers and injection slow or change CUDA)",
            )
        ]
    return [CheckResult("env.variables", CONFIG, Status.PASS, "no debugging/profiling variables set")]


# --- configuration -----------------------------------------------------------------


def mig(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        current, pending = gpu.mig_mode_current, gpu.mig_mode_pending
        if current.value is None:
            return Status.SKIP, f"MIG {_skip_reason(current.reason, current.detail)}", ""
        if current.value and not gpu.mig_devices:
            return (
                Status.FAIL,
                "MIG enabled with no instances: CUDA workloads cannot run",
                "create instances (nvidia-smi mig -cgi … -C) or disable MIG (nvidia-smi -mig 0)",
            )
        if pending.value is not None and pending.value != current.value:
            return (
                Status.WARN,
                f"MIG mode changes to {'on' if pending.value else 'off'} at the next GPU reset",
                "reset the GPU to apply it",
            )
        return (
            Status.PASS,
            f"MIG {'enabled, ' + str(len(gpu.mig_devices)) + ' instance(s)' if current.value else 'disabled'}",
            "",
        )

    return _per_gpu("config.mig", CONFIG, facts, judge)


def compute_mode(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        mode = gpu.compute_mode.value
        if mode is None:
            return Status.SKIP, _skip_reason(gpu.compute_mode.reason, gpu.compute_mode.detail), ""
        if mode is ComputeMode.PROHIBITED:
            return Status.FAIL, "compute mode Prohibited: no CUDA context can be created", "nvidia-smi -c DEFAULT"
        if mode is ComputeMode.EXCLUSIVE_PROCESS:
            return Status.WARN, "compute mode Exclusive_Process: another process's context blocks the job", ""
        return Status.PASS, f"compute mode {mode.value}", ""

    return _per_gpu("config.compute_mode", CONFIG, facts, judge)


def persistence(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        on = gpu.persistence_mode.value
        if on is None:
            return Status.SKIP, _skip_reason(gpu.persistence_mode.reason, gpu.persistence_mode.detail), ""
        if not on:
            return (
                Status.WARN,
                "persistence mode off: every job pays 1-3 s of driver initialisation",
                "enable nvidia-persistenced (or nvidia-smi -pm 1)",
            )
        return Status.PASS, "persistence mode on", ""

    return _per_gpu("config.persistence", CONFIG, facts, judge)


# --- health ------------------------------------------------------------------------


def ecc(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        count = gpu.ecc_errors.volatile_uncorrected
        if gpu.ecc_mode_current.value is False:
            return Status.SKIP, "ECC disabled", ""
        if count.value is None:
            return Status.SKIP, _skip_reason(count.reason, count.detail), ""
        if count.value > 0:
            return (
                Status.FAIL,
                f"{count.value} uncorrected ECC error(s) since the driver loaded",
                "drain the node; reset the GPU and run a memory diagnostic (dcgmi diag -r 3)",
            )
        return Status.PASS, "no uncorrected ECC errors", ""

    return _per_gpu("health.ecc", HEALTH, facts, judge)


def retired_pages(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        pages = gpu.retired_pages
        if pages.value is None:
            return Status.SKIP, _skip_reason(pages.reason, pages.detail), ""
        p = pages.value
        total = p.single_bit + p.double_bit
        if p.pending:
            return Status.FAIL, f"page retirement pending ({total} retired)", "reset the GPU to retire the pages"
        if total >= RETIRED_PAGES_LIMIT:
            return Status.FAIL, f"{total} retired pages (limit {RETIRED_PAGES_LIMIT})", "replace the GPU (RMA)"
        return Status.PASS, f"{total} retired pages", ""

    return _per_gpu("health.retired_pages", HEALTH, facts, judge)


def row_remap(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        rows = gpu.remapped_rows
        if rows.value is None:
            return Status.SKIP, _skip_reason(rows.reason, rows.detail), ""
        r = rows.value
        if r.failure:
            return Status.FAIL, "row remapping failed", "replace the GPU (RMA)"
        if r.pending:
            return (
                Status.FAIL,
                f"row remap pending ({r.uncorrectable} uncorrectable remaps)",
                "reset the GPU to apply it",
            )
        if r.uncorrectable >= UNCORRECTABLE_REMAP_LIMIT:
            return Status.FAIL, f"{r.uncorrectable} uncorrectable row remaps", "replace the GPU (RMA)"
        return Status.PASS, f"{r.correctable} correctable, {r.uncorrectable} uncorrectable remaps", ""

    return _per_gpu("health.row_remap", HEALTH, facts, judge)


def recovery_action(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        action = gpu.recovery_action
        if action.value is None:
            return Status.SKIP, _skip_reason(action.reason, action.detail), ""
        if action.value:
            what, fix = RECOVERY_ACTIONS.get(action.value, (f"recovery action {action.value}", "see NVIDIA's docs"))
            return Status.FAIL, f"NVML: {what}", fix
        return Status.PASS, "no recovery action needed", ""

    return _per_gpu("health.recovery_action", HEALTH, facts, judge)


def clock_events(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        reasons = gpu.clock_event_reasons
        if reasons.value is None:
            return Status.SKIP, _skip_reason(reasons.reason, reasons.detail), ""
        bits = reasons.value
        names = [name for bit, name in CLOCK_EVENT_NAMES.items() if bits & bit]
        if bits & (0x40 | 0x80):
            return (
                Status.FAIL,
                f"hardware throttling: {', '.join(names)}",
                "check cooling and power delivery (HwThermal / HwPowerBrake)",
            )
        if bits & (0x8 | 0x20):
            return Status.WARN, f"slowed down: {', '.join(names)}", "check cooling and airflow"
        return Status.PASS, ", ".join(names) if names else "no clock events", ""

    return _per_gpu("health.clock_events", HEALTH, facts, judge)


def temperature(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        temp = gpu.temperature_c.value
        if temp is None:
            return Status.SKIP, _skip_reason(gpu.temperature_c.reason, gpu.temperature_c.detail), ""
        slow = gpu.temperature_slowdown_c.value
        if slow is None:
            return Status.PASS, f"{temp} °C (no slowdown threshold reported)", ""
        if temp >= slow:
            return Status.FAIL, f"{temp} °C at or above the slowdown threshold {slow} °C", "check cooling"
        if temp >= slow - TEMP_MARGIN_C:
            return Status.WARN, f"{temp} °C, within {TEMP_MARGIN_C} °C of slowdown ({slow} °C)", "check cooling"
        return Status.PASS, f"{temp} °C (slowdown at {slow} °C)", ""

    return _per_gpu("health.temperature", HEALTH, facts, judge)


def inforom(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        valid = gpu.inforom_valid
        if valid.value is None:
            return Status.SKIP, _skip_reason(valid.reason, valid.detail), ""
        if not valid.value:
            return Status.FAIL, "InfoROM is corrupted", "update or reflash the InfoROM (NVIDIA support)"
        return Status.PASS, "InfoROM valid", ""

    return _per_gpu("health.inforom", HEALTH, facts, judge)


def leftover_processes(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        procs = gpu.processes
        if procs.value is None:
            return Status.SKIP, f"process list {_skip_reason(procs.reason, procs.detail)}", ""
        compute = [p for p in procs.value if p.kind.value in ("C", "C+G")]
        graphics = [p for p in procs.value if p.kind.value == "G"]
        if compute:
            pids = ", ".join(str(p.pid) for p in compute)
            status = Status.WARN if options.allow_processes else Status.FAIL
            return (
                status,
                f"{len(compute)} compute process(es) already running: PID {pids}",
                "stop them, or pass --allow-processes on shared nodes",
            )
        if graphics:
            return Status.WARN, f"{len(graphics)} graphics process(es) (e.g. Xorg) use this GPU", ""
        return Status.PASS, "no processes", ""

    return _per_gpu("health.processes", HEALTH, facts, judge)


def free_memory(facts: Facts, options: Options) -> list[CheckResult]:
    from gpudiag.units import human_bytes

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        mem = gpu.memory.value
        if mem is None:
            return Status.SKIP, _skip_reason(gpu.memory.reason, gpu.memory.detail), ""
        free = human_bytes(mem.free_bytes)
        if options.min_free_bytes is not None and mem.free_bytes < options.min_free_bytes:
            return (
                Status.FAIL,
                f"{free} free, below --min-free {human_bytes(options.min_free_bytes)}",
                "free the memory (see `gpudiag memory`) or pick another GPU",
            )
        return Status.PASS, f"{free} free of {human_bytes(mem.total_bytes)}", ""

    return _per_gpu("health.free_memory", HEALTH, facts, judge)


# --- requirements ------------------------------------------------------------------


def requirements(facts: Facts, options: Options) -> list[CheckResult]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    m, out = facts.machine, []
    ok_nvml = m.nvml.status is NvmlStatus.OK
    if options.require_driver:
        have = m.nvml.driver_version.value
        if have is None:
            out.append(CheckResult("req.driver", REQUIRE, Status.FAIL, "driver version unknown (NVML unavailable)"))
        else:
            good = parse_version(have) >= parse_version(options.require_driver)
            out.append(
                CheckResult(
                    "req.driver",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"driver {have} {'≥' if good else '<'} {options.require_driver}",
                    "" if good else "upgrade the driver",
                )
            )
    if options.require_cuda:
        want = parse_version(options.require_cuda)
        cuda = m.nvml.cuda_driver_version.value
        if cuda is None:
            out.append(CheckResult("req.cuda", REQUIRE, Status.FAIL, "driver's CUDA version unknown"))
        else:
            good = (cuda // 1000, (cuda % 1000) // 10) >= want[:2]
            out.append(
                CheckResult(
                    "req.cuda",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"driver supports CUDA {cuda_version_text(cuda)}, required {options.require_cuda}",
                    "" if good else "upgrade the driver",
                    "driver",
                )
            )
        build = (
            facts.torch.value.cuda if facts.torch.value else (m.torch_build.value.cuda if m.torch_build.value else None)
        )
        if build is None:
            out.append(
                CheckResult("req.cuda", REQUIRE, Status.FAIL, "no CUDA build of torch", "install a CUDA torch", "torch")
            )
        else:
            good = parse_version(build)[:2] >= want[:2]
            out.append(
                CheckResult(
                    "req.cuda",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"torch built for CUDA {build}, required {options.require_cuda}",
                    "" if good else "install a torch built for a newer CUDA",
                    "torch",
                )
            )
    if options.require_capability:
        want = parse_version(options.require_capability)
        for gpu in _usable(facts) if ok_nvml else []:
            cc = gpu.compute_capability.value
            good = cc is not None and cc >= (want[0], want[1] if len(want) > 1 else 0)
            cc_text = f"{cc[0]}.{cc[1]}" if cc else "unknown"
            out.append(
                CheckResult(
                    "req.capability",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"compute capability {cc_text}, required ≥ {options.require_capability}",
                    target=gpu.label,
                )
            )
    if options.require_gpu:
        needle = options.require_gpu.lower()
        for gpu in _usable(facts) if ok_nvml else []:
            name = gpu.name.get("?")
            good = needle in name.lower()
            out.append(
                CheckResult(
                    "req.gpu",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"{name} {'matches' if good else 'does not match'} {options.require_gpu!r}",
                    target=gpu.label,
                )
            )
    if options.require_torch:
        version = (
            facts.torch.value.version
            if facts.torch.value
            else (m.torch_build.value.version if m.torch_build.value else None)
        )
        if version is None:
            out.append(CheckResult("req.torch", REQUIRE, Status.FAIL, "torch not found", "install torch"))
        else:
            try:
                good = Version(version) in SpecifierSet(options.require_torch, prereleases=True)
            except InvalidVersion:
                good = False
            out.append(
                CheckResult(
                    "req.torch",
                    REQUIRE,
                    Status.PASS if good else Status.FAIL,
                    f"torch {version} {'satisfies' if good else 'does not satisfy'} {options.require_torch}",
                )
            )
    if (options.require_capability or options.require_gpu) and not ok_nvml:
        out.append(CheckResult("req.gpus", REQUIRE, Status.FAIL, "GPU requirements cannot be met: NVML unavailable"))
    return out


# --- functional test ---------------------------------------------------------------


def functional(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.functional is None:
        return [CheckResult("func.gpu", FUNCTIONAL, Status.SKIP, facts.functional_skip_reason or "not run")]
    if not facts.functional:
        return [CheckResult("func.gpu", FUNCTIONAL, Status.SKIP, "no CUDA device to test")]
    out = []
    for r in facts.functional:
        target = (
            f"GPU {r.gpu_index}" if r.gpu_index is not None else (f"cuda:{r.torch_index}" if r.torch_index >= 0 else "")
        )
        if not r.ok:
            out.append(
                CheckResult("func.gpu", FUNCTIONAL, Status.FAIL, r.error, "drain the node and investigate", target)
            )
            continue
        parts = [
            f"context {r.context_seconds:.2f} s" if r.context_seconds is not None else "",
            f"fp32 matmul {r.tflops:.1f} TFLOP/s" if r.tflops is not None else "",
            f"rel. error {r.matmul_rel_error:.1e}" if r.matmul_rel_error is not None else "",
        ]
        if r.loaded_pcie is not None:
            parts.append(f"PCIe Gen{r.loaded_pcie[0]} x{r.loaded_pcie[1]} under load")
        finding = ", ".join(p for p in parts if p)
        status, fix = Status.PASS, ""
        if r.memory_ok is False:
            status, finding, fix = Status.FAIL, "memory pattern read back wrong", "drain the node; run dcgmi diag -r 3"
        elif r.matmul_rel_error is None or not r.matmul_rel_error <= MATMUL_TOLERANCE:
            status, fix = Status.FAIL, "wrong results: drain the node"
            finding = f"matmul relative error {r.matmul_rel_error} exceeds {MATMUL_TOLERANCE} (or NaN/Inf)"
        elif r.loaded_clock_events is not None and r.loaded_clock_events & (0x40 | 0x80):
            status, fix = Status.WARN, "check cooling and power"
            finding += "; hardware throttling under load"
        out.append(CheckResult("func.gpu", FUNCTIONAL, status, finding, fix, target))
    return out


CHECKS: tuple[Check, ...] = (
    Check("nvml.init", DRIVER, "NVML initialises", nvml_init),
    Check("nvml.gpu_count", DRIVER, "GPU count", gpu_count),
    Check("nvml.gpu_lost", DRIVER, "no lost GPU", gpu_lost),
    Check("host.device_nodes", DRIVER, "/dev/nvidia* nodes", device_nodes),
    Check("host.kernel_modules", DRIVER, "nvidia_uvm loaded, no nouveau", kernel_modules),
    Check("compat.torch", COMPAT, "torch imports and sees CUDA", torch_works),
    Check("compat.driver_cuda", COMPAT, "driver CUDA vs torch CUDA", driver_cuda),
    Check("compat.arch", COMPAT, "GPU architecture in torch's build", compute_capability),
    Check("compat.cudnn", COMPAT, "cuDNN runtime vs build", cudnn),
    Check("compat.nccl", COMPAT, "NCCL for several GPUs", nccl),
    Check("env.visible_devices", CONFIG, "CUDA_VISIBLE_DEVICES", visible_devices),
    Check("env.variables", CONFIG, "no debug/profiling variables", environment),
    Check("config.mig", CONFIG, "MIG mode", mig),
    Check("config.compute_mode", CONFIG, "compute mode", compute_mode),
    Check("config.persistence", CONFIG, "persistence mode", persistence),
    Check("health.ecc", HEALTH, "uncorrected ECC errors", ecc),
    Check("health.retired_pages", HEALTH, "retired pages", retired_pages),
    Check("health.row_remap", HEALTH, "row remapping", row_remap),
    Check("health.recovery_action", HEALTH, "recovery action", recovery_action),
    Check("health.clock_events", HEALTH, "clock events (throttling)", clock_events),
    Check("health.temperature", HEALTH, "temperature", temperature),
    Check("health.inforom", HEALTH, "InfoROM", inforom),
    Check("health.processes", HEALTH, "leftover processes", leftover_processes),
    Check("health.free_memory", HEALTH, "free memory", free_memory),
    Check("req", REQUIRE, "requirements (--require-*)", requirements),
    Check("func.gpu", FUNCTIONAL, "functional test", functional),
)

CHECK_IDS = tuple(c.id for c in CHECKS)


def run(facts: Facts, options: Options, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[CheckResult]:
    """Every selected check's results, in the registry's order. ``only``/``skip`` match ids or prefixes."""

    def picked(check_id: str) -> bool:
        def hit(patterns: tuple[str, ...]) -> bool:
            return any(check_id == p or check_id.startswith(p.rstrip(".") + ".") for p in patterns)

        return (not only or hit(only)) and not hit(skip)

    results: list[CheckResult] = []
    for check in CHECKS:
        if picked(check.id):
            results.extend(check.rule(facts, options))
    return results
