"""`gpudiag memory` views: one-shot tables, watch frames, JSON samples and log rows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpudiag.memory import MemoryView, ProcessRow, WatchState, empty_cache_line, foreign_count
from gpudiag.model import GpuState, HostState
from gpudiag.render.format import NA, mib_text, missing_note, percent_style, text

SCHEMA = "gpudiag.memory/1"
_BLOCKS = "▁▂▃▄▅▆▇█"
BAR_WIDTH = 20


def sparkline(values: Iterable[float], width: int = 24) -> str:
    """Percentages 0-100 as block characters, newest on the right."""
    tail = list(values)[-width:]
    return "".join(_BLOCKS[min(len(_BLOCKS) - 1, int(v / 100 * len(_BLOCKS)))] for v in tail)


def bar(percent: float | None) -> Text:
    if percent is None:
        return Text(NA)
    filled = round(percent / 100 * BAR_WIDTH)
    return Text("█" * filled + "░" * (BAR_WIDTH - filled), style=percent_style(percent))


def _command(row: ProcessRow) -> str:
    host = row.process.host
    if host.state is HostState.OTHER_NAMESPACE:
        return "(host PID: not visible in this container)"
    if host.state is HostState.VANISHED:
        return "(exited)"
    return host.command.value or host.name.value or f"({missing_note(host.command)})"


def gpu_table(view: MemoryView, state: WatchState | None = None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("GPU", justify="right")
    table.add_column("Name", no_wrap=True, overflow="ellipsis", max_width=26)
    table.add_column("Used / Total", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("Free", justify="right", no_wrap=True)
    table.add_column("Driver-reserved", justify="right", no_wrap=True)
    table.add_column("Util", justify="right")
    if state is not None:
        table.add_column("Peak used", justify="right", no_wrap=True)
        table.add_column("Memory history", no_wrap=True)
        table.add_column("Util history", no_wrap=True)
    for row in view.gpus:
        gpu = row.gpu
        if gpu.state is not GpuState.OK:
            cells: list[RenderableType] = [
                str(gpu.index),
                Text("LOST" if gpu.state is GpuState.LOST else "ERROR", style="red bold"),
                Text(gpu.state_detail, style="red"),
            ]
            table.add_row(*cells, *[""] * (len(table.columns) - 3))
            continue
        mem = gpu.memory.value
        used = f"{mib_text(mem.used_bytes)} / {mib_text(mem.total_bytes)}" if mem else NA
        cells = [
            str(gpu.index),
            text(gpu.name),
            used,
            bar(row.used_percent),
            mib_text(mem.free_bytes) if mem else NA,
            text(mem.reserved_bytes, mib_text) if mem else NA,
            text(gpu.utilization, lambda u: f"{u.gpu_percent}%"),
        ]
        if state is not None:
            peak = state.peak_used.get(gpu.index)
            cells += [
                mib_text(peak) if peak is not None else NA,
                sparkline(state.history.get(gpu.index, ()), 16),
                sparkline(state.util_history.get(gpu.index, ()), 16),
            ]
        table.add_row(*cells)
        for mig in gpu.mig_devices:
            m = mig.memory.value
            mig_used = f"{mib_text(m.used_bytes)} / {mib_text(m.total_bytes)}" if m else NA
            pct = 100.0 * m.used_bytes / m.total_bytes if m and m.total_bytes else None
            table.add_row(
                "",
                Text(f"└ MIG GI {text(mig.gpu_instance_id)}", style="cyan"),
                mig_used,
                bar(pct),
                mib_text(m.free_bytes) if m else NA,
                *[""] * (len(table.columns) - 5),
            )
    return table


def process_table(view: MemoryView, max_rows: int | None = None) -> Table | Text:
    """The process rows, biggest first per GPU; ``max_rows`` keeps a live view within the screen."""
    if not view.processes:
        return Text("No processes use GPU memory", style="dim")
    rows = view.processes
    if max_rows is not None and len(rows) > max_rows:
        biggest = sorted(rows, key=lambda r: -(r.process.used_memory_bytes.value or 0))[: max(max_rows - 1, 1)]
        rows = tuple(r for r in view.processes if r in biggest)  # keep the GPU order
    tracked = any(r.breakdown is not None for r in view.processes)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, justify in (("GPU", "right"), ("PID", "right"), ("User", "left"), ("Used", "right"), ("Share", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    if tracked:
        for name in ("Allocated", "Cached free", "Context+other"):
            table.add_column(name, justify="right", no_wrap=True)
    table.add_column("Command", overflow="ellipsis", no_wrap=True, max_width=72)
    for row in rows:
        p = row.process
        pid = Text(("+ " if row.status == "new" else "") + str(p.pid), style="green" if row.status == "new" else "")
        cells: list[RenderableType] = [
            str(row.gpu_index),
            pid,
            text(p.host.user),
            text(p.used_memory_bytes, mib_text),
            f"{row.share_percent:.1f}%" if row.share_percent is not None else NA,
        ]
        if tracked:
            b = row.breakdown
            cells += (
                [mib_text(b.allocated_bytes), mib_text(b.cached_free_bytes), mib_text(b.other_bytes)]
                if b
                else ["", "", ""]
            )
        cells.append(_command(row))
        table.add_row(*cells)
    hidden = len(view.processes) - len(rows)
    if hidden:
        table.add_row(
            "", "", "", "", "", *([""] * 3 if tracked else []), Text(f"… {hidden} more (--json lists all)", style="dim")
        )
    return table


def render(view: MemoryView, state: WatchState | None = None, height: int | None = None) -> Group:
    """The memory view; with ``height`` (a live screen) the process table is cut to fit."""
    parts: list[RenderableType] = []
    if view.machine.source != "live":
        parts.append(Text(view.machine.source, style="dim"))
    parts.append(gpu_table(view, state))
    total = f"Total: {mib_text(view.total_used_bytes)} used of {mib_text(view.total_bytes)}"
    max_rows = None
    if height is not None:
        used = len(view.gpus) + sum(len(r.gpu.mig_devices) for r in view.gpus) + 12  # headers, totals, notes
        max_rows = max(height - used, 3)
    parts += [Text(total, style="bold"), Text(""), Text("Processes", style="bold"), process_table(view, max_rows)]
    for row in view.processes:
        line = empty_cache_line(row)
        if line:
            parts.append(Text(line, style="cyan"))
        if row.breakdown and (row.breakdown.ooms or row.breakdown.alloc_retries):
            parts.append(
                Text(
                    f"PID {row.process.pid}: {row.breakdown.ooms} out-of-memory error(s), "
                    f"{row.breakdown.alloc_retries} allocation retries (cache flushes)",
                    style="yellow",
                )
            )
    for gpu_index, pid, command in view.exited:
        parts.append(Text(f"- exited: PID {pid} on GPU {gpu_index} {command}", style="dim"))
    foreign = foreign_count(view)
    if foreign:
        parts.append(
            Text(
                f"Note: {foreign} process(es) belong to the host's PID namespace (container): their "
                "owner and command are not visible here",
                style="yellow",
            )
        )
    untracked = [r for r in view.processes if r.breakdown is None and r.process.kind.value != "G"]
    if untracked and not any(r.breakdown for r in view.processes):
        parts.append(
            Text(
                "Tip: for PyTorch's view of a process's memory, start it with "
                "`python -m gpudiag.track train.py` or call gpudiag.track.start()",
                style="dim",
            )
        )
    return Group(*parts)


def to_json(view: MemoryView, timestamp: float) -> dict[str, Any]:
    def gpu_json(row: Any) -> dict[str, Any]:
        g = row.gpu
        m = g.memory.value
        return {
            "index": g.index,
            "uuid": g.uuid.value,
            "name": g.name.value,
            "state": g.state.value,
            "total_bytes": m.total_bytes if m else None,
            "used_bytes": m.used_bytes if m else None,
            "free_bytes": m.free_bytes if m else None,
            "driver_reserved_bytes": m.reserved_bytes.value if m else None,
            "utilization_percent": g.utilization.value.gpu_percent if g.utilization.value else None,
            "unavailable": missing_note(g.memory) or None,
            "mig_devices": [
                {
                    "index": d.index,
                    "uuid": d.uuid.value,
                    "gpu_instance_id": d.gpu_instance_id.value,
                    "total_bytes": d.memory.value.total_bytes if d.memory.value else None,
                    "used_bytes": d.memory.value.used_bytes if d.memory.value else None,
                }
                for d in g.mig_devices
            ],
        }

    def proc_json(row: ProcessRow) -> dict[str, Any]:
        p, b = row.process, row.breakdown
        return {
            "gpu_index": row.gpu_index,
            "pid": p.pid,
            "type": p.kind.value,
            "user": p.host.user.value,
            "command": p.host.command.value,
            "host_state": p.host.state.value,
            "used_bytes": p.used_memory_bytes.value,
            "share_percent": round(row.share_percent, 2) if row.share_percent is not None else None,
            "new": row.status == "new",
            "torch": None
            if b is None
            else {
                "allocated_bytes": b.allocated_bytes,
                "cached_free_bytes": b.cached_free_bytes,
                "other_bytes": b.other_bytes,
                "peak_allocated_bytes": b.peak_allocated_bytes,
                "peak_reserved_bytes": b.peak_reserved_bytes,
                "alloc_retries": b.alloc_retries,
                "ooms": b.ooms,
            },
        }

    return {
        "schema": SCHEMA,
        "timestamp": timestamp,
        "source": view.machine.source,
        "gpus": [gpu_json(r) for r in view.gpus],
        "processes": [proc_json(r) for r in view.processes],
        "exited": [{"gpu_index": g, "pid": p} for g, p, _ in view.exited],
        "total_used_bytes": view.total_used_bytes,
        "total_bytes": view.total_bytes,
    }


CSV_HEADER = ("timestamp", "gpu", "used_bytes", "total_bytes", "free_bytes", "utilization_percent", "processes")


def csv_rows(view: MemoryView, timestamp: float) -> list[tuple[Any, ...]]:
    rows = []
    for r in view.gpus:
        m = r.gpu.memory.value
        u = r.gpu.utilization.value
        procs = sum(1 for p in view.processes if p.gpu_index == r.gpu.index)
        rows.append(
            (
                f"{timestamp:.3f}",
                r.gpu.index,
                m.used_bytes if m else "",
                m.total_bytes if m else "",
                m.free_bytes if m else "",
                u.gpu_percent if u else "",
                procs,
            )
        )
    return rows
