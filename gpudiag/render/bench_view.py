"""bench-transfer output: the devices, a results table with verdicts, the peer matrices, a
bandwidth-vs-size chart for sweeps, findings and conventions; JSON and CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from gpudiag.bench.link import Verdict
from gpudiag.bench.plan import Mode, Plan, size_text
from gpudiag.bench.report import Finding, Row, Severity, device_label, max_link, slower
from gpudiag.bench.runner import Outcome
from gpudiag.bench.stats import GB, GiB, saturation_size
from gpudiag.model import Gpu
from gpudiag.render.printable import printable, spreadsheet_text

SCHEMA = "gpudiag.bench-transfer/1"


@dataclass(frozen=True)
class Unit:
    name: str  # "GB/s"
    factor: float  # bytes per second in one unit
    key: str  # "gb_per_s", for CSV headers
    definition: str


DECIMAL = Unit("GB/s", GB, "gb_per_s", "GB/s = 10^9 bytes/s")
BINARY = Unit("GiB/s", GiB, "gib_per_s", "GiB/s = 2^30 bytes/s")

_STYLE = {Verdict.HEALTHY: "green", Verdict.BELOW: "red bold", Verdict.NOT_JUDGED: "dim"}
_SEVERITY_STYLE = {Severity.FAILURE: "red bold", Severity.WARNING: "yellow", Severity.INFO: ""}


def _rate(value: float | None, unit: Unit) -> str:
    if value is None:
        return ""
    scaled = value / unit.factor
    return f"{scaled:.0f}" if scaled >= 100 else f"{scaled:.1f}"


def verdict_text(row: Row) -> Text:
    if row.error:
        return Text(f"error: {printable(row.error)}", style="red")
    if row.failed:
        return Text("DATA MISMATCH: wrong data after copying", style="red bold")
    j = row.judgement
    text = Text(j.verdict.label, style=_STYLE[j.verdict])
    details = []
    if j.behaves_like is not None:
        details.append(f"behaves like {j.behaves_like}")
    if j.note:
        details.append(j.note)
    if details:
        detail = "; ".join(details)
        # A long detail goes on a line of its own rather than wrapping mid-phrase.
        text.append(("\n" if len(j.verdict.label) + len(detail) > 28 else ": ") + detail, style="")
    return text


def devices_table(outcome: Outcome, gpus: dict[int, Gpu | None], rows: Sequence[Row]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col in ("Device", "Name", "PCIe max", "NUMA node", "Host memory"):
        t.add_column(col, no_wrap=col != "Host memory")
    placement = {r.task.device: r.placement for r in rows if r.placement is not None}
    for d in outcome.devices:
        gpu = gpus.get(d.ordinal)
        link = max_link(gpu)
        node = outcome.numa_nodes.get(d.ordinal)
        placed = placement.get(d.ordinal)
        t.add_row(
            device_label(d.ordinal, gpu),
            printable(d.name),
            str(link) if link else "N/A",
            "N/A" if node is None else str(node),
            placed.placement.value.replace("_", " ") if placed else "",
        )
    return t


def expectation_text(row: Row, unit: Unit) -> str:
    """'50.0-57.5 / 63.0': the typical range, then the theoretical limit."""
    exp = row.judgement.expectation
    typical = f"{_rate(exp.typical[0], unit)}-{_rate(exp.typical[1], unit)}" if exp.typical else ""
    limit = _rate(exp.limit, unit)
    return f"{typical} / {limit}" if typical and limit else typical or limit


def results_table(rows: Sequence[Row], unit: Unit) -> Table:
    """One GPU's own copies (host<->device and within the GPU)."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    columns = (
        ("Mode", "left", True),
        ("Size", "right", True),
        (unit.name, "right", True),
        ("Min-max", "right", True),
        ("Spread", "right", True),
        ("Link now", "left", True),
        ("Typical / limit", "right", True),
        ("Verdict", "left", False),
    )
    for name, justify, no_wrap in columns:
        t.add_column(name, justify=justify, no_wrap=no_wrap)  # type: ignore[arg-type]
    for r in rows:
        bw = r.bandwidth
        link = Text("" if r.link is None or not r.task.mode.is_host else str(r.link))
        if r.task.mode.is_host and slower(r.link, r.max_link):
            link.stylize("red bold")
        t.add_row(
            r.task.mode.value,
            size_text(r.task.nbytes),
            _rate(bw.median if bw else None, unit),
            f"{_rate(bw.minimum, unit)}-{_rate(bw.maximum, unit)}" if bw else "",
            f"{bw.spread_percent:.1f}%" if bw else "",
            link,
            expectation_text(r, unit),
            verdict_text(r),
        )
    return t


