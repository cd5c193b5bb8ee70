"""What every rule shares: areas, thresholds, the registry entry, per-GPU iteration, skip reasons."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gpudiag.checks import CheckResult, Facts, Options, Status
from gpudiag.model import Gpu, GpuState, NvmlStatus, Reason
from gpudiag.readings import clock_event_bits

DRIVER = "Driver and NVML"
COMPAT = "Compatibility"
CONFIG = "Configuration"
HEALTH = "Health"
REQUIRE = "Requirements"
FUNCTIONAL = "Functional test"

RETIRED_PAGES_LIMIT = 63  # DCGM: 63 or more retired pages fails
UNCORRECTABLE_REMAP_LIMIT = 512  # DCGM: uncorrectable row remaps
MATMUL_TOLERANCE = 1e-4  # fp32 (TF32 off) vs float64, relative Frobenius error
BUSY_PERCENT = 50  # a GPU this busy in P0 has its link at working speed (DCGM judges PCIe in P0)

# Clock events that fail a GPU (its hardware protects itself) and those that warn.
HW_PROTECTION = clock_event_bits("HwThermalSlowdown", "HwPowerBrakeSlowdown")
SLOWDOWN_WARNING = clock_event_bits("HwSlowdown", "SwThermalSlowdown")

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
Judge = Callable[[Gpu], tuple[Status, str, str]]


class Check(msgspec.Struct, frozen=True):
    id: str
    area: str
    title: str
    rule: Rule


def usable_gpus(facts: Facts) -> list[Gpu]:
    return [g for g in facts.machine.gpus if g.state is GpuState.OK]


def result(check_id: str, area: str, status: Status, finding: str, fix: str = "", target: str = "") -> CheckResult:
    return CheckResult(check_id, area, status, finding, fix, target)


def no_nvml(check_id: str, area: str, facts: Facts) -> list[CheckResult]:
    return [result(check_id, area, Status.SKIP, f"NVML unavailable ({facts.machine.nvml.status.value}): see nvml.init")]


def per_gpu(check_id: str, area: str, facts: Facts, judge: Judge) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return no_nvml(check_id, area, facts)
    gpus = usable_gpus(facts)
    if not gpus:
        return [result(check_id, area, Status.SKIP, "no usable GPU")]
    return [result(check_id, area, *judge(gpu), gpu.label) for gpu in gpus]


def skip_reason(reading_reason: Reason | None, detail: str) -> str:
    if reading_reason is Reason.NOT_SUPPORTED:
        return "not supported on this GPU"
    return detail or (reading_reason.label if reading_reason else "unavailable")


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def torch_cuda_build(facts: Facts) -> tuple[str | None, str]:
    """(torch's CUDA version, its torch version) from the runtime probe, else from its files."""
    if facts.torch.value is not None:
        return facts.torch.value.cuda, facts.torch.value.version
    build = facts.machine.torch_build.value
    if build is not None:
        return build.cuda, build.version
    return None, ""


def torch_missing(facts: Facts) -> str:
    """Why there is no torch version to judge: the probe's reason, else what torch's files said."""
    if facts.torch.reason is not Reason.UNAVAILABLE:
        return facts.torch.detail or "torch not found"
    return facts.machine.torch_build.detail or facts.torch.detail or "torch not found"


def pass_if(good: bool) -> Status:
    return Status.PASS if good else Status.FAIL
