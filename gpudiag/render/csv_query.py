"""nvidia-smi's ``--query-gpu=… --format=csv`` written, for users whose scripts speak it.

The columns come parsed from the query package (:mod:`gpudiag.query.parse`: each name, its unit and
what answers it); here each cell is read and written as nvidia-smi writes it: the format a name
gives resolved (``render.format.VALUE_FORMATS``), N/A where nvidia-smi prints none of an answer NVML
gave (``render.format.QUERY_NA_RULES``), outside text neutralised (``csv_field``). Checked field by
field against the real H100's output in ``docs/hardware/h100-80gb-hbm3-driver580/``.
"""

from __future__ import annotations

from typing import Any

from gpudiag.model import Gpu, Machine, Reading
from gpudiag.query.gpu_fields import Answer, Field, part_of
from gpudiag.query.parse import Column, CsvFormat
from gpudiag.readings import reading_at
from gpudiag.render.format import QUERY_NA_RULES, VALUE_FORMATS, as_nvidia_smi_shows
from gpudiag.render.printable import csv_field


def reading(machine: Machine, gpu: Gpu, answer: Answer) -> Reading[Any]:
    """What answers a field on this GPU: a derived reading, or the part of a reading nvidia-smi shows."""
    if answer.derive is not None:
        return answer.derive(machine, gpu)
    return part_of(as_nvidia_smi_shows(answer.key, reading_at(gpu, answer.key), QUERY_NA_RULES), answer.part)


def shown(machine: Machine, gpu: Gpu, field: Field, units: bool = True) -> tuple[str, bool]:
    """One cell as nvidia-smi prints it, and whether it is text from outside: a value NVML gives
    as words (a name, a serial, a version), not a number or a state that gpudiag writes."""
    if field.answer is None:
        return field.missing, False
    found = reading(machine, gpu, field.answer)
    if found.value is None:
        return field.missing, False
    text = VALUE_FORMATS[field.answer.format](found.value)
    return f"{text} {field.unit}" if units and field.unit else text, type(found.value) is str


def value(machine: Machine, gpu: Gpu, field: Field, units: bool = True) -> str:
    """One cell as nvidia-smi prints it."""
    return shown(machine, gpu, field, units)[0]


def render_csv(machine: Machine, gpus: tuple[Gpu, ...], columns: list[Column], fmt: CsvFormat) -> str:
    """Rows joined with ", ", as nvidia-smi writes them; the header keeps units even with nounits.
    A text cell that a spreadsheet would run as a formula is neutralised (``csv_field``)."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{c.typed} [{c.field.unit}]" if c.field.unit else c.typed for c in columns))
    for gpu in gpus:
        lines.append(", ".join(csv_field(*shown(machine, gpu, c.field, fmt.units)) for c in columns))
    return "".join(line + "\n" for line in lines)


QUERY_SCHEMA = "gpudiag.query/1"


def typed(text: str) -> Any:
    """A cell written without its unit, as JSON: a whole number or a decimal as a number, "[N/A]" as
    null, anything else as the text nvidia-smi writes."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return None if text in ("[N/A]", "N/A") else text


def document(option: str, headers: list[tuple[str, str]], cells: list[list[str]]) -> dict[str, Any]:
    """A query's rows as JSON (schema gpudiag.query/1): each row an object keyed by the names asked
    for, values as nvidia-smi writes them without units (numbers as numbers, N/A as null), the
    units apart."""
    return {
        "schema": QUERY_SCHEMA,
        "query": option,
        "units": {name: unit for name, unit in headers if unit},
        "rows": [{name: typed(cell) for (name, _), cell in zip(headers, row, strict=True)} for row in cells],
    }


def cells(machine: Machine, gpus: tuple[Gpu, ...], columns: list[Column], units: bool = False) -> list[list[str]]:
    """Each GPU's row as nvidia-smi writes it."""
    return [[value(machine, gpu, c.field, units) for c in columns] for gpu in gpus]
