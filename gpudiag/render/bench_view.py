"""bench-transfer results: a table with verdicts, a bandwidth-vs-size chart, JSON and CSV."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpudiag.bench.engine import Measurement
from gpudiag.bench.link import Judgement, Verdict
from gpudiag.bench.stats import GB, GiB

SCHEMA = "gpudiag.bench-transfer/1"


@dataclass(frozen=True)
class Row:
    measurement: Measurement
    gpu_label: str  # "GPU 3" (NVML index) or "cuda:0"
    peer_label: str
    judgement: Judgement
    link: str  # "Gen4 x16 (max Gen4 x16)" read after the warm-up


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


_STYLE = {Verdict.HEALTHY: "green", Verdict.BELOW: "red bold", Verdict.NO_REFERENCE: "dim"}


def table(rows: list[Row], gib: bool) -> Table:
    unit, name = (GiB, "GiB/s") if gib else (GB, "GB/s")
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col, justify in (
        ("Mode", "left"),
        ("GPU", "left"),
        ("Size", "right"),
        (f"Median {name}", "right"),
        ("Min", "right"),
        ("Max", "right"),
        ("Spread", "right"),
        ("Link (under load)", "left"),
        ("Limit", "right"),
        ("Verdict", "left"),
    ):
        t.add_column(col, justify=justify, no_wrap=col != "Verdict")  # type: ignore[arg-type]
    for r in rows:
        m = r.measurement
        med, lo, hi = m.bandwidth.scaled(unit)
        limit = f"{r.judgement.limit_gbps * GB / unit:.1f}" if r.judgement.limit_gbps else ""
        verdict = Text(r.judgement.verdict.value, style=_STYLE[r.judgement.verdict])
        if r.judgement.note:
            verdict.append(f" — {r.judgement.note}", style="")
        if not m.verified:
            verdict = Text("DATA MISMATCH after copy", style="red bold")
        target = r.gpu_label + (f" → {r.peer_label}" if r.peer_label else "")
        t.add_row(
            m.mode.value,
            target,
            _size(m.nbytes),
            f"{med:.1f}",
            f"{lo:.1f}",
            f"{hi:.1f}",
            f"{m.bandwidth.spread_percent:.1f}%",
            r.link,
            limit,
            verdict,
        )
    return t


def chart(rows: list[Row], width: int = 40, gib: bool = False) -> Group:
    """For sweeps: one bar per size, per mode and GPU, scaled to the fastest figure."""
    unit, name = (GiB, "GiB/s") if gib else (GB, "GB/s")
    parts: list[RenderableType] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault(
            (r.measurement.mode.value, r.gpu_label + (f"→{r.peer_label}" if r.peer_label else "")), []
        ).append(r)
    for (mode, gpu), rs in groups.items():
        if len(rs) < 2:
            continue
        top = max(r.measurement.bandwidth.median for r in rs) or 1.0
        parts.append(Text(f"{mode} {gpu}", style="bold"))
        for r in sorted(rs, key=lambda r: r.measurement.nbytes):
            value = r.measurement.bandwidth.median
            bar = "█" * max(1, round(width * value / top))
            parts.append(Text(f"{_size(r.measurement.nbytes):>8} {bar} {value / unit:.1f} {name}"))
        parts.append(Text(""))
    return Group(*parts)


def render(rows: list[Row], notes: list[str], gib: bool, sweep: bool) -> Group:
    parts: list[RenderableType] = [table(rows, gib)]
    if sweep:
        parts += [Text(""), Text("Bandwidth by size", style="bold underline"), chart(rows, gib=gib)]
    unit = "GiB/s = 2^30 B/s" if gib else "GB/s = 10^9 B/s"
    conventions = sorted({f"{r.measurement.mode.value}: {r.measurement.mode.convention}" for r in rows})
    parts += [Text(""), Text(f"Units: {unit}. Bytes counted:", style="dim")]
    parts += [Text(f"  {c}", style="dim") for c in conventions]
    parts += [Text(n, style="yellow") for n in notes]
    return Group(*parts)


def to_json(rows: list[Row], notes: list[str], device_info: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "units": "bytes_per_second",
        "devices": device_info,
        "results": [
            {
                "mode": r.measurement.mode.value,
                "convention": r.measurement.mode.convention,
                "gpu": r.gpu_label,
                "peer": r.peer_label or None,
                "size_bytes": r.measurement.nbytes,
                "counted_bytes": r.measurement.counted_bytes,
                "median_bytes_per_s": r.measurement.bandwidth.median,
                "min_bytes_per_s": r.measurement.bandwidth.minimum,
                "max_bytes_per_s": r.measurement.bandwidth.maximum,
                "spread_percent": round(r.measurement.bandwidth.spread_percent, 2),
                "samples": r.measurement.bandwidth.samples,
                "verified": r.measurement.verified,
                "link_under_load": r.link or None,
                "limit_bytes_per_s": r.judgement.limit_gbps * GB if r.judgement.limit_gbps else None,
                "typical_bytes_per_s": [x * GB for x in r.judgement.typical] if r.judgement.typical else None,
                "verdict": r.judgement.verdict.value,
                "note": r.judgement.note or None,
            }
            for r in rows
        ],
        "notes": notes,
    }


def to_csv(rows: list[Row]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        [
            "mode",
            "gpu",
            "peer",
            "size_bytes",
            "median_gbps",
            "min_gbps",
            "max_gbps",
            "spread_percent",
            "verified",
            "link",
            "verdict",
        ]
    )
    for r in rows:
        med, lo, hi = r.measurement.bandwidth.scaled(GB)
        w.writerow(
            [
                r.measurement.mode.value,
                r.gpu_label,
                r.peer_label,
                r.measurement.nbytes,
                f"{med:.3f}",
                f"{lo:.3f}",
                f"{hi:.3f}",
                f"{r.measurement.bandwidth.spread_percent:.2f}",
                r.measurement.verified,
                r.link,
                r.judgement.verdict.value,
            ]
        )
    return out.getvalue()
