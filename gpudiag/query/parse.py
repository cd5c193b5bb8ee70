"""What `list --query*` and `--format` take, read: the user's names resolved to their columns.

The one place a ``--query*`` string is parsed: each name (any case, aliases too) is looked up once in
its vocabulary (:mod:`gpudiag.query.gpu_fields` for ``--query-gpu``, :mod:`gpudiag.query.list_fields`
for the lists of processes, retired pages, remapped rows and supported clocks) and becomes a column,
or the command ends with one usage error that names the closest field. :func:`parse` reads one
option whole: its columns, the CSV format, and what the source must read for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.errors import UsageError
from gpudiag.query.gpu_fields import Field, field, spelling, spellings

if TYPE_CHECKING:
    from gpudiag.model import FactGroup
    from gpudiag.query.list_fields import ListField, ListQuery

GPU_QUERY = "--query-gpu"


class CsvFormat(msgspec.Struct, frozen=True):
    header: bool = True
    units: bool = True


class Column(msgspec.Struct, frozen=True):
    typed: str  # the name as the user wrote it: the header shows it, as nvidia-smi does
    field: Field


class Parsed(msgspec.Struct, frozen=True):
    """One ``--query*`` option read: the columns asked for, how to write them, what the source reads."""

    option: str  # --query-gpu, or the list query's option: the JSON document names it
    format: CsvFormat
    columns: list[Any]  # --query-gpu: Column; a list query: (the name as typed, its ListField)
    facts: frozenset[FactGroup]
    rows: frozenset[str] | None  # of the facts' rows, the ones shown; None: all of them
    listed: ListQuery | None = None  # a list query: what its rows are


def parse(option: str, spec: str, output_format: str = "csv") -> Parsed:
    """``--query-gpu`` (or a list query's option) with what the user typed after it, and ``--format``."""
    fmt = parse_format(output_format)
    if option == GPU_QUERY:
        columns = parse_query(spec)
        return Parsed(option, fmt, columns, groups(columns), shown_rows(columns))
    from gpudiag.query.list_fields import LISTS, facts_of

    listed = parse_list_query(option, spec)
    return Parsed(option, fmt, listed, facts_of(LISTS[option], listed), None, LISTS[option])


def parse_format(spec: str) -> CsvFormat:
    """``csv``, ``csv,noheader``, ``csv,noheader,nounits`` as nvidia-smi takes them."""
    parts = [p.strip().lower() for p in spec.split(",") if p.strip()]
    if not parts or parts[0] != "csv":
        raise UsageError(f"--format {spec!r}: only csv is supported (csv[,noheader][,nounits])")
    unknown = set(parts[1:]) - {"noheader", "nounits"}
    if unknown:
        raise UsageError(f"--format: unknown option(s) {', '.join(sorted(unknown))} (noheader, nounits)")
    return CsvFormat(header="noheader" not in parts, units="nounits" not in parts)


def _typed(spec: str) -> list[str]:
    return [raw.strip() for raw in spec.split(",") if raw.strip()]


def parse_query(spec: str) -> list[Column]:
    """``--query-gpu`` names (any case, aliases too) as columns, in the order given."""
    columns = []
    for typed in _typed(spec):
        found = field(typed)
        if found is None:
            import difflib  # only for the hint

            close = difflib.get_close_matches(typed.lower(), spellings(), n=1)
            hint = f"; did you mean {spelling(close[0])!r}?" if close else ""
            raise UsageError(f"--query: unknown field {typed!r}{hint} (nvidia-smi --help-query-gpu lists them)")
        columns.append(Column(typed, found))
    if not columns:
        raise UsageError("--query needs at least one field, e.g. --query name,memory.used")
    return columns


def groups(columns: list[Column]) -> frozenset[FactGroup]:
    """The fact groups the source must read for these fields (nothing else is read)."""
    return frozenset(c.field.group for c in columns if c.field.group is not None)


def shown_rows(columns: list[Column]) -> frozenset[str]:
    """Of those groups' rows, the ones these fields show: a query asks NVML for nothing else (as
    dmon reads per column group): `temperature.gpu` reads the temperature, not the fan and the
    thresholds beside it in its group."""
    return frozenset(key for c in columns if c.field.answer is not None for key in c.field.answer.keys)


def parse_list_query(option: str, spec: str) -> list[tuple[str, ListField]]:
    """The fields of one of the list queries (``--query-compute-apps``, ``--query-retired-pages``,
    ``--query-remapped-rows``, ``--query-supported-clocks``), by name or alias in any case."""
    from gpudiag.query.list_fields import LISTS

    listed = LISTS[option]
    by_name = listed.by_name()
    columns: list[tuple[str, ListField]] = []
    for typed in _typed(spec):
        found = by_name.get(typed.lower())
        if found is None:
            import difflib

            close = difflib.get_close_matches(typed.lower(), by_name, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(f.name for f in listed.fields)
            raise UsageError(f"{option}: unknown field {typed!r}{hint} (known: {known})")
        columns.append((typed, found))
    if not columns:
        raise UsageError(f"{option} needs at least one field, e.g. {listed.example}")
    return columns
