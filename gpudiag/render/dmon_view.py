"""`gpudiag dmon`: nvidia-smi dmon's lines (its two header lines, one line per GPU per sample, columns
7 wide and "-" for a value the GPU does not give), its CSV, and JSON Lines. nvidia-smi ends each line
with a blank; gpudiag's lines carry no padding at their ends (the house rule for output into a pipe or a
file), which is the only difference.

Laid out as the captured H100's `nvidia-smi dmon` (docs/hardware/h100-80gb-hbm3-driver580/
nvidia-smi-dmon.txt): ``# gpu    pwr  gtemp ...`` / ``# Idx      W      C ...`` / ``    0     71     34 ...``.
With ``-o DT`` the date and time lead, as nvidia-smi prints them (``#Date        Time         gpu``).
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec

from gpudiag.model import Reading
from gpudiag.monitor import Column
from gpudiag.serialize import to_data

SCHEMA = "gpudiag.dmon/1"
WIDTH = 7  # each column of values
MISSING = "-"


class Layout(msgspec.Struct, frozen=True):
    date: bool = False  # -o D
    time: bool = False  # -o T
    csv: bool = False  # --format csv
    header: bool = True  # --format noheader leaves the names out
    units: bool = True  # --format nounit leaves the units out


def _stamp(at: float, date: bool, clock: bool) -> list[str]:
    moment = time.localtime(at)
    return [time.strftime(fmt, moment) for fmt, on in (("%Y%m%d", date), ("%H:%M:%S", clock)) if on]


def text(value: Reading[Any]) -> str:
    """A value as dmon prints it: a whole number (watts and shares cut to their integer), "-" when missing."""
    v = value.value
    if v is None:
        return MISSING
    return str(int(v))


def _lead(first: bool, value: str, left: bool) -> str:
    """A leading cell: the first is marked "#" on header lines (" " on data), the others 4 blanks apart."""
    cell = f"{value:<8}" if left else f"{value:>4}"
    return ("" if first else "    ") + cell


def header_lines(columns: tuple[Column, ...], layout: Layout, names: tuple[str, str] = ("gpu", "Idx")) -> list[str]:
    """dmon's header lines (names, then units), as ``layout`` asks for them."""
    lines = []
    for shown, lead, stamps, cells in (
        (layout.header, names[0], ("Date", "Time"), [c.name for c in columns]),
        (layout.units, names[1], ("YYYYMMDD", "HH:MM:SS"), [c.unit for c in columns]),
    ):
        if not shown:
            continue
        stamp_cells = [s for s, on in zip(stamps, (layout.date, layout.time), strict=True) if on]
        if layout.csv:
            lines.append("#" + ", ".join([*stamp_cells, lead, *cells]))
            continue
        parts = [_lead(n == 0, s, left=True) for n, s in enumerate(stamp_cells)]
        parts.append(_lead(not stamp_cells, lead, left=False))
        parts += [f"{cell:>{WIDTH}}" for cell in cells]
        lines.append(("#" + "".join(parts)).rstrip())
    return lines


def line(index: int, values: tuple[Reading[Any], ...], at: float, layout: Layout) -> str:
    """One GPU's line of one sample."""
    stamps = _stamp(at, layout.date, layout.time)
    cells = [text(v) for v in values]
    if layout.csv:
        return ", ".join([*stamps, str(index), *cells])
    parts = [_lead(n == 0, s, left=True) for n, s in enumerate(stamps)]
    parts.append(_lead(not stamps, str(index), left=False))
    parts += [f"{cell:>{WIDTH}}" for cell in cells]
    return (" " + "".join(parts)).rstrip()


def json_line(
    sample: int, at: float, columns: tuple[Column, ...], gpus: list[tuple[int, str, tuple[Reading[Any], ...]]]
) -> str:
    """One sample as one JSON line: each GPU's values by their keys (a missing one says why)."""
    entries = []
    for index, state, values in gpus:
        entry: dict[str, Any] = {"index": index, "state": state}
        entry.update({c.key: to_data(v) for c, v in zip(columns, values, strict=True)})
        entries.append(entry)
    document = {"schema": SCHEMA, "sample": sample, "time": round(at, 3), "gpus": entries}
    return json.dumps(document, separators=(",", ":"))
