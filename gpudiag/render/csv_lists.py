"""nvidia-smi's list queries written, one row per item rather than per GPU, as CSV or JSON's cells.

The query and its columns come parsed from the query package (:mod:`gpudiag.query.list_fields`,
:mod:`gpudiag.query.parse`); here each row's cells are read and written as nvidia-smi writes them,
``[N/A]`` where a reading is missing, the format a field names resolved
(``render.format.VALUE_FORMATS``).
"""

from __future__ import annotations

from typing import Any

from gpudiag.model import Gpu, GpuState, Machine
from gpudiag.query.list_fields import ListField, ListQuery
from gpudiag.query.parse import CsvFormat
from gpudiag.render.format import VALUE_FORMATS
from gpudiag.render.printable import csv_field


def _cell(machine: Machine, gpu: Gpu, item: Any, f: ListField, units: bool) -> tuple[str, bool]:
    """A cell as nvidia-smi writes it, and whether it is text from outside (a process or GPU name, a
    serial: words NVML or the host gave, not a number gpudiag wrote)."""
    reading = f.read(machine, gpu, item)
    if reading.value is None:
        return "[N/A]", False
    text = VALUE_FORMATS[f.format](reading.value)
    return f"{text} {f.unit}" if units and f.unit else text, type(reading.value) is str


def _cells(
    query: ListQuery, machine: Machine, gpus: tuple[Gpu, ...], columns: list[tuple[str, ListField]], units: bool
) -> list[list[tuple[str, bool]]]:
    return [
        [_cell(machine, gpu, item, f, units) for _, f in columns]
        for gpu in gpus
        if gpu.state is GpuState.OK
        for item in query.items(gpu)
    ]


def rows(
    query: ListQuery, machine: Machine, gpus: tuple[Gpu, ...], columns: list[tuple[str, ListField]], units: bool
) -> list[list[str]]:
    """Each row's cells as nvidia-smi writes them."""
    return [[cell for cell, _ in row] for row in _cells(query, machine, gpus, columns, units)]


def render_csv(
    query: ListQuery, machine: Machine, gpus: tuple[Gpu, ...], columns: list[tuple[str, ListField]], fmt: CsvFormat
) -> str:
    """Rows joined with ", ", as nvidia-smi writes them; the header keeps units even with nounits."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{typed} [{f.unit}]" if f.unit else typed for typed, f in columns))
    # A text cell that a spreadsheet would run as a formula is neutralised (csv_field).
    lines += [", ".join(csv_field(*cell) for cell in row) for row in _cells(query, machine, gpus, columns, fmt.units)]
    return "".join(line + "\n" for line in lines)