def peer_matrices(rows: Sequence[Row], unit: Unit) -> list[RenderableType]:
    """One matrix per peer mode and size: row = source, column = destination."""
    out: list[RenderableType] = []
    groups: dict[tuple[Mode, int], list[Row]] = {}
    for r in rows:
        if r.task.mode.is_peer:
            groups.setdefault((r.task.mode, r.task.nbytes), []).append(r)
    for (mode, size), group in groups.items():
        ordinals = sorted({r.task.device for r in group} | {r.task.peer for r in group if r.task.peer is not None})
        cells: dict[tuple[int, int], Row] = {}
        for r in group:
            assert r.task.peer is not None
            cells[(r.task.device, r.task.peer)] = r
            if mode is Mode.PEER_BIDIR:
                cells[(r.task.peer, r.task.device)] = r
        what = "sum of both directions" if mode is Mode.PEER_BIDIR else "from row to column"
        out.append(Text(f"{mode.value} {size_text(size)}, {unit.name}, {what} (medians)", style="bold"))
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        t.add_column("")
        for o in ordinals:
            t.add_column(f"cuda:{o}", justify="right")
        for a in ordinals:
            values: list[RenderableType] = []
            for b in ordinals:
                cell = cells.get((a, b))
                if a == b:
                    values.append(Text("-", style="dim"))
                elif cell is None or cell.bandwidth is None:
                    values.append(Text("error" if cell is not None else "", style="red"))
                else:
                    mark = "*" if cell.peer_access is False else ""
                    style = _STYLE[cell.judgement.verdict] if cell.judgement.verdict is Verdict.BELOW else ""
                    values.append(Text(f"{_rate(cell.bandwidth.median, unit)}{mark}", style=style))
            t.add_row(f"cuda:{a}", *values)
        out += [t, Text("")]
    if any(r.peer_access is False for r in rows):
        out.append(Text("* no peer access between these GPUs: CUDA stages the copy through host memory", style="dim"))
    return out


class SweepChart:
    """Bandwidth against size, one bar per size and a block per mode and device, each scaled
    to its own peak; the header says from which size the curve has saturated."""

    BLOCKS = " ▏▎▍▌▋▊▉█"

    def __init__(self, rows: Sequence[Row], unit: Unit) -> None:
        self.unit = unit
        self.series: dict[str, list[tuple[int, float]]] = {}
        for r in rows:
            if r.bandwidth is None:
                continue
            target = f"cuda:{r.task.device}" + (f"->cuda:{r.task.peer}" if r.task.peer is not None else "")
            self.series.setdefault(f"{r.task.mode.value} {target}", []).append((r.task.nbytes, r.bandwidth.median))

    def bar(self, value: float, peak: float, width: int) -> str:
        eighths = round(8 * width * value / peak) if peak > 0 else 0
        full, part = divmod(max(eighths, 1), 8)
        return ("█" * full + (self.BLOCKS[part] if part else "")).ljust(width)

    def lines(self, width: int) -> Iterator[Text]:
        bar_width = max(10, width - 8 - 2 - 10)
        for name, points in self.series.items():
            if len(points) < 2:
                continue
            points = sorted(points)
            peak = max(rate for _, rate in points)
            saturated = saturation_size(points)
            header = Text(name, style="bold")
            if saturated is not None:
                header.append(f"  peak {peak / self.unit.factor:.1f} {self.unit.name}, ")
                header.append(f">= 90% of it from {size_text(saturated)}")
            yield header
            for size, rate in points:
                yield (
                    Text(f"{size_text(size):>8} ")
                    + Text(self.bar(rate, peak, bar_width), style="cyan")
                    + Text(f" {rate / self.unit.factor:9.1f}")
                )
            yield Text("")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)


