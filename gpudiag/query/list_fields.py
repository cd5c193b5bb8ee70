"""nvidia-smi's list queries' vocabulary: one row per item rather than per GPU.

``--query-compute-apps`` (a row per compute process), ``--query-retired-pages`` (per retired
page), ``--query-remapped-rows`` (per GPU) and ``--query-supported-clocks`` (per memory and
graphics clock pair): each is a :class:`ListQuery`, its fields in nvidia-smi's names and order
(``nvidia-smi --help-query-*``), each with its aliases, unit, what it reads of a row's item and the
name of its format; its rows a GPU's items. The five GPU fields they share come first. The CSV
renderer (``render.csv_lists``) writes the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from gpudiag.model import FactGroup, Gpu, Machine, ProcessKind, Reading, Reason
from gpudiag.query.gpu_fields import recorded_at
from gpudiag.readings import reading_at


class ListField(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str
    read: Callable[[Machine, Gpu, Any], Reading[Any]]  # of one row's item
    format: str = ""  # the name of how its value is written (render.format.VALUE_FORMATS)
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
    ListField("timestamp", (), "", lambda m, g, item: recorded_at(m), "timestamp"),
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


LISTS: dict[str, ListQuery] = {
    "--query-compute-apps": ListQuery(
        "--query-compute-apps",
        (
            *GPU_FIELDS,
            ListField("pid", (), "", lambda m, g, p: Reading.of(p.pid)),
            ListField("process_name", ("name",), "", lambda m, g, p: p.host.name),
            ListField("used_gpu_memory", ("used_memory",), "MiB", lambda m, g, p: p.used_memory_bytes, "mib"),
        ),
        _compute_processes,
        frozenset({FactGroup.PROCESSES}),
        "pid,process_name,used_memory",
    ),
    "--query-retired-pages": ListQuery(
        "--query-retired-pages",
        (
            *GPU_FIELDS,
            ListField("retired_pages.address", ("addr",), "", lambda m, g, page: Reading.of(page[1]), "hex16"),
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
            ListField("remapped_rows.pending", (), "", _remapped("pending"), "int"),  # nvidia-smi's 0 / 1 here
            ListField("remapped_rows.failure", (), "", _remapped("failure"), "int"),
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


def facts_of(query: ListQuery, columns: list[tuple[str, ListField]]) -> frozenset[FactGroup]:
    """The fact groups a list query reads for these columns."""
    return query.facts | {f.group for _, f in columns if f.group is not None}
