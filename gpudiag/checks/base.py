"""What every rule shares: areas, thresholds, the check declaration, per-GPU iteration, skip reasons."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.model import FactGroup, Gpu, GpuState, NvmlStatus, Reason
from gpudiag.readings import GPU_READINGS, clock_event_bits

DRIVER = "Driver and NVML"
COMPAT = "Compatibility"
CONFIG = "Configuration"
HEALTH = "Health"
REQUIRE = "Requirements"
FUNCTIONAL = "Functional test"
MEMTEST = "Memory test"  # the deep diagnostics (check --level 2-4): gpudiag/checks/deep/
INTERCONNECT = "Interconnect"
STRESS = "Stress"
AREAS = (DRIVER, COMPAT, CONFIG, HEALTH, REQUIRE, FUNCTIONAL, MEMTEST, INTERCONNECT, STRESS)  # in the order shown

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
# What the operator does for each: a GPU or bus reset, or a reboot (IMEX recovery and unknown
# actions too: the node-wide step that clears the most).
RECOVERY_OPERATOR_ACTIONS = {
    1: Action.RESET,
    2: Action.REBOOT,
    3: Action.RESET,
    4: Action.RESET,
    5: Action.REBOOT,
    6: Action.RESET,
    7: Action.REBOOT,
}

Rule = Callable[[Facts, Options], list[CheckResult]]
# A judge gives (status, finding, fix) for one GPU, and may add the action when the finding
# decides it more precisely than the check's declaration (pending retirement: reset; too many: RMA).
Judge = Callable[[Gpu], tuple[Status, str, str] | tuple[Status, str, str, Action]]


NeedsTorch = Callable[[Options], bool]


def always(options: Options) -> bool:
    return True


def never(options: Options) -> bool:
    return False


class Steady(msgspec.Struct, frozen=True):
    """A finding that stays the same while its fault does (names, modes, versions, paths): a drain
    reason quotes its first clause."""


class Volatile(msgspec.Struct, frozen=True):
    """A finding whose figures move while the fault stays (counts, temperatures, PIDs, measured
    rates): a drain reason states the fault in ``fact`` instead, so that two runs over the same
    fault give the same reason and a node is not re-drained each time a figure moves."""

    fact: str
    by_action: tuple[tuple[Action, str], ...] = ()  # finer words where a result names its own action
    kinds: bool = False  # the finding's first clause names the kind of failure when it holds no figure


STEADY = Steady()
EVERY_STATUS = frozenset(Status)


class Check(msgspec.Struct, frozen=True):
    """One check, declared next to its rule with :func:`check`: everything that selection, the
    scheduler modes, the exporter, drain, the facts `check` reads and the docs need to know about it."""

    id: str  # stable: --only/--skip, JSON, JUnit, metrics and drain reasons use it
    area: str  # the heading it is shown under
    title: str  # what it judges: the docs' table of checks
    rule: Rule
    scope: Scope  # the node (hardware, driver, node configuration) or the job (its environment, its torch)
    action: Action  # what an operator does when it fails (a result may name a more precise one)
    finding: Steady | Volatile  # whether a failure's finding stays the same while the fault does
    fails: str  # when it fails or warns: the docs' table of checks
    reads: tuple[str, ...] = ()  # the GPU's readings the rule looks at (model.Gpu fields): what `check` reads
    produces: frozenset[Status] = EVERY_STATUS  # the statuses its results can have
    needs_torch: NeedsTorch = never  # whether, with these options, it judges torch's runtime view
    needs_gpu: bool = False  # runs work on the GPUs (the functional test): off with --quick
    exporter: bool = False  # NVML facts only and cheap: judged on every exporter scrape
    level: int = 1  # the lowest `check --level` that runs it (1: every check; 2-4: the deep diagnostics)


DECLARED: list[Check] = []  # in declaration order; gpudiag.checks.rules orders them by area


def check(
    check_id: str,
    area: str,
    title: str,
    *,
    fails: str,
    scope: Scope,
    action: Action,
    finding: Steady | Volatile,
    reads: tuple[str, ...] = (),
    produces: Iterable[Status] = EVERY_STATUS,
    needs_torch: NeedsTorch = never,
    needs_gpu: bool = False,
    exporter: bool = False,
    level: int = 1,
) -> Callable[[Rule], Rule]:
    """Declare the decorated rule as check ``check_id``."""

    def declare(rule: Rule) -> Rule:
        DECLARED.append(
            Check(
                check_id,
                area,
                title,
                rule,
                scope,
                action,
                finding,
                fails,
                reads,
                frozenset(produces),
                needs_torch,
                needs_gpu,
                exporter,
                level,
            )
        )
        return rule

    return declare


def groups(checks: Iterable[Check]) -> frozenset[FactGroup]:
    """The fact groups these checks' rules read (identity is always read)."""
    return frozenset(group for c in checks for key in c.reads if (group := reading_group(key)) is not None)


def reading_group(key: str) -> FactGroup | None:
    """The fact group that fills a GPU's reading ``key`` (a model.Gpu field); None: always read."""
    if key == "details":
        return FactGroup.DETAILS
    for spec in GPU_READINGS:
        if spec.key.split(".", 1)[0] == key:
            return spec.group
    raise KeyError(f"{key!r} is not a reading of model.Gpu")


def usable_gpus(facts: Facts) -> list[Gpu]:
    return [g for g in facts.machine.gpus if g.state is GpuState.OK]


def result(
    check_id: str,
    area: str,
    status: Status,
    finding: str,
    fix: str = "",
    target: str = "",
    action: Action | None = None,
) -> CheckResult:
    return CheckResult(check_id, area, status, finding, fix, target, action)


def no_nvml(check_id: str, area: str, facts: Facts) -> list[CheckResult]:
    return [result(check_id, area, Status.SKIP, f"NVML unavailable ({facts.machine.nvml.status.value}): see nvml.init")]


def per_gpu(check_id: str, area: str, facts: Facts, judge: Judge) -> list[CheckResult]:
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return no_nvml(check_id, area, facts)
    gpus = usable_gpus(facts)
    if not gpus:
        return [result(check_id, area, Status.SKIP, "no usable GPU")]
    out = []
    for gpu in gpus:
        judged = judge(gpu)
        action = judged[3] if len(judged) == 4 else None
        out.append(result(check_id, area, judged[0], judged[1], judged[2], gpu.label, action))
    return out


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
