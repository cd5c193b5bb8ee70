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

import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudiag.export.attribution import NOBODY, Owner
from gpudiag.export.exposition import FamilyErrors, RowMetric
from gpudiag.export.gpu_families import GPU_FAMILIES, INFO, LOST, MIG_TOTAL, MIG_USED, PEAK, Sample
from gpudiag.export.xid import XidTally
from gpudiag.memory.view import Forecast, MemoryView, ProcessRow
from gpudiag.model import Gpu, GpuState, Reading

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult

GPU = ["gpu", "uuid"]
PROCESS = ["gpu", "uuid", "pid", "process", "user", "gpu_instance", "pod", "namespace", "container", "slurm_job"]
CHECK = ["check", "gpu", "uuid"]
DEFAULT_MAX_PROCESS_SERIES = 256

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


@functools.cache
def _reader(key: str) -> Callable[[Gpu], Reading[Any]]:
    """A per-GPU reading's getter, made once: a scrape reads some 60 per GPU (the details, which
    reading_at walks into, are never exported)."""
    return operator.attrgetter(key)


def _value(value: Any, sample: Sample) -> float | None:
    """A sample's value from its reading's value (None: N/A), in the metric's base unit."""
    if value is not None and sample.part:
        value = getattr(value, sample.part)
        value = value.value if isinstance(value, Reading) else value
    if value is None:
        return None
    if sample.bit:
        return 1 if value & sample.bit else 0
    if isinstance(value, bool):
        return int(value)
    if sample.per != 1:
        return value / sample.per  # type: ignore[no-any-return]
    return value * sample.scale if sample.scale != 1.0 else value  # type: ignore[no-any-return]


@functools.cache
def _sampled() -> tuple[
    tuple[str, tuple[tuple[Callable[[Gpu], Reading[Any]], Sample | None, tuple[str, ...]], ...]], ...
]:
    """GPU_FAMILIES' sampled families, each sample as its reading's getter, itself where its value is
    worked on (a part, a bit, a factor; else None: the reading's value as it is) and its label values,
    worked out once (and checked against its family's labels, once: rows are added unchecked)."""
    for f in GPU_FAMILIES:
        if wrong := [s.key for s in f.samples if len(s.labels) != len(f.labels)]:
            raise ValueError(f"{f.name}: samples {wrong} do not give one value per label {f.labels}")
    plain = Sample("")
    return tuple(
        (
            f.name,
            tuple((_reader(s.key), None if s._replace(key="", labels=()) == plain else s, s.labels) for s in f.samples),
        )
        for f in GPU_FAMILIES
        if f.samples
    )


def _gpu_families(
    out: _Families, gpus: Sequence[Gpu], driver: str, peaks: Mapping[int, int] | None, uuids: Mapping[int, str]
) -> None:
    """The families of GPU_FAMILIES, in its order: its samples from their readings, and those it
    leaves to code (identity, lost GPUs, the watch's peak, MIG instances) here."""
    made = {
        f.name: (out.gauge if f.type == "gauge" else out.counter)(
            f.name, f.help, ["gpu"] if f.name == PEAK else [*GPU, *f.labels]
        )
        for f in GPU_FAMILIES
        if f.name != PEAK or peaks is not None
    }
    # Rows added directly: each sample's label values are its family's own (GPU_FAMILIES' table).
    sampled = [(made[name].metric.rows, samples) for name, samples in _sampled()]
    for g in gpus:
        index = str(g.index)
        made[LOST].add_metric([index, uuids.get(g.index, "")], 0 if g.state is GpuState.OK else 1)
        if peaks is not None and g.index in peaks:
            made[PEAK].add_metric([index], peaks[g.index])
        if g.state is not GpuState.OK:
            continue
        labels = [index, g.uuid.get("")]
        made[INFO].add_metric([*labels, g.name.get(""), g.pci_bus_id.get(""), driver], 1)
        head = tuple(labels)
        for rows, samples in sampled:
            for read, sample, own in samples:
                value = read(g).value
                if value is None:
                    continue
                if sample is not None and (value := _value(value, sample)) is None:
                    continue
                if value.__class__ is bool:
                    value = int(value)
                rows.append((head + own if own else head, value))
        for mig in g.mig_devices:
            if (m := mig.memory.value) is None:
                continue
            gi = mig.gpu_instance_id.value
            mig_labels = [*labels, mig.uuid.get(""), "" if gi is None else str(gi), mig_profile(mig.name.get(""))]
            made[MIG_TOTAL].add_metric(mig_labels, m.total_bytes)
            made[MIG_USED].add_metric(mig_labels, m.used_bytes)


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
