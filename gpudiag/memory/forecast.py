"""Time to OOM: per GPU and per process, from the watch's history or the tracker's step records.

A GPU's used memory (NVML) between samples, a process's used memory on its GPU, or a tracked
process's allocated memory at the end of each step: if it grows and keeps growing
(:func:`gpudiag.trend.sustained_growth`), the forecast is when it meets the limit: the GPU's
total, or for a process what it can still reach (its own reserved memory plus the GPU's free).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag.memory.view import Forecast, MemoryView, StepStats
from gpudiag.trend import duration_text, size_text, sustained_growth, until

MIN_SAMPLES = 8  # a GPU or process forecast needs this many samples (8 s at the default 1 s)
if TYPE_CHECKING:  # the tracker's module loads only where its entries are read
    from gpudiag.track.entries import Steps

HORIZON_S = 7 * 86400.0  # farther than a week is "not filling up" in practice


def step_stats(steps: Steps, torch_index: int, updated_at: float) -> StepStats:
    """Per-step figures on one device from the tracker's records: the rate between the step times the
    tracker recorded, never between when a reader happened to look."""
    records = [r for r in steps.records if r.torch_index == torch_index]
    rate = None
    if len(records) >= 2 and records[-1].at > records[0].at:
        rate = (records[-1].step - records[0].step) / (records[-1].at - records[0].at)
    elif updated_at > steps.first_at and steps.count:
        rate = steps.count / (updated_at - steps.first_at)
    growth = sustained_growth([(float(r.step), float(r.allocated_bytes)) for r in records])
    last = records[-1] if records else None
    return StepStats(
        count=steps.count,
        rate_per_s=rate,
        peak_bytes=last.peak_allocated_bytes if last else None,
        peaks_per_step=steps.peaks_per_record,
        allocated_bytes=last.allocated_bytes if last else None,
        growth_bytes_per_step=growth.per_x if growth is not None else None,
        first_step=records[0].step if records else None,
        last_step=last.step if last else None,
        last_step_at=last.at if last else None,
    )


def _reach(view: MemoryView, gpu_index: int, reserved: int) -> int | None:
    """What a process on this GPU can still grow to: its own reserved memory plus the GPU's free."""
    gpu = next((r.gpu for r in view.gpus if r.gpu.index == gpu_index), None)
    mem = gpu.memory.value if gpu is not None else None
    return reserved + mem.free_bytes if mem is not None else None


def step_forecasts(view: MemoryView) -> tuple[Forecast, ...]:
    """Tracked processes whose allocated memory grows per step: how many steps and seconds are left.
    None for a process whose allocator has had an OOM: the forecast came true, and its step records
    still hold the growth that led to it."""
    out = []
    for row in view.processes:
        s, b = row.steps, row.breakdown
        if s is None or b is None or not s.growth_bytes_per_step or s.first_step is None or s.last_step is None:
            continue
        if b.ooms:
            continue  # the growth already ran out of memory: what follows is no longer that trend
        limit = _reach(view, row.gpu_index, b.reserved_bytes)
        level = s.peak_bytes if s.peak_bytes is not None else s.allocated_bytes
        if limit is None or level is None:
            continue
        steps_left = max(0.0, (limit - level) / s.growth_bytes_per_step)
        if not s.rate_per_s:
            continue
        seconds = steps_left / s.rate_per_s
        if seconds > HORIZON_S:
            continue
        out.append(
            Forecast(
                gpu_index=row.gpu_index,
                pid=row.process.pid,
                full_in_s=seconds,
                growth_bytes_per_s=s.growth_bytes_per_step * s.rate_per_s,
                level_bytes=level,
                limit_bytes=limit,
                window_s=(s.last_step - s.first_step) / s.rate_per_s,
                basis="steps",
                growth_bytes_per_step=s.growth_bytes_per_step,
                steps_to_full=steps_left,
            )
        )
    return tuple(sorted(out, key=lambda f: f.full_in_s))


def series_forecast(
    points: Sequence[tuple[float, int]], limit: int, gpu_index: int, pid: int | None
) -> Forecast | None:
    """A forecast from (time, used bytes) samples, or None when the series is not filling up."""
    if len(points) < MIN_SAMPLES:
        return None
    growth = sustained_growth([(t, float(y)) for t, y in points], MIN_SAMPLES)
    if growth is None:
        return None
    level = max(y for _, y in points[-3:])  # spikes count: the latest high, not the fitted line
    seconds = until(level, limit, growth)
    if seconds is None or seconds > HORIZON_S:
        return None
    return Forecast(gpu_index, pid, seconds, growth.per_x, level, limit, growth.last_x - growth.first_x, "samples")


def merge(*groups: Sequence[Forecast]) -> tuple[Forecast, ...]:
    return tuple(sorted((f for g in groups for f in g), key=lambda f: f.full_in_s))


def forecast_line(f: Forecast, view: MemoryView | None = None) -> str:
    """One line of reasoning: what grows, how fast, over what history, and when it is full."""
    per_min = size_text(f.growth_bytes_per_s * 60)
    when = duration_text(f.full_in_s)
    if f.pid is None:
        return (
            f"GPU {f.gpu_index} forecast full in ~{when}: used grew {per_min}/min over the last "
            f"{duration_text(f.window_s)} ({size_text(f.level_bytes)} of {size_text(f.limit_bytes)})"
        )
    who = f"PID {f.pid} on GPU {f.gpu_index}"
    if view is not None:
        row = next((r for r in view.processes if r.key == (f.gpu_index, f.pid)), None)
        if row is not None and row.rank is not None and row.rank.rank is not None:
            who += f" (rank {row.rank.rank})"
    if f.basis == "steps" and f.growth_bytes_per_step is not None and f.steps_to_full is not None:
        return (
            f"{who} forecast out of memory in ~{when} (~{f.steps_to_full:.0f} steps): allocated at step end "
            f"grows {size_text(f.growth_bytes_per_step)} per step ({per_min}/min), a leak; peak "
            f"{size_text(f.level_bytes)} of the {size_text(f.limit_bytes)} it can reach"
        )
    return (
        f"{who} forecast out of memory in ~{when}: its memory grew {per_min}/min over the last "
        f"{duration_text(f.window_s)} ({size_text(f.level_bytes)}; it can reach {size_text(f.limit_bytes)})"
    )
