"""`gpudiag memory` views: one-shot tables and watch frames; its JSON samples and log rows are
render.memory_json's (without rich), named here too for the views' callers."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.text import Text

from gpudiag.memory.insights import (
    empty_cache_line,
    foreign_count,
    insights,
    peaks_line,
    unmatched_line,
    untracked_compute,
)
from gpudiag.memory.state import WatchState
from gpudiag.memory.view import MemoryView, ProcessRow
from gpudiag.model import GpuState, HostState, MigDevice
from gpudiag.render import training_view
from gpudiag.render.format import NA, mib_text, missing_note, percent_style, text
from gpudiag.render.grid import Column, Grid
from gpudiag.render.memory_json import CSV_HEADER as CSV_HEADER
from gpudiag.render.memory_json import CSV_HEADER_V1 as CSV_HEADER_V1
from gpudiag.render.memory_json import SCHEMA as SCHEMA
from gpudiag.render.memory_json import csv_rows as csv_rows
from gpudiag.render.memory_json import to_json as to_json
from gpudiag.render.printable import printable

_BLOCKS = "▁▂▃▄▅▆▇█"
BAR_WIDTH = 20
LIVE_NOTES = 4  # tracked-process notes shown in a live frame (the rest: --json)
LIVE_EVENTS = 4


def sparkline(values: Iterable[float], width: int = 24) -> str:
    """Percentages 0-100 as block characters, newest on the right."""
    tail = list(values)[-width:]
    return "".join(_BLOCKS[max(0, min(len(_BLOCKS) - 1, int(v / 100 * len(_BLOCKS))))] for v in tail)


def bar(percent: float | None) -> Text:
    if percent is None:
        return Text(NA)
    filled = max(0, min(BAR_WIDTH, round(percent / 100 * BAR_WIDTH)))
    return Text("█" * filled + "░" * (BAR_WIDTH - filled), style=percent_style(percent))


def mig_label(mig: MigDevice) -> str:
    """'3g.20gb GI 1': the profile from NVML's MIG device name, and the GPU instance."""
    name = printable(mig.name.get(""))
    profile = name.rsplit("MIG ", 1)[1] if "MIG " in name else ""
    gi = text(mig.gpu_instance_id)
    return f"{profile} GI {gi}".strip()


def _command(row: ProcessRow) -> str:
    host = row.process.host
    if host.state is HostState.OTHER_NAMESPACE:
        return "(host PID: not visible in this container)"
    if host.state is HostState.VANISHED:
        return "(exited)"
    return printable(host.command.value or host.name.value or "") or f"({missing_note(host.command)})"


def gpu_table(view: MemoryView, state: WatchState | None = None) -> Grid:
    watching = state is not None  # on a narrow screen a watch keeps its history, a one-shot its bar
    columns = [
        Column("GPU"),
        Column("Name", "left", flexible=True, max_width=26),
        Column("Used / Total"),
        Column("", "left", drop=8 if watching else 3),
        Column("Free", drop=1),
        Column("Driver-reserved", drop=9 if watching else 4),
        Column("Util", drop=2),
    ]
    if watching:
        columns += [Column("Peak used", drop=6), Column("Memory history", "left", drop=5)]
        columns += [Column("Util history", "left", drop=7), Column("Full in", drop=4)]
    grid = Grid(columns)
    width = len(columns)
    for row in view.gpus:
        gpu = row.gpu
        if gpu.state is not GpuState.OK:  # why: in a note under the table, so columns keep their width
            label = "LOST" if gpu.state is GpuState.LOST else "ERROR"
            grid.add_row(str(gpu.index), Text(label, style="red bold"), Text(NA, style="red"), *[""] * (width - 3))
            continue
        mem = gpu.memory.value
        used = f"{mib_text(mem.used_bytes)} / {mib_text(mem.total_bytes)}" if mem else NA
        util = gpu.utilization.value
        cells: list[str | Text] = [
            str(gpu.index),
            text(gpu.name),
            used,
            bar(row.used_percent),
            mib_text(mem.free_bytes) if mem else NA,
            text(mem.reserved_bytes, mib_text) if mem else NA,
            Text(f"{util.gpu_percent}%", style=_util_style(util.gpu_percent)) if util else NA,
        ]
        if state is not None:
            peak = state.peak_used.get(gpu.index)
            cells += [
                mib_text(peak) if peak is not None else NA,
                sparkline(state.history.get(gpu.index, ()), 16),
                sparkline(state.util_history.get(gpu.index, ()), 16),
                _full_in(view, gpu.index),
            ]
        grid.add_row(*cells)
        for mig in gpu.mig_devices:
            m = mig.memory.value
            mig_used = f"{mib_text(m.used_bytes)} / {mib_text(m.total_bytes)}" if m else NA
            pct = 100.0 * m.used_bytes / m.total_bytes if m and m.total_bytes else None
            grid.add_row(
                "",
                Text(f"└ MIG {mig_label(mig)}", style="cyan"),
                mig_used,
                bar(pct),
                mib_text(m.free_bytes) if m else NA,
                *[""] * (width - 5),
            )
    return grid


