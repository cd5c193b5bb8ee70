"""Every check rule on example machines (and targeted changes to them): pass, warn, fail and skip.

One table of cases; a coverage test makes sure each rule in the registry is exercised for every
status it can produce, so a new rule cannot land untested.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import pytest

from gpudiag.checks import Action, CheckResult, Facts, FunctionalResult, Options, Scope, Status, rules
from gpudiag.checks.base import groups
from gpudiag.checks.deep.levels import MAX_LEVEL
from gpudiag.model import (
    ALL_GROUPS,
    ComputeMode,
    FactGroup,
    GpuProcess,
    HostProcess,
    HostState,
    Machine,
    PcieLink,
    ProcessKind,
    Reading,
    Reason,
    RemappedRows,
    RetiredPages,
    TorchRuntime,
    Utilization,
)
from gpudiag.probe.collect import collect
from gpudiag.probe.devices import DeviceFacts, DeviceNode
from gpudiag.readings import GPU_READINGS

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP

# --- building facts ------------------------------------------------------------------


@functools.cache  # frozen: every case may start from the same reading
def facts(name: str) -> Facts:
    machine = collect(name)
    return Facts(machine=machine, torch=machine.torch_runtime, devices=None)


def with_machine(f: Facts, **changes: object) -> Facts:
    machine: Machine = msgspec.structs.replace(f.machine, **changes)  # type: ignore[arg-type]
    return msgspec.structs.replace(f, machine=machine)


def with_gpu(f: Facts, index: int = 0, **changes: object) -> Facts:
    gpus = list(f.machine.gpus)
    gpus[index] = msgspec.structs.replace(gpus[index], **changes)  # type: ignore[arg-type]
    return with_machine(f, gpus=tuple(gpus))


def with_env(f: Facts, *pairs: tuple[str, str]) -> Facts:
    return with_machine(f, env=pairs)


def runtime(f: Facts | None = None, **changes: object) -> Reading[TorchRuntime]:
    """``f``'s recorded torch runtime (or the P100 machine's), changed."""
    base = (f or facts("p100-torch-cu128")).torch.value
    assert base is not None
    return Reading.of(msgspec.structs.replace(base, **changes))  # type: ignore[arg-type]


def with_torch(f: Facts, torch: Reading[TorchRuntime]) -> Facts:
    return msgspec.structs.replace(f, torch=torch)


def h100(**runtime_changes: object) -> Facts:
    """The healthy 8×H100 node with a working cu124 torch that sees all eight GPUs."""
    changes: dict[str, object] = {
        "version": "2.5.1+cu124",
        "cuda": "12.4",
        "device_count": 8,
        "arch_list": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        "cudnn_version": 90100,
        "cudnn_compiled": (9, 1, 0),
    }
    changes.update(runtime_changes)
    return with_torch(facts("h100x8-healthy"), runtime(None, **changes))


def devices(
    missing: tuple[str, ...] = (),
    denied: tuple[str, ...] = (),
    modules: tuple[str, ...] = ("nvidia", "nvidia_uvm"),
    known: bool = True,
    nouveau: tuple[str, ...] = (),
    helper: bool = False,
) -> DeviceFacts:
    nodes = tuple(
        DeviceNode(f"/dev/{n}", n not in missing, n not in missing and n not in denied)
        for n in ("nvidiactl", "nvidia-uvm", "nvidia0")
    )
    return DeviceFacts(nodes, frozenset(modules), known, nouveau, helper)


def live(f: Facts, d: DeviceFacts) -> Facts:
    return msgspec.structs.replace(f, devices=d)


def in_container(f: Facts) -> Facts:
    return with_machine(f, host=msgspec.structs.replace(f.machine.host, in_container=True))


def ran(f: Facts, *results: FunctionalResult) -> Facts:
    return msgspec.structs.replace(f, functional=results)


def func(**changes: object) -> FunctionalResult:
    base = FunctionalResult(0, 0, True, "", 0.35, True, 2.1e-6, 48.2, (5, 16), 0)
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def not_supported() -> Reading[object]:
    return Reading.missing(Reason.NOT_SUPPORTED)


def process(pid: int, kind: ProcessKind) -> GpuProcess:
    host = HostProcess(HostState.FOUND, Reading.of("root"), Reading.of("x"), Reading.of("x"))
    return GpuProcess(pid, kind, Reading.of(1 << 30), host)


def link(gen: int, width: int, gen_max: int = 5, gpu_max: int = 5, width_max: int = 16) -> PcieLink:
    return PcieLink(Reading.of(gen), Reading.of(gen_max), Reading.of(gpu_max), Reading.of(width), Reading.of(width_max))


def no_link() -> PcieLink:
    missing: Reading[int] = Reading.missing(Reason.NOT_SUPPORTED)
    return PcieLink(missing, missing, missing, missing, missing)


# --- the cases -----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    check_id: str
    expected: Status | tuple[Status, ...]  # one status for every result, or one per result
    build: Callable[[], Facts]
    options: Options = field(default_factory=Options)
    says: str = ""  # a piece of the finding or fix that must appear
    name: str = ""


CASES = [
    # driver and NVML
    Case("nvml.init", PASS, lambda: facts("h100x8-healthy"), says="driver 550.54.15"),
    Case("nvml.init", FAIL, lambda: facts("driver-mismatch"), says="loaded kernel module: 535.129.03", name="mismatch"),
    Case("nvml.init", FAIL, lambda: facts("no-driver"), says="modprobe nvidia", name="no driver"),
    Case("nvml.init", FAIL, lambda: facts("no-nvml-library"), says="NVIDIA runtime", name="no library"),
    Case("nvml.init", FAIL, lambda: facts("no-permission"), says="/dev/nvidia*", name="no permission"),
    Case("nvml.gpu_count", PASS, lambda: facts("h100x8-healthy"), Options(expect_gpus=8), says="as expected"),
    Case("nvml.gpu_count", FAIL, lambda: facts("h100x8-healthy"), Options(expect_gpus=4), says="expected 4"),
    Case("nvml.gpu_count", FAIL, lambda: facts("zero-gpus"), says="NVML sees no GPU", name="zero"),
    Case("nvml.gpu_count", PASS, lambda: facts("zero-gpus"), Options(expect_gpus=0), name="zero expected"),
    Case("nvml.gpu_count", SKIP, lambda: facts("no-driver")),
    Case("nvml.gpu_lost", PASS, lambda: facts("h100x8-healthy")),
    Case("nvml.gpu_lost", FAIL, lambda: facts("gpu-lost"), says="Xid 79"),
    Case("nvml.gpu_lost", SKIP, lambda: facts("no-driver")),
    Case("host.device_nodes", SKIP, lambda: facts("h100x8-healthy"), says="not recorded in this snapshot"),
    Case("host.device_nodes", PASS, lambda: live(facts("h100x8-healthy"), devices())),
    Case(
        "host.device_nodes", FAIL, lambda: live(facts("h100x8-healthy"), devices(missing=("nvidia0",))), says="nvidia0"
    ),
    Case(
        "host.device_nodes",
        FAIL,
        lambda: live(facts("h100x8-healthy"), devices(missing=("nvidia-uvm",))),
        says="CUDA unknown error",
        name="uvm",
    ),
    Case(
        "host.device_nodes",
        WARN,
        lambda: live(facts("h100x8-healthy"), devices(missing=("nvidia-uvm",), helper=True)),
        says="setuid nvidia-modprobe",
        name="uvm with helper",
    ),
    Case(
        "host.device_nodes",
        FAIL,
        lambda: in_container(live(facts("h100x8-healthy"), devices(missing=("nvidia-uvm",), helper=True))),
        says="NVIDIA runtime",
        name="uvm in a container",
    ),
    Case("host.device_nodes", FAIL, lambda: live(facts("h100x8-healthy"), devices(denied=("nvidia0",))), says="access"),
    Case("host.kernel_modules", SKIP, lambda: facts("h100x8-healthy")),
    Case("host.kernel_modules", SKIP, lambda: live(facts("h100x8-healthy"), devices(known=False)), name="unreadable"),
    Case("host.kernel_modules", PASS, lambda: live(facts("h100x8-healthy"), devices())),
    Case(
        "host.kernel_modules",
        FAIL,
        lambda: live(facts("h100x8-healthy"), devices(modules=("nvidia",))),
        says="modprobe nvidia_uvm",
    ),
    Case(
        "host.kernel_modules",
        WARN,
        lambda: live(facts("h100x8-healthy"), devices(modules=("nvidia",), helper=True)),
        says="on first use",
        name="helper",
    ),
    Case("host.kernel_modules", FAIL, lambda: live(facts("no-driver"), devices(modules=())), says="not loaded"),
    Case("host.kernel_modules", SKIP, lambda: live(facts("h100x8-healthy"), devices(modules=())), name="WSL"),
    Case("host.nouveau", SKIP, lambda: facts("h100x8-healthy")),
    Case("host.nouveau", PASS, lambda: live(facts("h100x8-healthy"), devices())),
    Case(
        "host.nouveau",
        FAIL,
        lambda: live(facts("h100x8-healthy"), devices(modules=("nouveau",), nouveau=("0000:01:00.0",))),
        says="0000:01:00.0",
    ),
    Case("host.nouveau", WARN, lambda: live(facts("h100x8-healthy"), devices(modules=("nouveau",))), says="blacklist"),
    # compatibility
    Case("compat.torch", PASS, h100, says="sees 8 device(s)"),
    Case("compat.torch", WARN, lambda: h100(device_count=4), says="torch sees 4 CUDA device(s), NVML implies 8"),
    Case(
        "compat.torch",
        PASS,
        lambda: with_env(h100(device_count=2), ("CUDA_VISIBLE_DEVICES", "0,1")),
        name="narrowed on purpose",
    ),
    Case(
        "compat.torch",
        FAIL,
        lambda: with_torch(facts("h100x8-healthy"), runtime(cuda=None, cuda_available=False, version="2.13.0+cpu")),
        says="CPU-only",
        name="cpu",
    ),
    Case("compat.torch", FAIL, lambda: facts("misconfigured-node"), says="hides every GPU", name="no device"),
    Case(
        "compat.torch",
        FAIL,
        lambda: with_torch(
            facts("h100x8-healthy"),
            runtime(cuda_available=False, cuda_error="torch hung in CUDA initialisation: no answer within 90 s"),
        ),
        says="hung in CUDA initialisation",
        name="hung",
    ),
    Case(
        "compat.torch",
        FAIL,
        lambda: with_torch(
            facts("h100x8-healthy"), Reading.missing(Reason.UNKNOWN_ERROR, "torch fails to import: OSError")
        ),
        says="OSError",
        name="import error",
    ),
    Case(
        "compat.torch",
        SKIP,
        lambda: with_torch(facts("h100x8-healthy"), Reading.missing(Reason.NOT_FOUND, "torch is not installed for /x")),
        says="not installed",
        name="not installed",
    ),
    Case(
        "compat.torch",
        FAIL,
        lambda: with_torch(facts("h100x8-healthy"), Reading.missing(Reason.NOT_FOUND, "torch is not installed for /x")),
        Options(torch_expected=True),
        says="not installed",
        name="not installed in --python",
    ),
    Case("compat.torch", SKIP, lambda: facts("h100x8-healthy"), says="not probed", name="replay"),
    Case("compat.driver_cuda", PASS, lambda: facts("h100x8-healthy"), says="built for CUDA 12.4"),
    Case("compat.driver_cuda", WARN, lambda: facts("driver535-torch-cu128"), says="error 222"),
    Case(
        "compat.driver_cuda",
        FAIL,
        lambda: with_torch(facts("v100x4-tutorial"), runtime(cuda="12.1", version="2.1.0+cu121")),
        says="too old",
    ),
    Case("compat.driver_cuda", SKIP, lambda: facts("gtx1050-desktop"), says="no torch"),
    Case("compat.driver_cuda", SKIP, lambda: facts("no-driver"), name="no NVML"),
    Case(
        "compat.driver_cuda",
        SKIP,
        lambda: with_torch(facts("h100x8-healthy"), runtime(cuda=None, version="2.13.0+cpu")),
        says="not a CUDA build",
        name="cpu",
    ),
    Case("compat.arch", PASS, lambda: facts("driver535-torch-cu128"), says="native kernels (sm_86)"),
    Case("compat.arch", FAIL, lambda: facts("p100-torch-cu128"), says="cu126", name="old GPU"),
    Case("compat.arch", FAIL, lambda: facts("rtx5090-torch-cu124"), says="CUDA ≥ 12.8", name="new GPU"),
    Case("compat.arch", WARN, lambda: h100(arch_list=("sm_70", "sm_80", "compute_80")), says="JIT", name="PTX"),
    Case("compat.arch", SKIP, lambda: facts("h100x8-healthy"), name="not recorded"),
    Case("compat.arch", SKIP, lambda: h100(cuda=None), says="CPU-only", name="cpu"),
    Case("compat.arch", SKIP, lambda: h100(arch_list=()), says="no compiled", name="empty"),
    Case("compat.cudnn", PASS, lambda: facts("p100-torch-cu128"), says="cuDNN 9.7.1 (torch built with 9.7.1)"),
    Case(
        "compat.cudnn",
        FAIL,
        lambda: with_torch(facts("p100-torch-cu128"), runtime(cudnn_version=90100, cudnn_compiled=(9, 7, 1))),
        says="LD_LIBRARY_PATH",
        name="older runtime",
    ),
    Case(
        "compat.cudnn",
        FAIL,
        lambda: with_torch(facts("p100-torch-cu128"), runtime(cudnn_version=8902, cudnn_compiled=(9, 1, 0))),
        says="cuDNN 8.9.2",
        name="other major",
    ),
    Case(
        "compat.cudnn",
        FAIL,
        lambda: with_torch(facts("p100-torch-cu128"), runtime(cudnn_version=91100, cudnn_compiled=(9, 11, 0))),
        says="below sm_75",
        name="9.11 on Pascal",
    ),
    Case("compat.cudnn", PASS, lambda: h100(cudnn_version=91100, cudnn_compiled=(9, 11, 0)), name="9.11 on Hopper"),
    Case("compat.cudnn", SKIP, lambda: h100(cudnn_version=None), says="no cuDNN"),
    Case("compat.cudnn", SKIP, lambda: facts("h100x8-healthy"), name="not recorded"),
    Case("compat.nccl", PASS, lambda: facts("p100-torch-cu128"), says="NCCL 2.26.2"),
    Case("compat.nccl", WARN, lambda: h100(nccl_version=None), says="8 GPUs"),
    Case("compat.nccl", SKIP, lambda: with_torch(facts("p100-torch-cu128"), runtime(nccl_version=None))),
    # configuration
    Case("env.visible_devices", PASS, lambda: facts("h100x8-healthy"), says="unset"),
    Case("env.visible_devices", PASS, lambda: facts("v100x4-tutorial"), says="cuda:3=GPU 3", name="set"),
    Case("env.visible_devices", FAIL, lambda: facts("misconfigured-node"), says="'-1' leaves no device"),
    Case(
        "env.visible_devices",
        FAIL,
        lambda: with_env(facts("h100x8-healthy"), ("CUDA_VISIBLE_DEVICES", "")),
        says="CUDA_ERROR_NO_DEVICE (100)",
        name="empty",
    ),
    Case(
        "env.visible_devices",
        FAIL,
        lambda: with_env(facts("h100x8-healthy"), ("CUDA_VISIBLE_DEVICES", "0,0")),
        says="CUDA_ERROR_INVALID_DEVICE (101)",
        name="repeated device: cuInit 101 on driver 580",
    ),
    Case(
        "env.visible_devices",
        WARN,
        lambda: with_env(
            facts("h100x8-healthy"), ("CUDA_VISIBLE_DEVICES", "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2000,0")
        ),
        says="cuda:0=GPU 0; the list mixes integer indices and UUIDs",
        name="mixed list ends at the other form (driver 580), not a repeat",
    ),
    Case(
        "env.visible_devices",
        WARN,
        lambda: with_env(facts("mixed-gpus-workstation"), ("CUDA_VISIBLE_DEVICES", "0")),
        says="PCI_BUS_ID",
        name="heuristic order",
    ),
    Case(
        "env.visible_devices",
        PASS,
        lambda: with_env(
            with_gpu(facts("h100x8-healthy"), 1, compute_mode=Reading.of(ComputeMode.PROHIBITED)),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
        ),
        name="compute mode is reported by its own check",
    ),
    Case("env.visible_devices", SKIP, lambda: facts("no-driver")),
    Case("env.variables", PASS, lambda: facts("h100x8-healthy")),
    Case("env.variables", WARN, lambda: facts("misconfigured-node"), says="CUDA_LAUNCH_BLOCKING=1"),
    Case(
        "env.variables",
        WARN,
        lambda: with_env(facts("h100x8-healthy"), ("CUDA_INJECTION64_PATH", "/opt/nsight/libinj.so")),
        says="CUDA_INJECTION64_PATH",
        name="injection",
    ),
    Case(
        "env.variables",
        PASS,
        lambda: with_env(facts("h100x8-healthy"), ("CUDA_LAUNCH_BLOCKING", "0")),
        name="launch blocking off",
    ),
    Case("config.mig", PASS, lambda: facts("a100-mig"), says="instance(s)"),
    Case("config.mig", PASS, lambda: facts("h100x8-healthy"), says="MIG disabled", name="disabled"),
    Case("config.mig", FAIL, lambda: facts("a100-mig-no-instances"), says="cannot run"),
    Case(
        "config.mig",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), mig_mode_pending=Reading.of(True)),
        says="next GPU reset",
    ),
    Case("config.mig", SKIP, lambda: facts("gtx1050-desktop")),
    Case("config.compute_mode", (PASS, FAIL), lambda: facts("misconfigured-node"), says="Prohibited"),
    Case(
        "config.compute_mode",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), compute_mode=Reading.of(ComputeMode.EXCLUSIVE_PROCESS)),
        says="Exclusive_Process",
    ),
    Case(
        "config.compute_mode",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), compute_mode=not_supported()),
    ),
    Case("config.persistence", PASS, lambda: facts("h100x8-healthy")),
    Case("config.persistence", WARN, lambda: facts("misconfigured-node"), says="nvidia-persistenced"),
    Case(
        "config.persistence",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), persistence_mode=not_supported()),
    ),
    # health
    Case("health.ecc", PASS, lambda: facts("h100x8-healthy")),
    Case("health.ecc", FAIL, lambda: facts("a100-ecc-errors"), says="2 uncorrected ECC error(s)"),
    Case("health.ecc", SKIP, lambda: facts("geforce-no-ecc-power"), says="not supported"),
    Case(
        "health.ecc",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), ecc_mode_current=Reading.of(False)),
        says="ECC disabled",
        name="disabled",
    ),
    Case("health.retired_pages", PASS, lambda: facts("v100x4-tutorial")),
    Case(
        "health.retired_pages",
        (FAIL, PASS, PASS, PASS),
        lambda: with_gpu(facts("v100x4-tutorial"), retired_pages=Reading.of(RetiredPages(60, 3, False))),
        says="63 retired pages",
    ),
    Case(
        "health.retired_pages",
        (FAIL, PASS, PASS, PASS),
        lambda: with_gpu(facts("v100x4-tutorial"), retired_pages=Reading.of(RetiredPages(1, 0, True))),
        says="pending",
        name="pending",
    ),
    Case("health.retired_pages", SKIP, lambda: facts("geforce-no-ecc-power")),
    Case("health.row_remap", PASS, lambda: facts("h100x8-healthy")),
    Case("health.row_remap", FAIL, lambda: facts("a100-ecc-errors"), says="row remap pending"),
    Case(
        "health.row_remap",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), remapped_rows=Reading.of(RemappedRows(0, 2, False, True))),
        says="RMA",
        name="failure",
    ),
    Case(
        "health.row_remap",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), remapped_rows=Reading.of(RemappedRows(0, 512, False, False))),
        says="512 uncorrectable",
        name="count",
    ),
    Case("health.row_remap", SKIP, lambda: facts("geforce-no-ecc-power")),
    Case("health.recovery_action", PASS, lambda: facts("h100x8-healthy")),
    Case("health.recovery_action", FAIL, lambda: facts("a100-ecc-errors"), says="GPU reset required"),
    Case("health.recovery_action", SKIP, lambda: facts("geforce-no-ecc-power")),
    Case("health.clock_events", PASS, lambda: facts("h100x8-healthy"), says="GpuIdle"),
    Case("health.clock_events", FAIL, lambda: facts("a100-ecc-errors"), says="HwThermalSlowdown"),
    Case(
        "health.clock_events",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), clock_event_reasons=Reading.of(0x20)),
        says="SwThermalSlowdown",
    ),
    Case(
        "health.clock_events",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), clock_event_reasons=Reading.of(0x80 | 0x4)),
        says="HwPowerBrakeSlowdown",
        name="power brake",
    ),
    Case(
        "health.clock_events",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), clock_event_reasons=not_supported()),
    ),
    Case("health.temperature", PASS, lambda: facts("h100x8-healthy"), says="slowdown at 87 °C"),
    Case("health.temperature", WARN, lambda: facts("a100-ecc-errors"), says="within 5 °C"),
    Case(
        "health.temperature",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), temperature_c=Reading.of(88)),
        says="at or above",
    ),
    Case(
        "health.temperature",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), temperature_c=Reading.of(75)),
        Options(temp_margin_c=15),
        says="within 15 °C",
        name="--temp-margin",
    ),
    Case(
        "health.temperature",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), temperature_c=not_supported()),
    ),
    Case("health.inforom", PASS, lambda: facts("h100x8-healthy")),
    Case(
        "health.inforom",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), inforom_valid=Reading.of(False)),
        says="corrupted",
    ),
    Case(
        "health.inforom",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), inforom_valid=not_supported()),
    ),
    Case("health.processes", PASS, lambda: facts("h100x8-healthy")),
    Case("health.processes", FAIL, lambda: facts("gtx1050-desktop"), says="PID 4242"),
    Case("health.processes", WARN, lambda: facts("gtx1050-desktop"), Options(allow_processes=True), name="allowed"),
    Case(
        "health.processes",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), processes=Reading.of((process(983, ProcessKind.GRAPHICS),))),
        says="graphics",
        name="graphics",
    ),
    Case(
        "health.processes",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), processes=Reading.missing(Reason.NO_PERMISSION)),
        says="no permission",
    ),
    Case("health.free_memory", PASS, lambda: facts("h100x8-healthy"), says="free of"),
    Case("health.free_memory", FAIL, lambda: facts("h100x8-healthy"), Options(min_free_bytes=80 << 30), says="below"),
    Case(
        "health.free_memory",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), memory=Reading.missing(Reason.UNKNOWN_ERROR, "boom")),
        says="boom",
    ),
    Case("health.pcie", PASS, lambda: facts("h100x8-healthy"), says="Gen5 x16 (the link's maximum)"),
    Case(
        "health.pcie",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), pcie=link(1, 16)),
        says="normal when idle",
        name="idle",
    ),
    Case(
        "health.pcie",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), pcie=link(3, 16, gen_max=3)),
        says="the slot limits the link to Gen3",
        name="slot",
    ),
    Case(
        "health.pcie",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(
            facts("h100x8-healthy"), pcie=link(2, 16), utilization=Reading.of(Utilization(96, 41)), pstate=Reading.of(0)
        ),
        says="Gen2 x16 while busy (P0, 96% utilization)",
        name="busy snapshot",
    ),
    Case(
        "health.pcie",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: ran(with_gpu(facts("h100x8-healthy"), pcie=link(1, 16)), func(loaded_pcie=(5, 8))),
        says="Gen5 x8 under the functional test's load",
        name="under test load",
    ),
    Case(
        "health.pcie",
        (PASS, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: ran(with_gpu(facts("h100x8-healthy"), pcie=link(1, 16)), func(loaded_pcie=(5, 16))),
        says="under the functional test's load (Gen5 x16 max)",
        name="full speed under load",
    ),
    Case(
        "health.pcie",
        (SKIP, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: with_gpu(facts("h100x8-healthy"), pcie=no_link()),
        says="PCIe link not supported",
        name="unsupported",
    ),
    # requirements
    Case("req.driver", PASS, lambda: facts("h100x8-healthy"), Options(require_driver="550"), says="required ≥ 550"),
    Case("req.driver", FAIL, lambda: facts("h100x8-healthy"), Options(require_driver="555.1"), says="upgrade"),
    Case("req.driver", FAIL, lambda: facts("no-driver"), Options(require_driver="550"), says="NVML unavailable"),
    Case("req.cuda", (PASS, PASS), lambda: facts("h100x8-healthy"), Options(require_cuda="12.4")),
    Case("req.cuda", (FAIL, FAIL), lambda: facts("h100x8-healthy"), Options(require_cuda="12.6"), says="CUDA 12.6"),
    Case(
        "req.cuda",
        (FAIL, PASS),
        lambda: facts("driver535-torch-cu128"),
        Options(require_cuda="12.4"),
        says="driver supports CUDA 12.2",
        name="torch passes, driver older",
    ),
    Case(
        "req.cuda", (FAIL, FAIL), lambda: facts("gtx1050-desktop"), Options(require_cuda="10.1"), says="not installed"
    ),
    Case("req.capability", PASS, lambda: facts("h100x8-healthy"), Options(require_capability="9.0")),
    Case("req.capability", PASS, lambda: facts("h100x8-healthy"), Options(require_capability="8"), name="major only"),
    Case("req.capability", FAIL, lambda: facts("h100x8-healthy"), Options(require_capability="10.0")),
    Case("req.capability", FAIL, lambda: facts("no-driver"), Options(require_capability="8.0"), says="NVML"),
    Case("req.gpu", PASS, lambda: facts("h100x8-healthy"), Options(require_gpu="h100"), says="matches 'h100'"),
    Case(
        "req.gpu",
        (PASS, FAIL),
        lambda: facts("mixed-gpus-workstation"),
        Options(require_gpu="Quadro"),
        says="does not match",
    ),
    Case("req.gpu", FAIL, lambda: facts("zero-gpus"), Options(require_gpu="H100"), says="no usable GPU"),
    Case("req.torch", PASS, lambda: facts("h100x8-healthy"), Options(require_torch=">=2.3"), says="satisfies"),
    Case("req.torch", FAIL, lambda: facts("h100x8-healthy"), Options(require_torch="<2.0"), says="pip install"),
    Case("req.torch", FAIL, lambda: facts("gtx1050-desktop"), Options(require_torch=">=2"), says="not installed"),
    # functional test
    Case("func.gpu", PASS, lambda: ran(facts("h100x8-healthy"), func()), says="48.2 TFLOP/s"),
    Case("func.gpu", FAIL, lambda: ran(facts("h100x8-healthy"), func(matmul_rel_error=float("nan"))), says="NaN"),
    Case("func.gpu", FAIL, lambda: ran(facts("h100x8-healthy"), func(matmul_rel_error=3e-3)), name="inaccurate"),
    Case("func.gpu", FAIL, lambda: ran(facts("h100x8-healthy"), func(memory_ok=False)), says="memory pattern"),
    Case(
        "func.gpu",
        FAIL,
        lambda: ran(facts("h100x8-healthy"), func(ok=False, error="RuntimeError: CUDA error: ECC")),
        says="CUDA error: ECC",
        name="error",
    ),
    Case("func.gpu", FAIL, lambda: ran(facts("h100x8-healthy"), func(loaded_clock_events=0x40)), says="HwThermal"),
    Case("func.gpu", WARN, lambda: ran(facts("h100x8-healthy"), func(loaded_clock_events=0x8)), says="HwSlowdown"),
    Case("func.gpu", SKIP, lambda: msgspec.structs.replace(facts("h100x8-healthy"), functional_skip_reason="--quick")),
    Case("func.gpu", SKIP, lambda: ran(facts("h100x8-healthy")), says="no CUDA device", name="none"),
]


# What each rule can say. The coverage test holds the cases to it.
def _case_id(case: Case) -> str:
    expected = case.expected.value if isinstance(case.expected, Status) else "/".join(s.value for s in case.expected)
    return f"{case.check_id}-{expected}" + (f"-{case.name}" if case.name else "")


def _results(case: Case) -> list[CheckResult]:
    return rules.run(case.build(), case.options, only=(case.check_id,), level=MAX_LEVEL)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule(case: Case) -> None:
    results = _results(case)
    assert results, "the rule said nothing"
    assert {r.id for r in results} == {case.check_id}
    statuses = tuple(r.status for r in results)
    if isinstance(case.expected, Status):
        assert set(statuses) == {case.expected}, [(r.status, r.target, r.finding) for r in results]
    else:
        assert statuses == case.expected, [(r.status, r.target, r.finding) for r in results]
    if case.says:
        assert any(case.says in r.finding + r.fix for r in results), [(r.finding, r.fix) for r in results]
    produces = rules.BY_ID[case.check_id].produces
    for r in results:
        assert r.finding and "\n" not in r.finding and "\n" not in r.fix
        if r.status in (FAIL, WARN):
            assert r.fix, f"{r.id} {r.status.value} without a fix: {r.finding}"
        assert r.status in produces, f"{r.id} gave {r.status.value}: declare it in produces="


def test_every_rule_is_covered_for_every_status_it_can_produce() -> None:
    from tests.test_deep_rules import CASES as DEEP_CASES  # the deep diagnostics' rules (check --level 2-4)

    covered: dict[str, set[Status]] = {}
    for case in [*CASES, *DEEP_CASES]:
        expected = {case.expected} if isinstance(case.expected, Status) else set(case.expected)
        covered.setdefault(case.check_id, set()).update(expected)
    for check in rules.CHECKS:
        missing = check.produces - covered.get(check.id, set())
        assert not missing, f"{check.id}: no case gives {sorted(s.value for s in missing)} (or narrow its produces=)"


def test_requirements_say_nothing_unless_asked() -> None:
    f = facts("h100x8-healthy")
    assert rules.run(f, Options(), only=("req",)) == []


def test_only_and_skip_select_by_id_or_area() -> None:
    f = facts("h100x8-healthy")
    assert {r.id for r in rules.run(f, Options(), only=("health",))} == {
        c.id for c in rules.CHECKS if c.id.startswith("health.")
    }
    kept = rules.run(f, Options(), skip=("health", "config.mig"))
    assert not [r for r in kept if r.id.startswith("health.") or r.id == "config.mig"]
    assert rules.matches("health.ecc", "health.") and not rules.matches("health.ecc", "heal")


def test_ids_are_unique_and_areas_consistent() -> None:
    assert len(set(rules.CHECK_IDS)) == len(rules.CHECK_IDS)
    for check in rules.CHECKS:
        assert check.id.split(".")[0] in {"nvml", "host", "compat", "env", "config", "health", "req", "func"} | {
            "mem",
            "link",
            "stress",
        }


@pytest.mark.parametrize(
    "name",
    [
        "h100x8-healthy",
        "v100x4-tutorial",
        "a100-mig",
        "gtx1050-desktop",
        "gpu-lost",
        "no-driver",
        "zero-gpus",
        "misconfigured-node",
        "rtx5090-torch-cu124",
    ],
)
def test_every_rule_on_whole_machines(name: str) -> None:
    everything = Options(
        expect_gpus=2,
        min_free_bytes=1 << 30,
        require_driver="1",
        require_cuda="1",
        require_capability="1.0",
        require_gpu="x",
        require_torch=">=0",
    )
    results = rules.run(facts(name), everything, level=MAX_LEVEL)
    assert {r.id for r in results} == set(rules.CHECK_IDS)
    for r in results:
        assert r.finding and "\n" not in r.finding


def test_only_the_job_s_own_environment_software_and_requirements_are_job_scope() -> None:
    """A job-scope failure must never drain a node: one user's environment cannot drain a fleet."""
    job = {c.id for c in rules.CHECKS if c.scope is Scope.JOB}
    assert job == {
        "compat.torch",
        "compat.driver_cuda",
        "compat.arch",
        "compat.cudnn",
        "compat.nccl",
        "env.visible_devices",
        "env.variables",
        "health.free_memory",
        "req.driver",
        "req.cuda",
        "req.capability",
        "req.gpu",
        "req.torch",
    }
    assert all(c.action is Action.FIX_JOB for c in rules.CHECKS if c.scope is Scope.JOB)
    assert all(c.action is not Action.FIX_JOB for c in rules.CHECKS if c.scope is Scope.NODE)


