"""gpudiag's own metric family: Prometheus naming (one ``gpudiag_`` prefix, base units, ``_bytes``,
``_total``), built from one memory view of one machine reading.

Shared by ``gpudiag exporter``, ``memory --prometheus`` and ``--textfile``. A reading that is N/A
on a GPU yields no sample, never a made-up number. Per-GPU series carry ``gpu`` (NVML index) and
``uuid``; names, bus ids and the driver live once in ``gpudiag_gpu_info``.

A check's verdict is ``gpudiag_check_status{check,gpu,uuid}``, one series per check and GPU
whatever the finding says; the finding's text is ``gpudiag_check_reason_info{...,reason}``, so a
changing message (an error count going up) never starts a new status series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudiag.export.attribution import NOBODY, Owner
from gpudiag.export.exposition import FamilyErrors, RowMetric
from gpudiag.export.xid import XidTally
from gpudiag.memory.view import Forecast, MemoryView, ProcessRow
from gpudiag.model import Gpu, GpuState, Reading
from gpudiag.readings import CLOCK_EVENTS

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult

GPU = ["gpu", "uuid"]
PROCESS = ["gpu", "uuid", "pid", "process", "user", "gpu_instance", "pod", "namespace", "container", "slurm_job"]
CHECK = ["check", "gpu", "uuid"]
DEFAULT_MAX_PROCESS_SERIES = 256

# The clock event reasons that slow a busy GPU down (throttling); idle, application-clock, sync-boost
# and display reasons are states, not slowdowns, and would add four series per GPU.
THROTTLE_REASONS = {event.bit: event.name for event in CLOCK_EVENTS if event.slowdown}

# The performance policies whose clock-holding time NVML counts (model.Violations' fields, without _ns).
VIOLATION_POLICIES = ("power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability")

# gpudiag_check_status values: alert on >= 2 for failures, >= 1 for warnings. SKIP has no sample.
# By the status's value: this module renders results and needs nothing else of gpudiag.checks.
STATUS_VALUE = {"PASS": 0, "WARN": 1, "FAIL": 2}


class _Family:
    """A gauge or counter family that adds samples without prometheus-client's per-sample checks
    (the label names are fixed here, the values are strings we made): a scrape adds hundreds."""

    def __init__(self, name: str, doc: str, typ: str, labels: list[str]) -> None:
        self.metric = RowMetric(name, doc, typ, labels)
        self._rows = self.metric.rows
        self._width = len(labels)

    def add_metric(self, values: list[str], value: float) -> None:
        if len(values) != self._width:
            raise ValueError(f"{self.metric.name}: {len(values)} label values for {self._width} labels")
        self._rows.append((tuple(values), value))


@dataclass
class _Families:
    """Builds metric families, keeping their order stable and their creation in one place."""

    made: list[Any]

    def gauge(self, name: str, doc: str, labels: list[str]) -> _Family:
        family = _Family(name, doc, "gauge", labels)
        self.made.append(family.metric)
        return family

    def counter(self, name: str, doc: str, labels: list[str]) -> _Family:
        family = _Family(name, doc, "counter", labels)
        self.made.append(family.metric)
        return family


def _put(family: _Family, labels: list[str], reading: Reading[Any], scale: float = 1.0) -> None:
    if reading.value is not None:
        family.add_metric(labels, reading.value * scale if scale != 1.0 else reading.value)


def gpu_target(target: str) -> int | None:
    """The NVML index in a check result's target ("GPU 3"), else None."""
    head, _, index = target.partition(" ")
    return int(index) if head == "GPU" and index.isdigit() else None