def conventions(rows: Sequence[Row], plan: Plan, unit: Unit) -> list[RenderableType]:
    by_convention: dict[str, list[str]] = {}
    for mode in sorted({r.task.mode for r in rows}, key=list(Mode).index):
        by_convention.setdefault(mode.convention, []).append(mode.value)
    lines: list[RenderableType] = [
        Text(
            f"Method: {plan.warmup} warm-up copies, then {plan.samples} samples of {plan.iters} copies; "
            "asynchronous copies (*_async, d2d, peer) timed with CUDA events behind a spin kernel, blocking and "
            "pageable ones per call with a wall clock; median of the samples, min-max, spread = (max-min)/median; "
            "data verified after copying.",
            style="dim",
        ),
        Text(f"Units: {unit.definition}. Bytes counted:", style="dim"),
    ]
    grid = Table.grid(padding=(0, 2), pad_edge=True)
    grid.add_column(style="dim", ratio=2)
    grid.add_column(style="dim", ratio=3)
    for convention, modes in by_convention.items():
        grid.add_row(", ".join(modes) + ":", convention)
    lines.append(grid)
    return lines


def render(
    rows: Sequence[Row],
    outcome: Outcome,
    gpus: dict[int, Gpu | None],
    found: Sequence[Finding],
    notes: Sequence[str],
    plan: Plan,
    unit: Unit = DECIMAL,
) -> Group:
    parts: list[RenderableType] = [devices_table(outcome, gpus, rows)]
    for d in outcome.devices:
        own = [r for r in rows if r.task.device == d.ordinal and not r.task.mode.is_peer]
        if own:
            parts += [
                Text(""),
                Text(device_label(d.ordinal, gpus.get(d.ordinal)), style="bold"),
                results_table(own, unit),
            ]
    matrices = peer_matrices(rows, unit)
    if matrices:
        parts += [Text(""), *matrices]
    if plan.sweep or len({r.task.nbytes for r in rows}) > 2:
        parts += [Text(""), Text(f"Bandwidth by size ({unit.name})", style="bold underline"), SweepChart(rows, unit)]
    if found:
        parts.append(Text(""))
        for f in found:
            parts.append(Text(printable(f.message), style=_SEVERITY_STYLE[f.severity]))
    parts.append(Text(""))
    parts += [Text(printable(n), style="dim") for n in notes]
    parts += conventions(rows, plan, unit)
    return Group(*parts)


# --- machine-readable ----------------------------------------------------------------


def _link_data(prefix: str, link: Any) -> dict[str, int | None]:
    return {f"{prefix}_gen": link.gen if link else None, f"{prefix}_width": link.width if link else None}


def to_json(
    rows: Sequence[Row],
    outcome: Outcome,
    gpus: dict[int, Gpu | None],
    found: Sequence[Finding],
    notes: Sequence[str],
    plan: Plan,
) -> dict[str, Any]:
    placement = {r.task.device: r.placement for r in rows if r.placement is not None}
    return {
        "schema": SCHEMA,
        "complete": not outcome.failure,
        "torch": outcome.version or None,
        "method": {
            "warmup_copies": plan.warmup,
            "samples": plan.samples,
            "copies_per_sample": plan.iters,
            "statistic": "median of samples",
            "rates": "bytes per second (GB/s = 1e9 bytes/s)",
        },
        "devices": [
            {
                "cuda_device": d.ordinal,
                "gpu_index": g.index if (g := gpus.get(d.ordinal)) is not None else None,
                "uuid": d.uuid,
                "name": d.name,
                "numa_node": outcome.numa_nodes.get(d.ordinal),
                "host_memory_placement": p.placement.value if (p := placement.get(d.ordinal)) else None,
                **_link_data("pcie_max", max_link(g)),
                "l2_cache_bytes": d.l2_bytes,
                "memory_total_bytes": d.total_bytes,
                "memory_free_bytes": d.free_bytes,
            }
            for d in outcome.devices
        ],
        "peer_access": [
            {"from_cuda_device": a, "to_cuda_device": b, "peer_access": ok}
            for (a, b), ok in outcome.peer_access.items()
        ],
        "results": [_result(r) for r in rows],
        "findings": [{"severity": f.severity.value, "cuda_device": f.device, "message": f.message} for f in found],
        "notes": list(notes),
    }