def test_torch_is_needed_only_by_checks_that_judge_it() -> None:
    checks = {c.id: c for c in rules.CHECKS}
    assert rules.needs_torch([checks["compat.arch"]], Options(), gpu_work=False)
    assert not rules.needs_torch([checks["health.ecc"], checks["req.cuda"]], Options(), gpu_work=False)
    assert rules.needs_torch([checks["req.cuda"]], Options(require_cuda="12.4"), gpu_work=False)
    assert rules.needs_torch([checks["req.torch"]], Options(require_torch=">=2"), gpu_work=False)
    assert not rules.needs_torch([checks["func.gpu"]], Options(), gpu_work=False)  # --quick
    assert rules.needs_torch([checks["func.gpu"]], Options(), gpu_work=True)


def test_the_exporter_judges_only_cheap_nvml_checks() -> None:
    """What the exporter judges on every scrape needs no torch, no GPU work and only the facts a
    scrape reads (which leave out the InfoROM's ~70 ms per GPU and the details)."""
    from gpudiag.export.exporter import GROUPS

    exported = [rules.BY_ID[cid] for cid in rules.EXPORTER_CHECKS]
    assert exported and "health.ecc" in rules.EXPORTER_CHECKS
    for check in exported:
        assert not check.needs_torch(Options()) and not check.needs_gpu and check.level == 1, check.id
        assert groups([check]) <= GROUPS["native"], (check.id, groups([check]) - GROUPS["native"])
    # The native groups are derived from what the exporter shows and judges: never the costly ones.
    costly = {FactGroup.DETAILS, FactGroup.INFOROM, FactGroup.LINKS, FactGroup.MIG_LAYOUT}
    assert GROUPS["native"].isdisjoint(costly)


