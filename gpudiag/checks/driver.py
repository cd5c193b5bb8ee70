"""Driver and NVML: NVML initialisation, the GPU inventory, device nodes, kernel modules, nouveau."""

from __future__ import annotations

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.checks.base import DRIVER, STEADY, check, no_nvml, result
from gpudiag.model import GpuState, NvmlStatus, Reason, cuda_version_text

_NVML_FIXES = {
    NvmlStatus.LIBRARY_NOT_FOUND: "install the NVIDIA driver, or start the container with the NVIDIA runtime (--gpus)",
    NvmlStatus.DRIVER_NOT_LOADED: "load the driver (modprobe nvidia) or rebuild it for this kernel (dkms status)",
    NvmlStatus.VERSION_MISMATCH: "reboot the node, or stop GPU users and reload the nvidia kernel modules",
    NvmlStatus.NO_PERMISSION: "give this user access to /dev/nvidia* (video group / the job's device cgroup)",
    NvmlStatus.ERROR: "check `dmesg` for NVRM/Xid errors",
}
# A driver that is missing or not loaded, or a permission, is the node's set-up; a library that
# does not match the loaded module, or an unexplained failure, is cleared by a reboot.
_NVML_ACTIONS = {
    NvmlStatus.LIBRARY_NOT_FOUND: Action.FIX_CONFIG,
    NvmlStatus.DRIVER_NOT_LOADED: Action.FIX_CONFIG,
    NvmlStatus.VERSION_MISMATCH: Action.REBOOT,
    NvmlStatus.NO_PERMISSION: Action.FIX_CONFIG,
    NvmlStatus.ERROR: Action.REBOOT,
}