def _gpu_families(
    out: _Families, gpus: Sequence[Gpu], driver: str, peaks: Mapping[int, int] | None, uuids: Mapping[int, str]
) -> None:
    info = out.gauge("gpudiag_gpu_info", "GPU identity (value 1)", [*GPU, "name", "pci_bus_id", "driver_version"])
    lost = out.gauge("gpudiag_gpu_lost", "1 when the GPU is lost (fallen off the bus) or cannot be opened", GPU)
    total = out.gauge("gpudiag_gpu_memory_total_bytes", "GPU memory size", GPU)
    used = out.gauge("gpudiag_gpu_memory_used_bytes", "GPU memory in use (NVML)", GPU)
    free = out.gauge("gpudiag_gpu_memory_free_bytes", "GPU memory free", GPU)
    reserved = out.gauge("gpudiag_gpu_memory_reserved_bytes", "GPU memory the driver reserves", GPU)
    peak = (
        out.gauge("gpudiag_gpu_memory_peak_used_bytes", "Most GPU memory in use since the watch began", ["gpu"])
        if peaks is not None
        else None
    )
    util = out.gauge("gpudiag_gpu_utilization_ratio", "Share of time a kernel ran (NVML sample period)", GPU)
    mem_util = out.gauge("gpudiag_gpu_memory_utilization_ratio", "Share of time device memory was read or written", GPU)
    power = out.gauge("gpudiag_gpu_power_watts", "Power draw", GPU)
    power_limit = out.gauge("gpudiag_gpu_power_limit_watts", "Enforced power limit", GPU)
    energy = out.counter("gpudiag_gpu_energy_joules", "Energy used since the driver loaded", GPU)
    temp = out.gauge("gpudiag_gpu_temperature_celsius", "GPU temperature", GPU)
    slowdown = out.gauge("gpudiag_gpu_slowdown_temperature_celsius", "Temperature at which the GPU slows down", GPU)
    fan = out.gauge("gpudiag_gpu_fan_ratio", "Fan speed, share of its maximum", GPU)
    clock = out.gauge("gpudiag_gpu_clock_hertz", "Current clock", [*GPU, "clock"])
    pstate = out.gauge("gpudiag_gpu_performance_state", "Performance state (0 = P0, fastest)", GPU)
    events = out.gauge(
        "gpudiag_gpu_clock_event_active", "1 while this reason holds the clocks down (throttling)", [*GPU, "reason"]
    )
    ecc = out.counter("gpudiag_gpu_ecc_errors", "ECC errors", [*GPU, "error", "counter"])
    retired = out.gauge("gpudiag_gpu_retired_pages", "Retired memory pages", [*GPU, "cause"])
    retired_pending = out.gauge("gpudiag_gpu_retired_pages_pending", "1 when a page retirement waits for a reset", GPU)
    remapped = out.counter("gpudiag_gpu_remapped_rows", "Memory rows remapped", [*GPU, "error"])
    remap_pending = out.gauge("gpudiag_gpu_row_remap_pending", "1 when a row remap waits for a reset", GPU)
    remap_failure = out.gauge("gpudiag_gpu_row_remap_failure", "1 when row remapping failed (no spare rows)", GPU)
    link_gen = out.gauge("gpudiag_gpu_pcie_link_generation", "Current PCIe link generation", GPU)
    link_gen_max = out.gauge("gpudiag_gpu_pcie_link_max_generation", "Best PCIe generation of GPU and slot", GPU)
    link_width = out.gauge("gpudiag_gpu_pcie_link_width", "Current PCIe link width (lanes)", GPU)
    link_width_max = out.gauge("gpudiag_gpu_pcie_link_max_width", "Widest PCIe link of GPU and slot", GPU)
    replays = out.counter("gpudiag_gpu_pcie_replays", "PCIe link-level retries", GPU)
    memory_temp = out.gauge("gpudiag_gpu_memory_temperature_celsius", "GPU memory (HBM) temperature", GPU)
    encoder = out.gauge("gpudiag_gpu_encoder_utilization_ratio", "Share of time the video encoder was busy", GPU)
    decoder = out.gauge("gpudiag_gpu_decoder_utilization_ratio", "Share of time the video decoder was busy", GPU)
    held = out.counter(
        "gpudiag_gpu_clocks_held_seconds",
        "Time each performance policy held the clocks down since the driver loaded (DCGM's *_VIOLATION)",
        [*GPU, "policy"],
    )
    nvlink_data = out.counter(
        "gpudiag_gpu_nvlink_data_bytes", "NVLink data sent (tx) and received (rx), all links", [*GPU, "direction"]
    )
    pcie_data = out.counter(
        "gpudiag_gpu_pcie_data_bytes",
        "PCIe data sent (tx) and received (rx): NVML's byte counters, which may wrap",
        [*GPU, "direction"],
    )
    profiled = {
        figure: out.gauge(name, doc, GPU)
        for figure, name, doc in (
            (
                "graphics_active_percent",
                "gpudiag_gpu_graphics_active_ratio",
                "Share of time a graphics or compute engine was busy (GPM)",
            ),
            ("sm_active_percent", "gpudiag_gpu_sm_active_ratio", "Share of SM cycles with at least one warp (GPM)"),
            (
                "sm_occupancy_percent",
                "gpudiag_gpu_sm_occupancy_ratio",
                "Warps resident on the SMs against their maximum (GPM)",
            ),
            (
                "dram_active_percent",
                "gpudiag_gpu_dram_active_ratio",
                "Device memory bandwidth used against its peak (GPM)",
            ),
        )
    }
    pipes = out.gauge("gpudiag_gpu_pipe_active_ratio", "Share of SM cycles a pipe was busy (GPM)", [*GPU, "pipe"])
    traffic = out.gauge(
        "gpudiag_gpu_link_throughput_bytes_per_second",
        "PCIe and NVLink traffic over the last window (GPM), bytes per second",
        [*GPU, "link", "direction"],
    )
    mig_total = out.gauge(
        "gpudiag_mig_memory_total_bytes", "MIG instance memory size", [*GPU, "mig_uuid", "gpu_instance", "profile"]
    )
    mig_used = out.gauge(
        "gpudiag_mig_memory_used_bytes", "MIG instance memory in use", [*GPU, "mig_uuid", "gpu_instance", "profile"]
    )

    for g in gpus:
        index = str(g.index)
        lost.add_metric([index, uuids.get(g.index, "")], 0 if g.state is GpuState.OK else 1)
        if peak is not None and peaks is not None and g.index in peaks:
            peak.add_metric([index], peaks[g.index])
        if g.state is not GpuState.OK:
            continue
        labels = [index, g.uuid.get("")]
        info.add_metric([*labels, g.name.get(""), g.pci_bus_id.get(""), driver], 1)
        if (mem := g.memory.value) is not None:
            total.add_metric(labels, mem.total_bytes)
            used.add_metric(labels, mem.used_bytes)
            free.add_metric(labels, mem.free_bytes)
            _put(reserved, labels, mem.reserved_bytes)
        if (u := g.utilization.value) is not None:
            util.add_metric(labels, u.gpu_percent / 100)
            mem_util.add_metric(labels, u.memory_percent / 100)
        _put(power, labels, g.power_draw_w)
        _put(power_limit, labels, g.power_limit_w)
        _put(energy, labels, g.energy_mj, 1e-3)
        _put(temp, labels, g.temperature_c)
        _put(slowdown, labels, g.temperature_slowdown_c)
        _put(fan, labels, g.fan_percent, 1e-2)
        for name, reading in (
            ("sm", g.clock_sm_mhz),
            ("memory", g.clock_memory_mhz),
            ("graphics", g.clock_graphics_mhz),
        ):
            _put(clock, [*labels, name], reading, 1e6)
        _put(pstate, labels, g.pstate)
        if (bits := g.clock_event_reasons.value) is not None:
            for bit, name in THROTTLE_REASONS.items():
                events.add_metric([*labels, name], 1 if bits & bit else 0)
        e = g.ecc_errors
        for error, counter, reading in (
            ("corrected", "volatile", e.volatile_corrected),
            ("uncorrected", "volatile", e.volatile_uncorrected),
            ("corrected", "aggregate", e.aggregate_corrected),
            ("uncorrected", "aggregate", e.aggregate_uncorrected),
        ):
            _put(ecc, [*labels, error, counter], reading)
        if (pages := g.retired_pages.value) is not None:
            retired.add_metric([*labels, "single_bit_ecc"], pages.single_bit)
            retired.add_metric([*labels, "double_bit_ecc"], pages.double_bit)
            retired_pending.add_metric(labels, int(pages.pending))
        if (rows := g.remapped_rows.value) is not None:
            remapped.add_metric([*labels, "correctable"], rows.correctable)
            remapped.add_metric([*labels, "uncorrectable"], rows.uncorrectable)
            remap_pending.add_metric(labels, int(rows.pending))
            remap_failure.add_metric(labels, int(rows.failure))
        _put(link_gen, labels, g.pcie.gen_current)
        _put(link_gen_max, labels, g.pcie.gen_max)
        _put(link_width, labels, g.pcie.width_current)
        _put(link_width_max, labels, g.pcie.width_max)
        _put(replays, labels, g.pcie_replays)
        _put(memory_temp, labels, g.memory_temperature_c)
        _put(encoder, labels, g.encoder_percent, 1e-2)
        _put(decoder, labels, g.decoder_percent, 1e-2)
        for policy in VIOLATION_POLICIES:
            _put(held, [*labels, policy], getattr(g.violations, f"{policy}_ns"), 1e-9)
        _put(nvlink_data, [*labels, "rx"], g.nvlink_data_rx_kib, 1024)
        _put(nvlink_data, [*labels, "tx"], g.nvlink_data_tx_kib, 1024)
        _put(pcie_data, [*labels, "tx"], g.pcie_data_tx_bytes)
        _put(pcie_data, [*labels, "rx"], g.pcie_data_rx_bytes)
        if (p := g.profiling.value) is not None:
            for figure, family in profiled.items():
                _put(family, labels, getattr(p, figure), 1e-2)
            for pipe in ("tensor", "fp64", "fp32", "fp16"):
                _put(pipes, [*labels, pipe], getattr(p, f"{pipe}_active_percent"), 1e-2)
            for link, direction in (("pcie", "tx"), ("pcie", "rx"), ("nvlink", "tx"), ("nvlink", "rx")):
                _put(traffic, [*labels, link, direction], getattr(p, f"{link}_{direction}_bytes_per_s"))
        for mig in g.mig_devices:
            if (m := mig.memory.value) is None:
                continue
            gi = mig.gpu_instance_id.value
            mig_labels = [*labels, mig.uuid.get(""), "" if gi is None else str(gi), mig_profile(mig.name.get(""))]
            mig_total.add_metric(mig_labels, m.total_bytes)
            mig_used.add_metric(mig_labels, m.used_bytes)


