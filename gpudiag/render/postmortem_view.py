"""`gpudiag memory --postmortem FILE`: an OOM post-mortem in a headline, three lines and the figures behind them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from gpudiag.render.format import mib_text
from gpudiag.render.grid import Column, Grid
from gpudiag.track.report import fragmentation, headline, holders, trend

LAST_STEPS = 8


def _when(at: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(at)))
    except (TypeError, ValueError, OverflowError):
        return "an unknown time"


def _size(value: Any) -> str:
    return mib_text(int(value)) if isinstance(value, int) else ""


def render(doc: dict[str, Any], path: Path) -> Group:
    trigger = "the allocator's OOM observer" if doc.get("trigger") == "observer" else "the OOM count rising"
    rank = f", rank {doc['rank']}/{doc.get('world_size') or '?'}" if doc.get("rank") is not None else ""
    parts: list[RenderableType] = [
        Text(f"{path}: written at the OOM by {trigger}, {_when(doc.get('at'))} on {doc.get('host') or '?'}", "dim"),
        Text(f"PID {doc.get('pid')}{rank}: {doc.get('command') or ''}", style="dim"),
        Text(headline(doc), style="bold red"),
        Text(holders(doc)),
        Text(fragmentation(doc), style="yellow"),
        Text(trend(doc)),
        Text(""),
        Text("This process's allocator at the OOM", style="bold"),
    ]
    grid = Grid(
        [
            Column("cuda"),
            Column("Allocated"),
            Column("Reserved"),
            Column("Non-releasable"),
            Column("Largest free"),
            Column("Segments"),
            Column("Retries"),
            Column("OOMs"),
            Column("Name", "left", flexible=True),
        ]
    )
    for d in doc.get("devices") or []:
        grid.add_row(
            str(d.get("torch_index")),
            _size(d.get("allocated_bytes")),
            _size(d.get("reserved_bytes")),
            _size(d.get("inactive_split_bytes")),
            _size(d.get("largest_free_block_bytes")),
            str(d.get("segments", "")) if d.get("segments") is not None else "",
            str(d.get("alloc_retries", "")),
            str(d.get("ooms", "")),
            str(d.get("name", "")),
        )
    parts.append(grid)
    records = (doc.get("steps") or {}).get("records") or []
    if records:
        parts += [Text(""), Text(f"Last steps (of {doc['steps'].get('count')})", style="bold")]
        steps = Grid([Column("Step"), Column("cuda"), Column("Allocated at end"), Column("Reserved"), Column("Peak")])
        for r in records[-LAST_STEPS:]:
            steps.add_row(str(r[0]), str(r[2]), _size(r[3]), _size(r[4]), _size(r[5]))
        parts.append(steps)
    parts.append(Text(""))
    machine = doc.get("machine")
    if isinstance(machine, dict) and "gpus" in machine:
        parts.append(
            Text(
                f"The machine at the OOM: {len(machine['gpus'])} GPU(s), "
                f'{len(machine.get("processes", []))} process(es) ("machine" in the file, gpudiag.memory/2)',
                style="dim",
            )
        )
    elif isinstance(machine, dict):
        parts.append(Text(f"No view of the machine: {machine.get('unavailable')}", style="dim"))
    snap = doc.get("torch_snapshot")
    if isinstance(snap, dict):
        traces = sum(len(t) for t in snap.get("device_traces") or [])
        parts.append(
            Text(
                f"PyTorch's memory history is in it ({traces} events): `gpudiag memory --postmortem {path} "
                "--torch-snapshot oom.pickle`, then open oom.pickle at https://pytorch.org/memory_viz",
                style="cyan",
            )
        )
    else:
        parts.append(
            Text(
                "No PyTorch memory history: call torch.cuda.memory._record_memory_history(max_entries=100000) at the "
                "start of training to have each allocation's stack in the next post-mortem",
                style="dim",
            )
        )
    return Group(*parts)