@check(
    "nvml.init",
    DRIVER,
    "NVML initialises",
    fails=(
        "library missing, driver not loaded, driver/library version mismatch (with the loaded kernel module's "
        "version: reboot or reload the modules), no permission"
    ),
    scope=Scope.NODE,
    action=Action.REBOOT,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def nvml_init(facts: Facts, options: Options) -> list[CheckResult]:
    nvml = facts.machine.nvml
    if nvml.status is NvmlStatus.OK:
        version = nvml.driver_version.get("?")
        cuda = nvml.cuda_driver_version.map(cuda_version_text).get("?")
        return [
            result(
                "nvml.init", DRIVER, Status.PASS, f"NVML {nvml.nvml_version.get('?')}, driver {version}, CUDA {cuda}"
            )
        ]
    finding = nvml.detail
    if nvml.status is NvmlStatus.VERSION_MISMATCH and nvml.kernel_module_version.value:
        finding += f" (loaded kernel module: {nvml.kernel_module_version.value})"
    return [
        result("nvml.init", DRIVER, Status.FAIL, finding, _NVML_FIXES[nvml.status], action=_NVML_ACTIONS[nvml.status])
    ]


@check(
    "nvml.gpu_count",
    DRIVER,
    "GPU count",
    fails="not `--expect-gpus`; no GPU at all",
    scope=Scope.NODE,
    action=Action.RESEAT,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=STEADY,
)
def gpu_count(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return no_nvml("nvml.gpu_count", DRIVER, facts)
    n, want = len(facts.machine.gpus), options.expect_gpus
    if want is not None and n != want:
        if n < want:
            fix = "a missing GPU fell off the bus or is unbound: check `dmesg` for Xid errors, reseat or replace it"
            return [result("nvml.gpu_count", DRIVER, Status.FAIL, f"NVML sees {n} GPU(s), expected {want}", fix)]
        fix = "fix --expect-gpus, or the node's inventory"
        finding = f"NVML sees {n} GPU(s), expected {want}"
        return [result("nvml.gpu_count", DRIVER, Status.FAIL, finding, fix, action=Action.FIX_CONFIG)]
    if n == 0 and want is None:
        return [result("nvml.gpu_count", DRIVER, Status.FAIL, "NVML sees no GPU", "check `lspci | grep -i nvidia`")]
    return [result("nvml.gpu_count", DRIVER, Status.PASS, f"{n} GPU(s)" + (" as expected" if want is not None else ""))]


@check(
    "nvml.gpu_lost",
    DRIVER,
    "lost GPUs",
    fails="a GPU fell off the bus (Xid 79) or cannot be opened",
    scope=Scope.NODE,
    action=Action.REBOOT,
    exporter=True,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=STEADY,
)
def gpu_lost(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return no_nvml("nvml.gpu_lost", DRIVER, facts)
    bad = [g for g in facts.machine.gpus if g.state is not GpuState.OK]
    if not bad:
        return [result("nvml.gpu_lost", DRIVER, Status.PASS, "every GPU answers")]
    return [
        result(
            "nvml.gpu_lost",
            DRIVER,
            Status.FAIL,
            g.state_detail or g.state.value,
            "drain the node; reset the GPU (nvidia-smi -r) or reboot; Xid 79 = fallen off the bus",
            g.label,
        )
        for g in bad
    ]


_NOT_RECORDED = Reason.NOT_RECORDED.label


@check(
    "host.device_nodes",
    DRIVER,
    "`/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/nvidiaN`",
    fails=(
        'missing or not read/writable (missing uvm: PyTorch\'s "CUDA unknown error"); WARN when only '
        "`nvidia-uvm` is missing and a setuid `nvidia-modprobe` will create it"
    ),
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    finding=STEADY,
)
def device_nodes(facts: Facts, options: Options) -> list[CheckResult]:
    d = facts.devices
    if d is None:
        return [result("host.device_nodes", DRIVER, Status.SKIP, _NOT_RECORDED)]
    container = facts.machine.host.in_container
    missing = [n.path for n in d.nodes if not n.exists]
    denied = [n.path for n in d.nodes if n.exists and not n.accessible]
    others = [p for p in missing if not p.endswith("/nvidia-uvm")]
    if others:
        fix = (
            "start the container with the NVIDIA runtime (--gpus / --runtime=nvidia), which adds the device nodes"
            if container
            else "load the driver, then run `nvidia-modprobe -c=N` for each GPU (or enable nvidia-persistenced)"
        )
        return [result("host.device_nodes", DRIVER, Status.FAIL, f"missing {', '.join(missing)}", fix)]
    if missing:  # only /dev/nvidia-uvm
        if d.modprobe_helper and not container:
            return [
                result(
                    "host.device_nodes",
                    DRIVER,
                    Status.WARN,
                    f"{missing[0]} is missing; CUDA creates it on first use with the setuid nvidia-modprobe",
                    "create it at boot (`nvidia-modprobe -u -c=0`) so the first job does not depend on the helper",
                )
            ]
        fix = (
            "start the container with the NVIDIA runtime, and load nvidia_uvm on the host"
            if container
            else "run `nvidia-modprobe -u -c=0` (loads nvidia_uvm and creates the node)"
        )
        return [
            result(
                "host.device_nodes",
                DRIVER,
                Status.FAIL,
                f"missing {missing[0]}: PyTorch fails with 'CUDA unknown error' (999)",
                fix,
            )
        ]
    if denied:
        return [
            result(
                "host.device_nodes",
                DRIVER,
                Status.FAIL,
                f"no read/write access to {', '.join(denied)}",
                "add the user to the group owning the devices, or fix the job's device cgroup",
            )
        ]
    return [result("host.device_nodes", DRIVER, Status.PASS, f"{len(d.nodes)} device nodes present and accessible")]


@check(
    "host.kernel_modules",
    DRIVER,
    "`nvidia`, `nvidia_uvm` loaded",
    fails="`nvidia_uvm` missing (WARN if `nvidia-modprobe` can load it on first use)",
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    finding=STEADY,
)
def kernel_modules(facts: Facts, options: Options) -> list[CheckResult]:
    d = facts.devices
    if d is None:
        return [result("host.kernel_modules", DRIVER, Status.SKIP, _NOT_RECORDED)]
    if not d.modules_known:
        return [result("host.kernel_modules", DRIVER, Status.SKIP, "/proc/modules is not readable")]
    nvml_ok = facts.machine.nvml.status is NvmlStatus.OK
    if "nvidia" not in d.modules:
        if nvml_ok:  # WSL, or a driver built into the kernel: NVML answering is what counts
            return [result("host.kernel_modules", DRIVER, Status.SKIP, "no nvidia module listed, but NVML works")]
        return [
            result(
                "host.kernel_modules",
                DRIVER,
                Status.FAIL,
                "the nvidia kernel module is not loaded",
                "modprobe nvidia; if that fails, rebuild it for this kernel (dkms status / reinstall the driver)",
            )
        ]
    if "nvidia_uvm" not in d.modules:
        if d.modprobe_helper and not facts.machine.host.in_container:
            return [
                result(
                    "host.kernel_modules",
                    DRIVER,
                    Status.WARN,
                    "nvidia_uvm is not loaded; CUDA loads it on first use with the setuid nvidia-modprobe",
                    "load it at boot (modprobe nvidia_uvm, or /etc/modules-load.d)",
                )
            ]
        return [
            result(
                "host.kernel_modules",
                DRIVER,
                Status.FAIL,
                "nvidia is loaded but nvidia_uvm is not: CUDA cannot start ('CUDA unknown error', 999)",
                "modprobe nvidia_uvm (and load it at boot: /etc/modules-load.d)",
            )
        ]
    return [result("host.kernel_modules", DRIVER, Status.PASS, "nvidia and nvidia_uvm loaded")]


@check(
    "host.nouveau",
    DRIVER,
    "nouveau",
    fails="a GPU bound to nouveau (FAIL), nouveau loaded (WARN)",
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    finding=STEADY,
)
def nouveau(facts: Facts, options: Options) -> list[CheckResult]:
    d = facts.devices
    if d is None:
        return [result("host.nouveau", DRIVER, Status.SKIP, _NOT_RECORDED)]
    fix = "blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs and reboot"
    if d.nouveau_bound:
        return [
            result(
                "host.nouveau",
                DRIVER,
                Status.FAIL,
                f"bound to nouveau, so invisible to the NVIDIA driver: {', '.join(d.nouveau_bound)}",
                fix,
            )
        ]
    if "nouveau" in d.modules:
        return [result("host.nouveau", DRIVER, Status.WARN, "nouveau is loaded (no GPU bound to it now)", fix)]
    return [result("host.nouveau", DRIVER, Status.PASS, "no GPU bound to nouveau")]