def mig_profile(name: str) -> str:
    """``NVIDIA A100-SXM4-40GB MIG 1g.5gb`` -> ``1g.5gb`` (the profile DCGM calls GPU_I_PROFILE)."""
    _, sep, profile = name.rpartition("MIG ")
    return profile.strip() if sep else ""


def _process_families(
    out: _Families,
    rows: Sequence[ProcessRow],
    uuids: Mapping[int, str],
    owners: Mapping[tuple[int, int], Owner],
    cap: int,
    view_forecasts: Sequence[Forecast] = (),
) -> None:
    memory = out.gauge("gpudiag_process_gpu_memory_bytes", "GPU memory used by a process (NVML)", PROCESS)
    allocated = out.gauge(
        "gpudiag_process_torch_allocated_bytes", "PyTorch live tensors (processes running gpudiag.track)", PROCESS
    )
    reserved = out.gauge(
        "gpudiag_process_torch_reserved_bytes", "PyTorch caching allocator's reserved memory (gpudiag.track)", PROCESS
    )
    cached = out.gauge(
        "gpudiag_process_torch_cached_free_bytes", "Reserved but unused: what empty_cache() returns", PROCESS
    )
    other = out.gauge(
        "gpudiag_process_other_gpu_memory_bytes", "NVML's figure beyond PyTorch's reserved: context, libraries", PROCESS
    )
    ooms = out.counter("gpudiag_process_torch_ooms", "PyTorch out-of-memory errors", PROCESS)
    retries = out.counter("gpudiag_process_torch_alloc_retries", "PyTorch allocator retries (cache flushes)", PROCESS)
    split = out.gauge(
        "gpudiag_process_torch_inactive_split_bytes",
        "Free but split inside segments in use: fragmentation empty_cache() cannot return",
        PROCESS,
    )
    largest = out.gauge(
        "gpudiag_process_torch_largest_free_block_bytes",
        "Largest free block of the allocator's last segment walk",
        PROCESS,
    )
    growth = out.gauge(
        "gpudiag_process_memory_growth_per_step_bytes",
        "Sustained growth of allocated memory per training step",
        PROCESS,
    )
    full_in = out.gauge(
        "gpudiag_process_memory_full_in_seconds", "Forecast seconds until the process runs out of memory", PROCESS
    )
    dropped = out.gauge(
        "gpudiag_process_series_dropped",
        "Processes left out of the per-process series by the cardinality cap (smallest first)",
        [],
    )

    forecasts = {(f.gpu_index, f.pid): f.full_in_s for f in view_forecasts if f.pid is not None}
    # The cap keeps the biggest users: they are the ones a dashboard needs.
    ranked = sorted(rows, key=lambda r: (-r.process.used_memory_bytes.get(0), r.gpu_index, r.process.pid))
    kept = ranked[:cap]
    dropped.add_metric([], len(ranked) - len(kept))
    for row in kept:
        p = row.process
        who = owners.get(row.key, NOBODY)
        gi = p.gpu_instance_id
        labels = [
            str(row.gpu_index),
            uuids.get(row.gpu_index, ""),
            str(p.pid),
            p.host.name.get(""),
            p.host.user.get(""),
            "" if gi is None else str(gi),
            who.pod,
            who.namespace,
            who.container,
            who.slurm_job,
        ]
        _put(memory, labels, p.used_memory_bytes)
        b = row.breakdown
        if b is not None:
            allocated.add_metric(labels, b.allocated_bytes)
            reserved.add_metric(labels, b.reserved_bytes)
            cached.add_metric(labels, b.cached_free_bytes)
            if b.other_bytes is not None:
                other.add_metric(labels, b.other_bytes)
            ooms.add_metric(labels, b.ooms)
            retries.add_metric(labels, b.alloc_retries)
            if b.inactive_split_bytes is not None:
                split.add_metric(labels, b.inactive_split_bytes)
            if b.largest_free_block_bytes is not None:
                largest.add_metric(labels, b.largest_free_block_bytes)
        if row.steps is not None and row.steps.growth_bytes_per_step is not None:
            growth.add_metric(labels, row.steps.growth_bytes_per_step)
        forecast = forecasts.get(row.key)
        if forecast is not None:
            full_in.add_metric(labels, forecast)


