"""nvidia-smi's list queries, one row per item rather than per GPU, as CSV or JSON.

``--query-compute-apps`` (a row per compute process), ``--query-retired-pages`` (per retired
page), ``--query-remapped-rows`` (per GPU) and ``--query-supported-clocks`` (per memory and
graphics clock pair): each is a :class:`ListQuery`, its fields in nvidia-smi's names and order
(``nvidia-smi --help-query-*``), its rows a GPU's items. The five GPU fields they share come
first. Values are written as nvidia-smi writes them, ``[N/A]`` where a reading is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from gpudiag.model import FactGroup, Gpu, GpuState, Machine, ProcessKind, Reading, Reason
from gpudiag.readings import reading_at
from gpudiag.render.csv_query import CsvFormat, recorded_at, timestamp
from gpudiag.render.format import VALUE_FORMATS
from gpudiag.render.printable import csv_field

Formatter = Callable[[Any], str]


class ListField(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str
    read: Callable[[Machine, Gpu, Any], Reading[Any]]  # of one row's item
    show: Formatter = str
    group: FactGroup | None = None  # what the source must read for it


class ListQuery(msgspec.Struct, frozen=True):
    option: str
    fields: tuple[ListField, ...]
    items: Callable[[Gpu], Iterable[Any]]  # a GPU's rows
    facts: frozenset[FactGroup]  # what every row needs read
    example: str  # fields to suggest in a usage error

    def by_name(self) -> dict[str, ListField]:
        return {n.lower(): f for f in self.fields for n in (f.name, *f.aliases)}


def _serial(m: Machine, g: Gpu, item: Any) -> Reading[Any]:
    return reading_at(g, "details.identity.serial")


# The GPU's own fields, first in every list query.
GPU_FIELDS: tuple[ListField, ...] = (
    ListField("timestamp", (), "", lambda m, g, item: recorded_at(m), timestamp),
    ListField("gpu_name", (), "", lambda m, g, item: g.name),
    ListField("gpu_bus_id", (), "", lambda m, g, item: g.pci_bus_id),
    ListField("gpu_serial", (), "", _serial, group=FactGroup.DETAILS),
    ListField("gpu_uuid", (), "", lambda m, g, item: g.uuid),
)


def _compute_processes(g: Gpu) -> Iterable[Any]:
    """Compute processes only: nvidia-smi leaves graphics-only ones out."""
    return [p for p in g.processes.get(()) if p.kind is not ProcessKind.GRAPHICS]


# A retired page as a row: (cause in nvidia-smi's words, its address).
_CAUSES = (("Single Bit ECC", "retired_single_bit_addresses"), ("Double Bit ECC", "retired_double_bit_addresses"))


def _retired_pages(g: Gpu) -> Iterable[tuple[str, int]]:
    for cause, key in _CAUSES:
        for address in reading_at(g, f"details.memory_health.{key}").get(()):
            yield cause, address


def _supported_clocks(g: Gpu) -> Iterable[tuple[int, int]]:
    for memory, graphics in reading_at(g, "details.clocks.supported").get(()):
        for clock in graphics:
            yield memory, clock


def _remapped(part: str) -> Callable[[Machine, Gpu, Any], Reading[Any]]:
    return lambda m, g, item: g.remapped_rows.map(lambda r: getattr(r, part))


def _not_read(what: str) -> Callable[[Machine, Gpu, Any], Reading[Any]]:
    return lambda m, g, item: Reading.missing(Reason.NOT_READ, what)


_NUMBER: Formatter = lambda v: str(int(v))  # noqa: E731 - pending/failure as nvidia-smi's 0 / 1 here

LISTS: dict[str, ListQuery] = {
    "--query-compute-apps": ListQuery(
        "--query-compute-apps",
        (
            *GPU_FIELDS,
            ListField("pid", (), "", lambda m, g, p: Reading.of(p.pid)),
            ListField("process_name", ("name",), "", lambda m, g, p: p.host.name),
            ListField(
                "used_gpu_memory", ("used_memory",), "MiB", lambda m, g, p: p.used_memory_bytes, VALUE_FORMATS["mib"]
            ),
        ),
        _compute_processes,
        frozenset({FactGroup.PROCESSES}),
        "pid,process_name,used_memory",
    ),
    "--query-retired-pages": ListQuery(
        "--query-retired-pages",
        (
            *GPU_FIELDS,
            ListField(
                "retired_pages.address", ("addr",), "", lambda m, g, page: Reading.of(page[1]), VALUE_FORMATS["hex16"]
            ),
            # nvmlDeviceGetRetiredPages_v2's timestamps are not read: the model keeps the addresses.
            ListField("retired_pages.timestamp", (), "", _not_read("retired pages' timestamps are not read")),
            ListField("retired_pages.cause", ("cause",), "", lambda m, g, page: Reading.of(page[0])),
        ),
        _retired_pages,
        frozenset({FactGroup.DETAILS, FactGroup.MEMORY_HEALTH}),
        "gpu_uuid,retired_pages.address,retired_pages.cause",
    ),
    "--query-remapped-rows": ListQuery(
        "--query-remapped-rows",
        (
            *GPU_FIELDS,
            ListField("remapped_rows.correctable", ("remapped_rows.sbe",), "", _remapped("correctable")),
            ListField("remapped_rows.uncorrectable", ("remapped_rows.dbe",), "", _remapped("uncorrectable")),
            ListField("remapped_rows.pending", (), "", _remapped("pending"), _NUMBER),
            ListField("remapped_rows.failure", (), "", _remapped("failure"), _NUMBER),
        ),
        lambda g: (None,),
        frozenset({FactGroup.MEMORY_HEALTH}),
        "gpu_bus_id,remapped_rows.pending,remapped_rows.failure",
    ),
    "--query-supported-clocks": ListQuery(
        "--query-supported-clocks",
        (
            *GPU_FIELDS,
            ListField("memory", ("mem",), "MHz", lambda m, g, pair: Reading.of(pair[0])),
            ListField("graphics", ("gr",), "MHz", lambda m, g, pair: Reading.of(pair[1])),
        ),
        _supported_clocks,
        frozenset({FactGroup.DETAILS}),
        "memory,graphics",
    ),
}


def facts(query: ListQuery, columns: list[tuple[str, ListField]]) -> frozenset[FactGroup]:
    """The fact groups a list query reads for these columns."""
    return query.facts | {f.group for _, f in columns if f.group is not None}


def _cell(machine: Machine, gpu: Gpu, item: Any, f: ListField, units: bool) -> tuple[str, bool]:
    """A cell as nvidia-smi writes it, and whether it is text from outside (a process or GPU name, a
    serial: words NVML or the host gave, not a number gpudiag wrote)."""
    reading = f.read(machine, gpu, item)
    if reading.value is None:
        return "[N/A]", False
    text = f.show(reading.value)
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
