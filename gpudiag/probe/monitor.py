"""A monitor's reads through one open source: per interval, per GPU, only the readings its columns
need (`gpudiag dmon`, `pmon`, `stat`), each by its spec row, handles fetched once per session."""

from __future__ import annotations

import functools
from typing import Any

from gpudiag.model import Reading
from gpudiag.probe.collect import MachineSource
from gpudiag.readings import GPU_READINGS, Spec

PROCESS_LOAD = "details.process_load"


@functools.cache
def rows_for(keys: tuple[str, ...]) -> tuple[Spec, ...]:
    """The spec rows of these reading keys, each once (kept: the session plans a tuple of rows once)."""
    from gpudiag.details import DETAIL_READINGS

    by_key = {row.key: row for row in (*GPU_READINGS, *DETAIL_READINGS)}
    return tuple(by_key[key] for key in dict.fromkeys(keys))


class RowReader:
    """Reads ``keys`` of each GPU of an open source, sample after sample."""

    def __init__(self, source: MachineSource, keys: tuple[str, ...]) -> None:
        self._session = source.session
        self.rows = rows_for(keys)
        self._composite: dict[str, Any] = {}
        if PROCESS_LOAD in keys:
            from gpudiag.probe.details import DetailsProbe
            from gpudiag.probe.nvml_processes import no_process_stats

            loads = DetailsProbe(self._session, no_process_stats, self._session.cpu_count)
            self._composite[PROCESS_LOAD] = loads.process_load

    def read(self, position: int) -> dict[str, Reading[Any]] | None:
        """The readings of the GPU at ``position`` (in the source's order); None when it is lost."""
        return self._session.read_rows(position, self.rows, self._composite)
