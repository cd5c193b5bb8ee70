"""`gpudiag memory`'s JSON (`gpudiag.memory/2`) and its log's CSV rows: no rich here, so that
`memory --json` runs without it (cli.plain_front); render.memory_view draws the tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpudiag.memory.insights import insights
from gpudiag.memory.state import WatchState
from gpudiag.memory.view import Breakdown, Forecast, GpuRow, MemoryView, ProcessRow, Rank, StepStats
from gpudiag.model import Memory, Reading
from gpudiag.serialize import to_data

# /2: a missing reading is {"unavailable": reason, "detail": …} as in every gpudiag schema (it
# was null, with a per-GPU "unavailable" note); null now only means "does not apply".
SCHEMA = "gpudiag.memory/2"


def forecast_for(view: MemoryView, row: ProcessRow) -> Forecast | None:
    return next((f for f in view.forecasts if f.pid == row.process.pid and f.gpu_index == row.gpu_index), None)


def rank_json(rank: Rank | None) -> dict[str, Any] | None:
    if rank is None:
        return None
    return {"rank": rank.rank, "local_rank": rank.local_rank, "world_size": rank.world_size, "job": rank.job}


def steps_json(s: StepStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "count": s.count,
        "rate_per_s": round(s.rate_per_s, 3) if s.rate_per_s is not None else None,
        "peak_allocated_bytes": s.peak_bytes,
        "peaks_per_step": s.peaks_per_step,
        "allocated_bytes": s.allocated_bytes,
        "growth_bytes_per_step": round(s.growth_bytes_per_step) if s.growth_bytes_per_step is not None else None,
        "first_step": s.first_step,
        "last_step": s.last_step,
        "last_step_at": s.last_step_at,
    }


def forecast_json(f: Forecast | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {
        "full_in_s": round(f.full_in_s, 1),
        "growth_bytes_per_s": round(f.growth_bytes_per_s),
        "level_bytes": f.level_bytes,
        "limit_bytes": f.limit_bytes,
        "window_s": round(f.window_s, 1),
        "basis": f.basis,
        "growth_bytes_per_step": round(f.growth_bytes_per_step) if f.growth_bytes_per_step is not None else None,
        "steps_to_full": round(f.steps_to_full, 1) if f.steps_to_full is not None else None,
    }


def _field(reading: Reading[Any], fn: Callable[[Any], Any]) -> Any:
    """``fn`` of the reading's value, or its ``{"unavailable": reason}`` marker (as in `list --json`)."""
    return to_data(reading.map(fn))


def _derived(value: float | None, source: Reading[Any]) -> Any:
    """A percentage computed from ``source``: rounded, or the source's marker when it is missing."""
    if value is not None:
        return round(value, 2)
    return None if source.ok else to_data(source)


def _memory_json(memory: Reading[Memory]) -> dict[str, Any]:
    return {
        "total_bytes": _field(memory, lambda m: m.total_bytes),
        "used_bytes": _field(memory, lambda m: m.used_bytes),
        "free_bytes": _field(memory, lambda m: m.free_bytes),
    }


def _gpu_json(row: GpuRow, state: WatchState | None, forecasts: tuple[Forecast, ...] = ()) -> dict[str, Any]:
    g = row.gpu
    m = g.memory.value
    out: dict[str, Any] = {
        "index": g.index,
        "uuid": to_data(g.uuid),
        "name": to_data(g.name),
        "state": g.state.value,
        "state_detail": g.state_detail or None,
        **_memory_json(g.memory),
        "used_percent": _derived(row.used_percent, g.memory),
        "driver_reserved_bytes": to_data(m.reserved_bytes) if m is not None else to_data(g.memory),
        "utilization_percent": _field(g.utilization, lambda u: u.gpu_percent),
        "mig_devices": [
            {
                "index": d.index,
                "uuid": to_data(d.uuid),
                "name": to_data(d.name),
                "gpu_instance_id": to_data(d.gpu_instance_id),
                "compute_instance_id": to_data(d.compute_instance_id),
                **_memory_json(d.memory),
            }
            for d in g.mig_devices
        ],
    }
    if state is not None:
        out["peak_used_bytes"] = state.peak_used.get(g.index)
        forecast = next((f for f in forecasts if f.pid is None and f.gpu_index == g.index), None)
        out["forecast"] = forecast_json(forecast)
    return out


