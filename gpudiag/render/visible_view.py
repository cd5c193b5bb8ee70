"""`gpudiag visible` rendered: the cuda:N mapping, how each entry was read, and why."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpudiag.render.format import mib_text
from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR, Outcome, Resolution

SCHEMA = "gpudiag.visible/1"


def _setting(resolution: Resolution, origin: str) -> Text:
    value = "(unset: every device)" if resolution.value is None else repr(resolution.value)
    line = Text(f"{VISIBLE_VAR}={value}   {ORDER_VAR}={resolution.order}", style="bold")
    line.append(f"   [{origin}]", style="dim")
    return line


def render(
    resolution: Resolution, origin: str, hints: tuple[str, ...], probe: tuple[str, tuple[str, ...]] | None
) -> Group:
    parts: list[RenderableType] = [_setting(resolution, origin), Text("")]
    if resolution.devices:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for name in ("cuda:N", "GPU", "Name", "UUID", "Bus-Id", "Memory"):
            table.add_column(name, no_wrap=True, justify="right" if name in ("GPU", "Memory") else "left")
        for d in resolution.devices:
            gpu = f"{d.gpu_index}" + (f" / MIG {d.mig.index}" if d.mig is not None else "")
            memory = mib_text(d.memory_total_bytes) if d.memory_total_bytes is not None else "N/A"
            table.add_row(f"cuda:{d.ordinal}", gpu, d.name, d.uuid, d.pci_bus_id, memory)
        parts.append(table)
    else:
        parts.append(Text("No CUDA device is visible with this setting.", style="red bold"))
    if resolution.entries:
        parts += [Text(""), Text("How CUDA reads the list", style="bold")]
        entries = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        entries.add_column("#", justify="right")
        entries.add_column("entry")
        entries.add_column("result")
        entries.add_column("why")
        styles = {Outcome.USED: "green", Outcome.DROPPED: "red", Outcome.IGNORED: "yellow"}
        for e in resolution.entries:
            entries.add_row(str(e.position), repr(e.token), Text(e.outcome.value, style=styles[e.outcome]), e.reason)
        parts.append(entries)
    if resolution.warnings:
        parts.append(Text(""))
        parts += [Text(f"Warning: {w}", style="yellow") for w in resolution.warnings]
    if resolution.narrowing:
        parts += [Text(""), Text("Set before CUDA_VISIBLE_DEVICES applies", style="bold")]
        parts += [Text(f"  {name}={value}: {note}") for name, value, note in resolution.narrowing]
    if probe is not None:
        status, problems = probe
        parts += [Text(""), Text(f"CUDA runtime probe: {status}", style="bold")]
        parts += [Text(f"  disagreement: {p}", style="red") for p in problems]
    if hints:
        parts += [Text(""), Text("In your code", style="bold")]
        parts += [Text(f"  - {h}") for h in hints]
    return Group(*parts)


def to_json(
    resolution: Resolution, origin: str, hints: tuple[str, ...], probe: tuple[str, tuple[str, ...]] | None
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "origin": origin,
        "cuda_visible_devices": resolution.value,
        "cuda_device_order": resolution.order,
        "order_is_heuristic": resolution.order_is_heuristic,
        "devices": [
            {
                "cuda_ordinal": d.ordinal,
                "nvml_index": d.gpu_index,
                "mig_index": d.mig.index if d.mig is not None else None,
                "uuid": d.uuid,
                "pci_bus_id": d.pci_bus_id,
                "name": d.name,
                "memory_total_bytes": d.memory_total_bytes,
            }
            for d in resolution.devices
        ],
        "entries": [
            {"position": e.position, "token": e.token, "outcome": e.outcome.value, "reason": e.reason}
            for e in resolution.entries
        ],
        "warnings": list(resolution.warnings),
        "narrowed_by": [{"variable": n, "value": v, "meaning": m} for n, v, m in resolution.narrowing],
        "hints": list(hints),
        "probe": None if probe is None else {"status": probe[0], "disagreements": list(probe[1])},
    }