def _full_in(view: MemoryView, index: int) -> Text:
    """The GPU's forecast time to full, if its memory keeps growing."""
    f = next((f for f in view.forecasts if f.pid is None and f.gpu_index == index), None)
    if f is None:
        return Text("")
    from gpudiag.trend import duration_text

    return Text(f"~{duration_text(f.full_in_s)}", style="red")


def _util_style(percent: int) -> str:
    """Low utilization while memory is held means the GPUs wait (input pipeline, sync)."""
    return "yellow" if percent < 30 else ""


def process_table(
    view: MemoryView, state: WatchState | None = None, max_rows: int | None = None
) -> list[RenderableType]:
    """The process rows, biggest first per GPU; ``max_rows`` keeps a live view within the screen."""
    if not view.processes:
        return [Text("No processes use GPU memory", style="dim")]
    rows = view.processes
    if max_rows is not None and len(rows) > max_rows:
        keep = max(max_rows - 1, 1)  # one line says how many more
        biggest = sorted(rows, key=lambda r: -(r.process.used_memory_bytes.value or 0))[:keep]
        chosen = {id(r) for r in biggest}
        rows = tuple(r for r in view.processes if id(r) in chosen)  # keep the GPU order
    tracked = any(r.breakdown is not None for r in view.processes)
    mig = any(r.process.gpu_instance_id is not None for r in view.processes)
    columns = [Column("GPU")]
    columns += [Column("MIG", "left")] if mig else []
    # GPU, MIG, PID and Used never go; the PyTorch split goes last, its allocated figure at the end.
    columns += [Column("PID"), Column("User", "left", drop=5), Column("Used"), Column("Share", drop=6)]
    columns += [Column("Peak", drop=7)] if state is not None else []
    if tracked:
        columns += [
            Column("Allocated", drop=1),
            Column("Cached free", drop=2),
            Column("Context+other", drop=3),
            Column("Peak reserved", drop=4),
        ]
    columns.append(Column("Command", "left", flexible=True, max_width=72))
    grid = Grid(columns)
    for row in rows:
        p = row.process
        new = row.status == "new" or (state is not None and state.recently_new(row))
        cells: list[str | Text] = [str(row.gpu_index)]
        if mig:
            cells.append(mig_label(row.mig) if row.mig is not None else _gi_label(p.gpu_instance_id))
        cells += [
            Text(("+ " if new else "") + str(p.pid), style="green" if new else ""),
            text(p.host.user),
            text(p.used_memory_bytes, mib_text),
            f"{row.share_percent:.1f}%" if row.share_percent is not None else NA,
        ]
        if state is not None:
            peak = state.peak_process.get(row.key)
            cells.append(mib_text(peak) if peak is not None else NA)
        if tracked:
            b = row.breakdown
            cells += (
                [
                    mib_text(b.allocated_bytes),
                    mib_text(b.cached_free_bytes),
                    mib_text(b.other_bytes) if b.other_bytes is not None else NA,
                    mib_text(b.peak_reserved_bytes),
                ]
                if b
                else ["", "", "", ""]
            )
        cells.append(_command(row))
        grid.add_row(*cells)
    out: list[RenderableType] = [grid]
    hidden = len(view.processes) - len(rows)
    if hidden:
        out.append(Text(f"… {hidden} more processes (--json lists all)", style="dim"))
    return out


def _gi_label(value: int | None) -> str:
    return f"GI {value}" if value is not None else ""