def check_families(results: Iterable[CheckResult], uuids: Mapping[int, str]) -> list[Any]:
    """``gpudiag_check_status`` (0 pass, 1 warn, 2 fail; a skipped check has no sample) and, for each
    warning or failure, ``gpudiag_check_reason_info`` (value 1) with the finding as ``reason``."""
    out = _Families([])
    status = out.gauge(
        "gpudiag_check_status", "gpudiag check verdict: 0 pass, 1 warn, 2 fail (skipped: no sample)", CHECK
    )
    reason = out.gauge(
        "gpudiag_check_reason_info",
        "Why a check warns or fails (value 1): join on check, gpu, uuid with gpudiag_check_status",
        [*CHECK, "reason"],
    )
    for r in results:
        value = STATUS_VALUE.get(r.status.value)
        if value is None:
            continue
        index = gpu_target(r.target)
        labels = ["" if index is None else str(index), uuids.get(index, "") if index is not None else ""]
        status.add_metric([r.id, *labels], value)
        if value:
            reason.add_metric([r.id, *labels, r.finding], 1)
    return out.made


def families(
    view: MemoryView | None,
    *,
    peaks: Mapping[int, int] | None = None,
    checks: Iterable[CheckResult] | None = None,
    owners: Mapping[tuple[int, int], Owner] | None = None,
    max_process_series: int = DEFAULT_MAX_PROCESS_SERIES,
    known: Mapping[int, Gpu] | None = None,
    xids: XidTally | None = None,
    errors: FamilyErrors | None = None,
) -> list[Any]:
    """Every native family for one sample (no samples before the first). ``known``: each GPU as
    last seen working, by index, so that one lost now keeps its ``uuid`` label. ``xids``: the Xid
    errors a long-running exporter has seen (its families only where it watches them). A part
    (the GPUs', the processes', the forecasts', the Xids', the checks' families) whose data cannot
    be made into samples is left out and counted in ``errors`` (by default: said on stderr)."""
    errors = errors or FamilyErrors()
    out = _Families([])
    gpus = tuple(r.gpu for r in view.gpus) if view is not None else ()
    driver = view.machine.nvml.driver_version.get("") if view is not None else ""
    uuids = {g.index: g.uuid.value for g in gpus if g.uuid.value is not None}
    for index, gpu in (known or {}).items():
        if index not in uuids and gpu.uuid.value is not None:
            uuids[index] = gpu.uuid.value

    def part(what: str, make: Callable[[], object]) -> None:
        start = len(out.made)
        try:
            make()
        except Exception as error:  # this part's data: the other parts are still exported
            del out.made[start:]
            errors.add(what, error)

    part("gpudiag_gpu_* (per GPU)", lambda: _gpu_families(out, gpus, driver, peaks, uuids))
    part(
        "gpudiag_process_* (per process)",
        lambda: _process_families(
            out,
            view.processes if view is not None else (),
            uuids,
            owners or {},
            max_process_series,
            view.forecasts if view is not None else (),
        ),
    )
    part("gpudiag_gpu_memory_full_in_seconds", lambda: _gpu_forecasts(out, view, uuids))
    if xids is not None:
        part("gpudiag_gpu_xid_errors", lambda: _xid_families(out, xids, uuids))
    if checks is not None:
        part("gpudiag_check_*", lambda: out.made.extend(check_families(checks, uuids)))
    return out.made


def _gpu_forecasts(out: _Families, view: MemoryView | None, uuids: Mapping[int, str]) -> None:
    gpu_full_in = out.gauge(
        "gpudiag_gpu_memory_full_in_seconds", "Forecast seconds until the GPU's memory is full (memory --watch)", GPU
    )
    for f in view.forecasts if view is not None else ():
        if f.pid is None:
            gpu_full_in.add_metric([str(f.gpu_index), uuids.get(f.gpu_index, "")], f.full_in_s)


def _xid_families(out: _Families, xids: XidTally, uuids: Mapping[int, str]) -> None:
    """The Xid errors seen since the exporter started, for the GPUs NVML reports them of."""
    counted = out.counter(
        "gpudiag_gpu_xid_errors", "Xid errors NVML reported since the exporter started", [*GPU, "xid"]
    )
    last = out.gauge(
        "gpudiag_gpu_last_xid", "The last Xid error NVML reported (0: none since the exporter started)", GPU
    )
    for index, uuid in sorted(uuids.items()):
        record = xids.of(uuid)
        if record is None:
            continue
        last.add_metric([str(index), uuid], record.last)
        for xid, count in sorted(record.counts.items()):
            counted.add_metric([str(index), uuid, str(xid)], count)
