"""Health: memory errors, recovery action, throttling, temperature, InfoROM, processes, memory, PCIe,
and the verdict on each GPU's functional test."""

from __future__ import annotations

from gpudiag.checks import Action, CheckResult, Facts, FunctionalResult, Options, Scope, Status
from gpudiag.checks.base import (
    BUSY_PERCENT,
    FUNCTIONAL,
    HEALTH,
    HW_PROTECTION,
    MATMUL_TOLERANCE,
    RECOVERY_ACTIONS,
    RECOVERY_OPERATOR_ACTIONS,
    RETIRED_PAGES_LIMIT,
    SLOWDOWN_WARNING,
    STEADY,
    UNCORRECTABLE_REMAP_LIMIT,
    Volatile,
    always,
    check,
    per_gpu,
    result,
    skip_reason,
)
from gpudiag.model import Gpu, ProcessKind
from gpudiag.readings import CLOCK_EVENT_NAMES


@check(
    "health.ecc",
    HEALTH,
    "volatile uncorrected ECC errors",
    fails="more than 0",
    reads=("ecc_mode_current", "ecc_errors"),
    scope=Scope.NODE,
    action=Action.RESET,
    exporter=True,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("uncorrected ECC errors"),
)
def ecc(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        count = gpu.ecc_errors.volatile_uncorrected
        if gpu.ecc_mode_current.value is False:
            return Status.SKIP, "ECC disabled", ""
        if count.value is None:
            return Status.SKIP, skip_reason(count.reason, count.detail), ""
        if count.value > 0:
            return (
                Status.FAIL,
                f"{count.value} uncorrected ECC error(s) since the driver loaded",
                "drain the node; reset the GPU and run a memory diagnostic (dcgmi diag -r 3)",
            )
        lifetime = gpu.ecc_errors.aggregate_uncorrected.value
        history = f" ({lifetime} over the GPU's life)" if lifetime else ""
        return Status.PASS, f"no uncorrected ECC errors since the driver loaded{history}", ""

    return per_gpu("health.ecc", HEALTH, facts, judge)


@check(
    "health.retired_pages",
    HEALTH,
    "retired pages",
    fails="retirement pending; 63 or more retired",
    reads=("retired_pages",),
    scope=Scope.NODE,
    action=Action.RMA,
    exporter=True,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("page retirement pending", by_action=((Action.RMA, "retired pages at the limit"),)),
)
def retired_pages(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str] | tuple[Status, str, str, Action]:
        pages = gpu.retired_pages
        if pages.value is None:
            return Status.SKIP, skip_reason(pages.reason, pages.detail), ""
        p = pages.value
        total = p.single_bit + p.double_bit
        if total >= RETIRED_PAGES_LIMIT:  # a reset would retire more pages; the GPU goes back either way
            return Status.FAIL, f"{total} retired pages (limit {RETIRED_PAGES_LIMIT})", "replace the GPU (RMA)"
        if p.pending:
            return (
                Status.FAIL,
                f"page retirement pending ({total} retired)",
                "reset the GPU to retire the pages",
                Action.RESET,
            )
        return Status.PASS, f"{total} retired pages", ""

    return per_gpu("health.retired_pages", HEALTH, facts, judge)


@check(
    "health.row_remap",
    HEALTH,
    "row remapping",
    fails="remap pending, remap failure, 512 or more uncorrectable remaps",
    reads=("remapped_rows",),
    scope=Scope.NODE,
    action=Action.RESET,
    exporter=True,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("row remap pending", by_action=((Action.RMA, "row remapping exhausted"),)),
)
def row_remap(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str] | tuple[Status, str, str, Action]:
        rows = gpu.remapped_rows
        if rows.value is None:
            return Status.SKIP, skip_reason(rows.reason, rows.detail), ""
        r = rows.value
        if r.failure:
            return Status.FAIL, "row remapping failed: no spare rows left", "replace the GPU (RMA)", Action.RMA
        if r.uncorrectable >= UNCORRECTABLE_REMAP_LIMIT:  # pending or not: the GPU goes back
            return Status.FAIL, f"{r.uncorrectable} uncorrectable row remaps", "replace the GPU (RMA)", Action.RMA
        if r.pending:
            return (
                Status.FAIL,
                f"row remap pending ({r.uncorrectable} uncorrectable remaps)",
                "reset the GPU (nvidia-smi -r) to apply it",
            )
        return Status.PASS, f"{r.correctable} correctable, {r.uncorrectable} uncorrectable remaps", ""

    return per_gpu("health.row_remap", HEALTH, facts, judge)


@check(
    "health.recovery_action",
    HEALTH,
    "NVML's GPU recovery action",
    fails="reset, reboot or drain required",
    reads=("recovery_action",),
    scope=Scope.NODE,
    action=Action.RESET,
    exporter=True,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=STEADY,
)
def recovery_action(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str] | tuple[Status, str, str, Action]:
        action = gpu.recovery_action
        if action.value is None:
            return Status.SKIP, skip_reason(action.reason, action.detail), ""
        if action.value:
            what, fix = RECOVERY_ACTIONS.get(action.value, (f"recovery action {action.value}", "see NVIDIA's docs"))
            return Status.FAIL, f"NVML: {what}", fix, RECOVERY_OPERATOR_ACTIONS.get(action.value, Action.REBOOT)
        return Status.PASS, "no recovery action needed", ""

    return per_gpu("health.recovery_action", HEALTH, facts, judge)


def _throttle(bits: int) -> tuple[Status, list[str]]:
    names = [name for bit, name in CLOCK_EVENT_NAMES.items() if bits & bit]
    if bits & HW_PROTECTION:
        return Status.FAIL, names
    if bits & SLOWDOWN_WARNING:
        return Status.WARN, names
    return Status.PASS, names


@check(
    "health.clock_events",
    HEALTH,
    "clock event (throttle) reasons",
    fails="HW thermal or power-brake slowdown; WARN: HW slowdown, SW thermal",
    reads=("clock_event_reasons",),
    scope=Scope.NODE,
    action=Action.COOLING,
    exporter=True,
    finding=Volatile("hardware slowdown (thermal or power brake)"),
)
def clock_events(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        reasons = gpu.clock_event_reasons
        if reasons.value is None:
            return Status.SKIP, skip_reason(reasons.reason, reasons.detail), ""
        status, names = _throttle(reasons.value)
        if status is Status.FAIL:
            return (
                status,
                f"hardware throttling: {', '.join(names)}",
                "check cooling, fans and power delivery (HW thermal / power brake slowdown)",
            )
        if status is Status.WARN:
            return status, f"slowed down: {', '.join(names)}", "check cooling and airflow"
        return Status.PASS, ", ".join(names) if names else "no clock events", ""

    return per_gpu("health.clock_events", HEALTH, facts, judge)


@check(
    "health.temperature",
    HEALTH,
    "temperature vs the GPU's own slowdown threshold",
    fails="at or above it; WARN within `--temp-margin` °C",
    reads=("temperature_c", "temperature_slowdown_c"),
    scope=Scope.NODE,
    action=Action.COOLING,
    exporter=True,
    finding=Volatile("at the slowdown temperature"),
)
def temperature(facts: Facts, options: Options) -> list[CheckResult]:
    margin = options.temp_margin_c

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        temp = gpu.temperature_c.value
        if temp is None:
            return Status.SKIP, skip_reason(gpu.temperature_c.reason, gpu.temperature_c.detail), ""
        slow = gpu.temperature_slowdown_c.value
        if slow is None:
            return Status.PASS, f"{temp} °C (no slowdown threshold reported)", ""
        if temp >= slow:
            return Status.FAIL, f"{temp} °C at or above the slowdown threshold {slow} °C", "check cooling"
        if temp >= slow - margin:
            return Status.WARN, f"{temp} °C, within {margin} °C of slowdown ({slow} °C)", "check cooling"
        return Status.PASS, f"{temp} °C (slowdown at {slow} °C)", ""

    return per_gpu("health.temperature", HEALTH, facts, judge)


# Not judged by the exporter: validating the InfoROM costs ~70 ms per GPU, too much for every scrape.
@check(
    "health.inforom",
    HEALTH,
    "InfoROM",
    fails="corrupted",
    reads=("inforom_valid",),
    scope=Scope.NODE,
    action=Action.RMA,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=STEADY,
)
def inforom(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        valid = gpu.inforom_valid
        if valid.value is None:
            return Status.SKIP, skip_reason(valid.reason, valid.detail), ""
        if not valid.value:
            return Status.FAIL, "InfoROM is corrupted", "update or reflash the InfoROM (NVIDIA support)"
        return Status.PASS, "InfoROM valid", ""

    return per_gpu("health.inforom", HEALTH, facts, judge)


@check(
    "health.processes",
    HEALTH,
    "leftover processes",
    fails="compute processes (WARN with `--allow-processes`); WARN: graphics processes",
    reads=("processes",),
    scope=Scope.NODE,
    action=Action.STOP_PROCESSES,
    finding=Volatile("compute processes left running"),
)
def leftover_processes(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        procs = gpu.processes
        if procs.value is None:
            return Status.SKIP, f"process list {skip_reason(procs.reason, procs.detail)}", ""
        compute = [p for p in procs.value if p.kind in (ProcessKind.COMPUTE, ProcessKind.COMPUTE_GRAPHICS)]
        graphics = [p for p in procs.value if p.kind is ProcessKind.GRAPHICS]
        if compute:
            pids = ", ".join(str(p.pid) for p in compute)
            return (
                Status.WARN if options.allow_processes else Status.FAIL,
                f"{len(compute)} compute process(es) already running: PID {pids}",
                "stop them (see `gpudiag list`), or pass --allow-processes on shared nodes",
            )
        if graphics:
            return (
                Status.WARN,
                f"{len(graphics)} graphics process(es) (e.g. Xorg) use this GPU",
                "fine on a workstation; on a compute node stop the display manager",
            )
        return Status.PASS, "no processes", ""

    return per_gpu("health.processes", HEALTH, facts, judge)


@check(
    "health.free_memory",
    HEALTH,
    "free memory",
    fails="below `--min-free`",
    reads=("memory",),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("less free memory than --min-free"),
)
def free_memory(facts: Facts, options: Options) -> list[CheckResult]:
    from gpudiag.units import human_bytes

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        mem = gpu.memory.value
        if mem is None:
            return Status.SKIP, skip_reason(gpu.memory.reason, gpu.memory.detail), ""
        free = human_bytes(mem.free_bytes)
        if options.min_free_bytes is not None and mem.free_bytes < options.min_free_bytes:
            return (
                Status.FAIL,
                f"{free} free, below --min-free {human_bytes(options.min_free_bytes)}",
                "free the memory (see `gpudiag memory`) or pick another GPU",
            )
        return Status.PASS, f"{free} free of {human_bytes(mem.total_bytes)}", ""

    return per_gpu("health.free_memory", HEALTH, facts, judge)


def _loaded_link(facts: Facts, gpu: Gpu) -> tuple[tuple[int, int] | None, str]:
    """The link (gen, width) seen while the GPU was busy, and how it was seen; None if never."""
    for r in facts.functional or ():
        if r.gpu_index == gpu.index and r.loaded_pcie is not None:
            return r.loaded_pcie, "under the functional test's load"
    util, pstate = gpu.utilization.value, gpu.pstate.value
    gen, width = gpu.pcie.gen_current.value, gpu.pcie.width_current.value
    if util is not None and pstate == 0 and util.gpu_percent >= BUSY_PERCENT and gen is not None and width is not None:
        return (gen, width), f"while busy (P0, {util.gpu_percent}% utilization)"
    return None, ""


@check(
    "health.pcie",
    HEALTH,
    "PCIe link",
    fails=(
        "WARN: the slot limits the GPU's generation; the link trained down while loaded (by the functional "
        "test, or a snapshot taken busy in P0). An idle link below its maximum is normal and SKIPs"
    ),
    reads=("pcie", "pstate", "utilization"),
    scope=Scope.NODE,
    action=Action.RESEAT,
    exporter=True,
    produces=(Status.PASS, Status.WARN, Status.SKIP),
    finding=STEADY,
)
def pcie(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        link = gpu.pcie
        gen_max, gpu_max, width_max = link.gen_max.value, link.gen_gpu_max.value, link.width_max.value
        gen_now, width_now = link.gen_current.value, link.width_current.value
        if gen_max is None or width_max is None or gen_now is None or width_now is None:
            reading = next(r for r in (link.gen_max, link.width_max, link.gen_current, link.width_current) if not r.ok)
            return Status.SKIP, f"PCIe link {skip_reason(reading.reason, reading.detail)}", ""
        best = f"Gen{gen_max} x{width_max}"
        if gpu_max is not None and gen_max < gpu_max:
            return (
                Status.WARN,
                f"the slot limits the link to Gen{gen_max}; the GPU supports Gen{gpu_max}",
                "move the GPU to a faster slot, or check the BIOS PCIe speed setting and risers",
            )
        loaded, how = _loaded_link(facts, gpu)
        if loaded is not None:
            if loaded[0] < gen_max or loaded[1] < width_max:
                return (
                    Status.WARN,
                    f"link trained down: Gen{loaded[0]} x{loaded[1]} {how}, capable of {best}",
                    "reseat the GPU or riser, check the slot and BIOS; `gpudiag bench-transfer` measures the cost",
                )
            return Status.PASS, f"Gen{loaded[0]} x{loaded[1]} {how} ({best} max)", ""
        if gen_now >= gen_max and width_now >= width_max:
            return Status.PASS, f"Gen{gen_now} x{width_now} (the link's maximum)", ""
        return (
            Status.SKIP,
            f"idle link at Gen{gen_now} x{width_now} of {best}: normal when idle, judged under load "
            "(run without --quick)",
            "",
        )

    return per_gpu("health.pcie", HEALTH, facts, judge)


def _functional_target(r: FunctionalResult) -> str:
    if r.gpu_index is not None:
        return f"GPU {r.gpu_index}"
    return f"cuda:{r.torch_index}" if r.torch_index >= 0 else ""


def _judge_functional(r: FunctionalResult) -> tuple[Status, str, str]:
    if not r.ok:
        return Status.FAIL, r.error, "drain the node; check `dmesg` for Xid errors and run dcgmi diag -r 3"
    parts = [
        f"context {r.context_seconds:.2f} s" if r.context_seconds is not None else "",
        f"fp32 matmul {r.tflops:.1f} TFLOP/s" if r.tflops is not None else "",
        f"rel. error {r.matmul_rel_error:.1e}" if r.matmul_rel_error is not None else "",
        f"PCIe Gen{r.loaded_pcie[0]} x{r.loaded_pcie[1]} under load" if r.loaded_pcie is not None else "",
    ]
    finding = ", ".join(p for p in parts if p)
    if r.memory_ok is not True:
        return Status.FAIL, "memory pattern read back wrong", "drain the node; run dcgmi diag -r 3"
    if r.matmul_rel_error is None or not r.matmul_rel_error <= MATMUL_TOLERANCE:
        return (
            Status.FAIL,
            f"wrong matmul results: relative error {r.matmul_rel_error} > {MATMUL_TOLERANCE:g} (or NaN/Inf)",
            "drain the node; run dcgmi diag -r 3",
        )
    if r.loaded_clock_events is not None:
        status, names = _throttle(r.loaded_clock_events)
        if status is not Status.PASS:
            return status, f"{finding}; under load: {', '.join(names)}", "check cooling and power delivery"
    return Status.PASS, finding, ""


@check(
    "func.gpu",
    FUNCTIONAL,
    "functional test, per visible GPU",
    fails=(
        "an error, hang or crash (pinned to the GPU it happened on), a memory pattern read back wrong, an "
        "fp32 matmul (TF32 off) off its float64 CPU reference by more than 1e-4 or NaN/Inf, HW throttling "
        "under load (WARN for HW slowdown)"
    ),
    scope=Scope.NODE,
    action=Action.RESET,
    needs_torch=always,
    needs_gpu=True,
    finding=Volatile("functional test failed", kinds=True),
)
def functional(facts: Facts, options: Options) -> list[CheckResult]:
    if facts.functional is None:
        return [result("func.gpu", FUNCTIONAL, Status.SKIP, facts.functional_skip_reason or "not run")]
    if not facts.functional:
        return [result("func.gpu", FUNCTIONAL, Status.SKIP, "no CUDA device to test")]
    return [result("func.gpu", FUNCTIONAL, *_judge_functional(r), _functional_target(r)) for r in facts.functional]