# --- what a rule reads: its declared readings, no other ---------------------------------------

# What every rule may look at besides its declared readings: which GPU it is, and its identity
# (always read, whatever a command asks for).
_ALWAYS = {"index", "state", "state_detail", "label"} | {s.key for s in GPU_READINGS if s.group is None}


class _Traced:
    """A GPU that notes each attribute a rule asks it for."""

    def __init__(self, gpu: object, seen: set[str]) -> None:
        object.__setattr__(self, "_gpu", gpu)
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, name: str) -> object:
        self._seen.add(name)
        return getattr(self._gpu, name)


def _read_by(case: Case) -> set[str]:
    f = case.build()
    seen: set[str] = set()
    traced = with_machine(f, gpus=tuple(_Traced(g, seen) for g in f.machine.gpus))
    run = rules.run(traced, case.options, only=(case.check_id,), level=MAX_LEVEL)
    assert run == rules.run(f, case.options, only=(case.check_id,), level=MAX_LEVEL)
    return seen - _ALWAYS


def test_a_rule_reads_the_readings_it_declares_and_no_other() -> None:
    """`check` reads only the fact groups of its checks' declared readings: a rule that looked at
    another would find it "not read by this command". Every case of every rule, traced."""
    from tests.test_deep_rules import CASES as DEEP_CASES  # the deep diagnostics' rules (check --level 2-4)

    read: dict[str, set[str]] = {}
    for case in [*CASES, *DEEP_CASES]:
        seen = _read_by(case)
        undeclared = seen - set(rules.BY_ID[case.check_id].reads)
        assert not undeclared, f"{_case_id(case)} reads {sorted(undeclared)}: add them to its reads="
        read.setdefault(case.check_id, set()).update(seen)
    for check in rules.CHECKS:
        unread = set(check.reads) - read.get(check.id, set())
        assert not unread, f"{check.id} declares {sorted(unread)}, which none of its cases reads"