def _notes(view: MemoryView, state: WatchState | None) -> list[Text]:
    notes: list[Text] = []
    for row in view.gpus:
        if row.gpu.state is not GpuState.OK:
            notes.append(Text(f"GPU {row.gpu.index}: {printable(row.gpu.state_detail)}", style="red"))
    notes += [Text(printable(line), style="yellow") for line in insights(view, state)]
    for prow in view.processes:
        line = empty_cache_line(prow)
        if line:
            notes.append(Text(line, style="cyan"))
        b = prow.breakdown
        if b is not None and (b.ooms or b.alloc_retries):
            notes.append(Text(peaks_line(prow), style="yellow"))
    for path in dict.fromkeys(p for r in view.processes for p in r.oom_reports[-1:]):
        pid = next(r.process.pid for r in view.processes if path in r.oom_reports)
        notes.append(
            Text(
                printable(f"PID {pid} ran out of memory: post-mortem `gpudiag memory --postmortem {path}`"), style="red"
            )
        )
    notes += [Text(printable(unmatched_line(u)), style="cyan") for u in view.unmatched]
    foreign = foreign_count(view)
    if foreign:
        notes.append(
            Text(
                f"Note: {foreign} process(es) belong to the host's PID namespace (container): their "
                "owner and command are not visible here",
                style="yellow",
            )
        )
    return notes


def _totals(view: MemoryView) -> Text:
    if not view.gpus:
        return Text("No GPU to show", style="bold")
    pct = f" ({100.0 * view.total_used_bytes / view.total_bytes:.1f}%)" if view.total_bytes else ""
    line = f"Total: {mib_text(view.total_used_bytes)} used of {mib_text(view.total_bytes)}{pct}"
    n = len({r.process.pid for r in view.processes})
    if n:
        line += f"; {n} process(es) hold {mib_text(view.processes_used_bytes)}"
    return Text(line, style="bold")


TIP = (
    "Tip: `python -m gpudiag.track train.py` (or gpudiag.track.start()) adds PyTorch's allocated / cached / "
    "context split"
)


def render(view: MemoryView, state: WatchState | None = None, height: int | None = None) -> Group:
    """The memory view. With ``height`` (a live screen) every line is one screen line: notes
    and events are cut, not wrapped, and process rows fill what is left."""
    head: list[RenderableType] = []
    if view.machine.source != "live":
        head.append(Text(printable(view.machine.source), style="dim"))
    if state is not None:
        stamp = time.strftime("%H:%M:%S", time.localtime(state.last_at))
        head.append(
            Text(f"sample {state.samples} at {stamp}; peaks since the watch began; Ctrl-C to stop", style="dim")
        )
    gpus = gpu_table(view, state)
    training = training_view.table(view)
    notes = _notes(view, state)
    events = [
        Text(f"{time.strftime('%H:%M:%S', time.localtime(at))}  {printable(what)}", style="dim")
        for at, what in (list(state.events)[-LIVE_EVENTS:] if state is not None else [])
    ]
    if not events and view.exited:  # a watch sample rendered on its own
        events = [
            Text(printable(f"- exited: PID {e.pid} on GPU {e.gpu_index} {e.command}"), style="dim") for e in view.exited
        ]
    tail = [*notes, *([Text("Recent events", style="bold"), *events] if events else [])]
    if untracked_compute(view):
        tail.append(Text(TIP, style="dim"))
    max_rows = None
    if height is not None:
        if len(notes) > LIVE_NOTES:
            more = len(notes) - LIVE_NOTES + 1
            kept = [*notes[: LIVE_NOTES - 1], Text(f"… {more} more notes (--json has every figure)", style="dim")]
            tail = kept + tail[len(notes) :]
        for line in tail:
            line.no_wrap, line.overflow = True, "ellipsis"
        used = len(head) + 2 + len(gpus.rows) + 1 + 2  # GPU grid, totals, blank, "Processes"
        used += 2 + 1 + len(tail) + 1  # process header, "… more", tail, the cursor's line
        used += (len(training[-1].rows) + 4) if training else 0  # blank, title, header, rule, rows
        max_rows = max(height - used, 3)
    parts = [*head, *([gpus] if view.gpus else []), _totals(view), Text(""), Text("Processes", style="bold")]
    return Group(*parts, *process_table(view, state, max_rows), *training, *tail)
