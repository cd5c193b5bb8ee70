"""The training section of `gpudiag memory`: tracked processes by job and rank, with memory per step,
fragmentation and the forecast (their JSON: render.memory_json)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from gpudiag.memory.view import MemoryView, ProcessRow, Rank, StepStats
from gpudiag.render.format import mib_text
from gpudiag.render.grid import Column, Grid
from gpudiag.render.memory_json import forecast_for
from gpudiag.trend import duration_text


def _shown(row: ProcessRow) -> bool:
    b = row.breakdown
    if b is not None and b.reserved_bytes == 0 and row.steps is None:
        return False  # a context on a GPU it does not use (memory.ranks says why)
    return row.rank is not None or row.steps is not None or (b is not None and b.inactive_split_bytes is not None)


def rows(view: MemoryView) -> list[ProcessRow]:
    """Tracked rows with training figures, grouped by job, then by rank, GPU and PID."""
    chosen = [r for r in view.processes if _shown(r)]

    def key(r: ProcessRow) -> tuple[str, int, int, int]:
        rank = r.rank.rank if r.rank is not None and r.rank.rank is not None else 1 << 30
        return (r.rank.job or "" if r.rank is not None else "\uffff", rank, r.gpu_index, r.process.pid)

    return sorted(chosen, key=key)


def _rank_text(rank: Rank | None) -> str:
    if rank is None or rank.rank is None:
        return ""
    return f"{rank.rank}/{rank.world_size}" if rank.world_size else str(rank.rank)


def _signed_mib(value: float) -> str:
    return ("+" if value >= 0 else "-") + mib_text(int(abs(value)))


def table(view: MemoryView) -> list[Any]:
    """The section's title and grid, or nothing when no tracked process has these figures."""
    chosen = rows(view)
    if not chosen:
        return []
    jobs = any(r.rank is not None and r.rank.job for r in chosen)
    columns = [Column("Job", "left", drop=5)] if jobs else []
    columns += [Column("Rank"), Column("GPU"), Column("PID"), Column("Step"), Column("Steps/s", drop=4)]
    columns += [Column("Peak"), Column("Growth/step"), Column("Non-releasable", drop=3), Column("Frag", drop=2)]
    columns += [Column("Largest free", drop=1), Column("Full in")]
    grid = Grid(columns)
    for row in chosen:
        s: StepStats | None = row.steps
        b = row.breakdown
        forecast = forecast_for(view, row)
        cells: list[str | Text] = [row.rank.job or "" if row.rank is not None else ""] if jobs else []
        cells += [_rank_text(row.rank), str(row.gpu_index), str(row.process.pid)]
        cells += [str(s.count) if s else "", f"{s.rate_per_s:.1f}" if s and s.rate_per_s else ""]
        peak = s.peak_bytes if s and s.peak_bytes is not None else (b.peak_allocated_bytes if b else None)
        cells.append(mib_text(peak) if peak is not None else "")
        growth = s.growth_bytes_per_step if s else None
        cells.append(
            Text(_signed_mib(growth), style="yellow") if growth else ("flat" if s and s.last_step is not None else "")
        )
        split = b.inactive_split_bytes if b else None
        cells.append(mib_text(split) if split is not None else "")
        frag = b.fragmentation_percent if b else None
        cells.append(Text(f"{frag:.0f}%", style="yellow" if frag >= 20 else "") if frag is not None else "")
        largest = b.largest_free_block_bytes if b else None
        cells.append(mib_text(largest) if largest is not None else "")
        cells.append(Text(f"~{duration_text(forecast.full_in_s)}", style="red") if forecast else "")
        grid.add_row(*cells)
    return [Text(""), Text("PyTorch per process (gpudiag.track), by job and rank", style="bold"), grid]