@pytest.mark.parametrize("name", ["h100x8-healthy", "a100-ecc-errors", "a100-mig", "misconfigured-node", "gpu-lost"])
def test_the_groups_check_reads_give_the_results_of_reading_everything(name: str) -> None:
    everything = Options(expect_gpus=2, min_free_bytes=1 << 30, require_capability="1.0", require_gpu="x")
    full = facts(name)
    read = collect(name, facts=rules.GROUPS)
    assert rules.GROUPS < ALL_GROUPS
    got = rules.run(Facts(machine=read, torch=read.torch_runtime, devices=None), everything, level=MAX_LEVEL)
    assert got == rules.run(full, everything, level=MAX_LEVEL)
    assert "not read" not in " ".join(r.finding for r in got)


@pytest.mark.parametrize("name", ["h100x8-healthy", "a100-ecc-errors"])
def test_check_reads_the_figures_its_json_shows(name: str) -> None:
    """--json's per-GPU figures come from what `check` reads, whichever checks read them."""
    from gpudiag.checks.gather import OWN_GROUPS
    from gpudiag.render.check_view import gpus_json

    read = collect(name, facts=OWN_GROUPS)
    assert gpus_json(Facts(machine=read, torch=read.torch_runtime, devices=None)) == gpus_json(facts(name))


def test_a_failed_nvml_start_names_what_the_operator_does() -> None:
    assert rules.run(facts("no-driver"), Options(), only=("nvml.init",))[0].action is Action.FIX_CONFIG