def _torch_json(b: Breakdown) -> dict[str, Any]:
    return {
        "cuda_index": b.torch_index,
        "allocated_bytes": b.allocated_bytes,
        "reserved_bytes": b.reserved_bytes,
        "cached_free_bytes": b.cached_free_bytes,
        "other_bytes": b.other_bytes,
        "peak_allocated_bytes": b.peak_allocated_bytes,
        "peak_reserved_bytes": b.peak_reserved_bytes,
        "alloc_retries": b.alloc_retries,
        "ooms": b.ooms,
        "active_bytes": _published(b.active_bytes),
        "inactive_split_bytes": _published(b.inactive_split_bytes),
        "releasable_bytes": _published(b.releasable_bytes),
        "fragmentation_percent": _published(
            round(b.fragmentation_percent, 2) if b.fragmentation_percent is not None else None
        ),
        "segments": _published(b.segments),
        "largest_free_block_bytes": _published(b.largest_free_block_bytes, SEGMENTS_NOT_WALKED),
        "expandable_segments": _published(b.expandable_segments, SEGMENTS_NOT_WALKED),
        "published_at": b.published_at,  # when the tracker read the figures above (NVML's are the sample's)
    }


NOT_PUBLISHED = "the tracker did not publish it (an older gpudiag.track, or an allocator without this counter)"
SEGMENTS_NOT_WALKED = "the tracker has not walked the allocator's segments yet (a watch asks it to)"


def _published(value: Any, why: str = NOT_PUBLISHED) -> Any:
    """A tracker figure, or the marker every gpudiag schema writes for a missing reading (null is "does not apply")."""
    return value if value is not None else {"unavailable": "not_found", "detail": why}


def _process_json(row: ProcessRow, state: WatchState | None, view: MemoryView) -> dict[str, Any]:
    p, b = row.process, row.breakdown
    out: dict[str, Any] = {
        "gpu_index": row.gpu_index,
        "gpu_instance_id": p.gpu_instance_id,
        "compute_instance_id": p.compute_instance_id,
        "pid": p.pid,
        "type": p.kind.value,
        "user": to_data(p.host.user),
        "command": to_data(p.host.command),
        "host_state": p.host.state.value,
        "used_bytes": to_data(p.used_memory_bytes),
        "share_percent": _derived(row.share_percent, p.used_memory_bytes),
        "new": row.status == "new",
        "torch": _torch_json(b) if b is not None else None,
        "rank": rank_json(row.rank),
        "steps": steps_json(row.steps),
        "oom_reports": list(row.oom_reports),
        "forecast": forecast_json(forecast_for(view, row)),
    }
    if state is not None:
        out["peak_used_bytes"] = state.peak_process.get(row.key)
    return out


def to_json(
    view: MemoryView, timestamp: float, state: WatchState | None = None, slurm_node: str | None = None
) -> dict[str, Any]:
    """One sample as `gpudiag.memory/2`; a watch sample adds its number, peaks and events."""
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "timestamp": timestamp,
        "source": view.machine.source,
        "host": view.machine.host.hostname,
        "slurm_node": slurm_node,
        "gpus": [_gpu_json(r, state, view.forecasts) for r in view.gpus],
        "processes": [_process_json(r, state, view) for r in view.processes],
        "exited": [{"gpu_index": e.gpu_index, "pid": e.pid, "command": e.command or None} for e in view.exited],
        "total_used_bytes": view.total_used_bytes,
        "total_bytes": view.total_bytes,
        "processes_used_bytes": view.processes_used_bytes,
    }
    out["tracked_unmatched"] = [
        {"pid": u.pid, "command": u.command, "gpu_index": u.gpu_index, "torch": _torch_json(u.breakdown)}
        for u in view.unmatched
    ]
    out["insights"] = insights(view, state)
    if state is not None:
        out["sample"] = state.samples
        out["lost_gpus"] = list(view.lost)
    return out


CSV_HEADER = (
    "timestamp",
    "gpu",
    "used_bytes",
    "total_bytes",
    "free_bytes",
    "utilization_percent",
    "processes",
    "state",
    "torch_allocated_bytes",
    "torch_reserved_bytes",
    "torch_ooms",
    "torch_alloc_retries",
    "full_in_s",
)
CSV_HEADER_V1 = CSV_HEADER[:10]  # logs begun before the last three columns keep their header


def csv_rows(view: MemoryView, timestamp: float) -> list[tuple[Any, ...]]:
    """One row per GPU per sample; torch columns sum the tracked processes on that GPU."""
    rows = []
    for r in view.gpus:
        m = r.gpu.memory.value
        u = r.gpu.utilization.value
        procs = [p for p in view.processes if p.gpu_index == r.gpu.index]
        tracked = [p.breakdown for p in procs if p.breakdown is not None]
        rows.append(
            (
                f"{timestamp:.3f}",
                r.gpu.index,
                m.used_bytes if m else "",
                m.total_bytes if m else "",
                m.free_bytes if m else "",
                u.gpu_percent if u else "",
                len(procs),
                r.gpu.state.value,
                sum(b.allocated_bytes for b in tracked) if tracked else "",
                sum(b.reserved_bytes for b in tracked) if tracked else "",
                sum(b.ooms for b in tracked) if tracked else "",
                sum(b.alloc_retries for b in tracked) if tracked else "",
                next(
                    (f"{f.full_in_s:.0f}" for f in view.forecasts if f.pid is None and f.gpu_index == r.gpu.index), ""
                ),
            )
        )
    return rows
