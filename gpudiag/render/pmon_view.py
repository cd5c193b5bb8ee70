"""`gpudiag pmon`: nvidia-smi pmon's lines (two header lines, one line per process per GPU per sample,
"-" where a process had no sample in the interval, one "-" line for a GPU nothing ran on), its CSV, and
JSON Lines; without the blanks nvidia-smi pads its lines' ends with (as `dmon`). Laid out as the
captured H100's `nvidia-smi pmon` (docs/hardware/h100-80gb-hbm3-driver580/nvidia-smi-pmon-busy.txt)."""

from __future__ import annotations

import json
import time
from typing import Any

from gpudiag.monitor import ProcessColumn, ProcessRow
from gpudiag.render.dmon_view import MISSING, WIDTH, Layout, _lead, text
from gpudiag.render.printable import csv_field, printable
from gpudiag.serialize import to_data

SCHEMA = "gpudiag.pmon/1"
NAME_WIDTH = 15  # nvidia-smi cuts a command's name to 15 characters (Linux's own limit for it)


def header_lines(columns: tuple[ProcessColumn, ...], layout: Layout) -> list[str]:
    lines = []
    for shown, lead, stamps, pid, kind, cells, name in (
        (layout.header, "gpu", ("Date", "Time"), "pid", "type", [c.name for c in columns], "command"),
        (layout.units, "Idx", ("YYYYMMDD", "HH:MM:SS"), "#", "C/G", [c.unit for c in columns], "name"),
    ):
        if not shown:
            continue
        stamp_cells = [s for s, on in zip(stamps, (layout.date, layout.time), strict=True) if on]
        if layout.csv:
            lines.append("#" + ", ".join([*stamp_cells, lead, pid, kind, *cells, name]))
            continue
        parts = [_lead(n == 0, s, left=True) for n, s in enumerate(stamp_cells)]
        parts.append(_lead(not stamp_cells, lead, left=False))
        parts += [f"{pid:>12}", f"{kind:>7}", *(f"{cell:>{WIDTH}}" for cell in cells), f"    {name}"]
        lines.append(("#" + "".join(parts)).rstrip())
    return lines


def _name(row: ProcessRow) -> str:
    name = row.name.value
    return MISSING if not name else printable(name[:NAME_WIDTH])


def line(row: ProcessRow, at: float, layout: Layout) -> str:
    moment = time.localtime(at)
    stamps = [time.strftime(f, moment) for f, on in (("%Y%m%d", layout.date), ("%H:%M:%S", layout.time)) if on]
    pid = MISSING if row.pid is None else str(row.pid)
    cells = [text(v) for v in row.values]
    if layout.csv:  # the name is outside text: quoted as RFC 4180 says, a formula neutralised
        name = row.name.value
        shown = csv_field(name[:NAME_WIDTH], text=True) if name else MISSING
        return ", ".join([*stamps, str(row.gpu), pid, row.kind, *cells, shown])
    parts = [_lead(n == 0, s, left=True) for n, s in enumerate(stamps)]
    parts.append(_lead(not stamps, str(row.gpu), left=False))
    parts += [
        f"{pid:>11}",
        f"{row.kind:>6}",
        *(f"{cell:>{WIDTH}}" for cell in cells),
        f"    {_name(row):<{NAME_WIDTH}}",
    ]
    return (" " + "".join(parts)).rstrip()


def json_line(
    sample: int, at: float, columns: tuple[ProcessColumn, ...], gpus: list[int], rows: list[ProcessRow]
) -> str:
    processes = []
    for row in rows:
        if row.pid is None:
            continue
        entry: dict[str, Any] = {"gpu": row.gpu, "pid": row.pid, "type": row.kind}
        entry.update({c.key: to_data(v) for c, v in zip(columns, row.values, strict=True)})
        entry["name"] = to_data(row.name)
        processes.append(entry)
    document = {"schema": SCHEMA, "sample": sample, "time": round(at, 3), "gpus": gpus, "processes": processes}
    return json.dumps(document, separators=(",", ":"))
