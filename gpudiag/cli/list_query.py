"""What `list --query*` and `--format` take: nvidia-smi's field names and format options, read.

The command's input, so it lives beside the command: the vocabularies (which names exist, what
answers each) are the renderers' (:mod:`gpudiag.render.csv_query` for ``--query-gpu``,
:mod:`gpudiag.render.csv_lists` for the lists of processes, retired pages, remapped rows and
supported clocks); this module turns what a user typed into their columns, or one usage error
that names the closest field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudiag.errors import UsageError
from gpudiag.render.csv_query import Column, CsvFormat, field, spelling, spellings

if TYPE_CHECKING:
    from gpudiag.render.csv_lists import ListField


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


def parse_list_query(option: str, spec: str) -> list[tuple[str, ListField]]:
    """The fields of one of the list queries (``--query-compute-apps``, ``--query-retired-pages``,
    ``--query-remapped-rows``, ``--query-supported-clocks``), by name or alias in any case."""
    from gpudiag.render.csv_lists import LISTS

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
