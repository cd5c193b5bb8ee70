"""`gpudiag visible` rendered: the cuda:N mapping, how each entry was read, and why.

Every piece of text taken from the user's value is shown with repr() or inside a Text object,
so blanks, control characters and rich markup in a value print as written.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpudiag.render.format import mib_text
from gpudiag.render.printable import printable
from gpudiag.render.visible_json import SCHEMA as SCHEMA
from gpudiag.render.visible_json import probe_json as probe_json
from gpudiag.render.visible_json import to_json as to_json
from gpudiag.visibility import (
    ORDER_VAR,
    SUMMARY_KIND,
    VISIBLE_VAR,
    Outcome,
    ProbeReport,
    Resolution,
    shown_value,
)


def _setting(resolution: Resolution, origin: str, order_origin: str) -> Text:
    value = "(unset: every device)" if resolution.value is None else shown_value(resolution.value)
    line = Text(f"{VISIBLE_VAR}={value}", style="bold")
    line.append(f" [{origin}]", style="dim")
    shown = resolution.order if resolution.order_value is None else repr(resolution.order_value)
    line.append(f"   {ORDER_VAR}={shown}", style="bold")
    if resolution.order_value is None:
        line.append(" [unset: CUDA's default]", style="dim")
    else:
        line.append(f" [{order_origin}]", style="dim")
        if resolution.order_value != resolution.order:
            line.append(f" → {resolution.order}", style="bold")
    return line


def _devices(resolution: Resolution, width: int | None) -> RenderableType:
    """The mapping table. UUIDs are never cut: on a narrow console Bus-Id, then Memory, then Name go."""
    if not resolution.devices:
        return Text("No CUDA device is visible with this setting.", style="red bold")
    rows = []
    for d in resolution.devices:
        gpu = f"{d.gpu_index}" + (f" / MIG {d.mig.index}" if d.mig is not None else "")
        memory = mib_text(d.memory_total_bytes) if d.memory_total_bytes is not None else "N/A"
        rows.append(
            {
                "cuda:N": f"cuda:{d.ordinal}",
                "GPU": gpu,
                "Name": printable(d.name),
                "UUID": printable(d.uuid),
                "Bus-Id": printable(d.pci_bus_id),
                "Memory": memory,
            }
        )
    columns = ["cuda:N", "GPU", "Name", "UUID", "Bus-Id", "Memory"]

    def needed(cols: list[str]) -> int:
        return sum(max(len(c), *(len(r[c]) for r in rows)) + 3 for c in cols)

    for optional in ("Bus-Id", "Memory", "Name"):
        if width is None or needed(columns) <= width:
            break
        columns.remove(optional)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in columns:
        if name == "UUID":  # the identity of the device: fold it onto two lines rather than cut it
            table.add_column(name, overflow="fold", min_width=min(len(r[name]) for r in rows) // 2)
            continue
        table.add_column(name, no_wrap=True, justify="right" if name in ("GPU", "Memory") else "left")
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    return table


def _entries(resolution: Resolution) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("entry")
    table.add_column("result")
    table.add_column("why")
    styles = {Outcome.USED: "green", Outcome.DROPPED: "red", Outcome.IGNORED: "yellow"}
    for e in resolution.entries:
        why = e.reason + ("" if e.documented else " [undocumented]")
        table.add_row(
            str(e.position),
            e.token if e.kind == SUMMARY_KIND else repr(e.token),
            Text(e.outcome.value, style=styles[e.outcome]),
            printable(why),
        )
    return table


def _bullets(lines: tuple[str, ...] | list[str], prefix: str, style: str = "") -> Table:
    """Bulleted lines with a hanging indent, so wrapped text stays under its bullet."""
    grid = Table.grid(padding=(0, 1), pad_edge=False)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        grid.add_row(f"  {prefix}", Text(printable(line), style=style))
    return grid


def _section(title: str, lines: tuple[str, ...] | list[str], prefix: str, style: str = "") -> list[RenderableType]:
    if not lines:
        return []
    return [Text(""), Text(title, style="bold"), _bullets(lines, prefix, style)]


def render_probe(probe: ProbeReport) -> list[RenderableType]:
    style = {"agrees": "green", "disagrees": "red bold", "could_not_run": "yellow"}.get(probe.status, "")
    title = Text("CUDA runtime probe (a child process with this setting): ", style="bold")
    title.append(printable(probe.summary), style=style)
    lines: list[str] = []
    for source in probe.sources:
        if source.devices is None:
            lines.append(f"{source.label}: {source.detail}")
            continue
        seen = ", ".join(f"cuda:{d.ordinal} {d.uuid or d.name or '?'}" for d in source.devices[:8])
        more = " …" if len(source.devices) > 8 else ""
        lines.append(f"{source.label}: {len(source.devices)} device(s)" + (f": {seen}{more}" if seen else ""))
    if probe.torch_count_before_init is not None:
        lines.append(f"torch.cuda.device_count() before CUDA initialised: {probe.torch_count_before_init}")
    lines += [f"disagreement: {p}" for p in probe.disagreements]
    lines += [f"note: {n}" for n in probe.notes]
    return [Text(""), title, _bullets(lines, "-")]


def render(
    resolution: Resolution,
    origin: str,
    hints: tuple[str, ...],
    probe: ProbeReport | None,
    order_origin: str = "environment",
    width: int | None = None,
) -> Group:
    parts: list[RenderableType] = [_setting(resolution, origin, order_origin), Text(""), _devices(resolution, width)]
    if resolution.entries:
        parts += [Text(""), Text("How CUDA reads the list", style="bold"), _entries(resolution)]
    parts += _section("Warnings", resolution.warnings, "!", "yellow")
    parts += _section("Undocumented behaviour gpudiag assumes (check with --probe)", resolution.undocumented, "?")
    if resolution.pytorch is not None:
        parts += _section("PyTorch reads the variable differently", resolution.pytorch.divergences, "-")
    if resolution.narrowing:
        lines = [f"{name}={value!r}: {note}" for name, value, note in resolution.narrowing]
        parts += _section(f"Set before {VISIBLE_VAR} applies", lines, "-")
    if probe is not None:
        parts += render_probe(probe)
    parts += _section("In your code", hints, "-")
    return Group(*parts)


def render_unavailable(detail: str, probe: ProbeReport | None) -> Group:
    """NVML cannot run: no mapping can be computed; the probe's answer may still say why."""
    parts: list[RenderableType] = [Text(f"gpudiag cannot compute the mapping: {printable(detail)}", style="red bold")]
    if probe is not None:
        parts += render_probe(probe)
    return Group(*parts)