def _result(r: Row) -> dict[str, Any]:
    bw, exp = r.bandwidth, r.judgement.expectation
    return {
        "mode": r.task.mode.value,
        "cuda_device": r.task.device,
        "gpu_index": r.gpu.index if r.gpu else None,
        "peer_cuda_device": r.task.peer,
        "peer_gpu_index": r.peer_gpu.index if r.peer_gpu else None,
        "size_bytes": r.task.nbytes,
        "counted_bytes_per_copy": r.task.counted_bytes,
        "byte_counting": r.task.mode.convention,
        "timing": r.task.mode.timing,
        "samples_bytes_per_s": list(bw.rates) if bw else [],
        "median_bytes_per_s": bw.median if bw else None,
        "min_bytes_per_s": bw.minimum if bw else None,
        "max_bytes_per_s": bw.maximum if bw else None,
        "spread_percent": round(bw.spread_percent, 3) if bw else None,
        "verified": r.verified,
        "peer_access": r.peer_access,
        **_link_data("pcie_under_load", r.link),
        "limit_bytes_per_s": exp.limit,
        "typical_low_bytes_per_s": exp.typical[0] if exp.typical else None,
        "typical_high_bytes_per_s": exp.typical[1] if exp.typical else None,
        "floor_bytes_per_s": exp.floor,
        "verdict": r.judgement.verdict.value,
        **_link_data("behaves_like_pcie", r.judgement.behaves_like),
        "note": r.judgement.note or None,
        "likely_cause": r.cause or None,
        "error": r.error or None,
    }


def to_csv(rows: Sequence[Row], unit: Unit = DECIMAL) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    u = unit.key
    w.writerow(
        [
            "mode",
            "cuda_device",
            "gpu_index",
            "peer_cuda_device",
            "size_bytes",
            "counted_bytes_per_copy",
            "timing",
            "samples",
            f"median_{u}",
            f"min_{u}",
            f"max_{u}",
            "spread_percent",
            "verified",
            "pcie_gen_under_load",
            "pcie_width_under_load",
            f"limit_{u}",
            f"typical_low_{u}",
            f"typical_high_{u}",
            "verdict",
            "behaves_like",
            "error",
        ]
    )

    def num(value: float | None) -> str:
        return "" if value is None else f"{value / unit.factor:.3f}"

    for r in rows:
        bw, exp = r.bandwidth, r.judgement.expectation
        w.writerow(
            [
                r.task.mode.value,
                r.task.device,
                r.gpu.index if r.gpu else "",
                "" if r.task.peer is None else r.task.peer,
                r.task.nbytes,
                r.task.counted_bytes,
                r.task.mode.timing,
                bw.samples if bw else 0,
                num(bw.median if bw else None),
                num(bw.minimum if bw else None),
                num(bw.maximum if bw else None),
                f"{bw.spread_percent:.2f}" if bw else "",
                "" if r.verified is None else str(r.verified).lower(),
                r.link.gen if r.link else "",
                r.link.width if r.link else "",
                num(exp.limit),
                num(exp.typical[0] if exp.typical else None),
                num(exp.typical[1] if exp.typical else None),
                r.judgement.verdict.value,
                str(r.judgement.behaves_like or ""),
                spreadsheet_text(r.error),  # CUDA's or the child's words: never a formula
            ]
        )
    return out.getvalue()
