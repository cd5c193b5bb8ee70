"""The memory watch's figures as Prometheus metrics (the exporter's native names), served by prometheus-client.

A custom collector builds the metric families from the latest sample when scraped, so a
scrape never sees half a sample, and processes or GPUs that went away simply disappear.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.export.exposition import FamilyErrors, printable_families
from gpudiag.memory.view import MemoryView


def families(view: MemoryView | None, peaks: dict[int, int], errors: FamilyErrors | None = None) -> list[Any]:
    """The metric families for one sample (empty before the first): the exporter's native family."""
    from gpudiag.export import metrics_native

    return metrics_native.families(view, peaks=peaks, errors=errors)


class MemoryMetrics:
    """Serves the latest sample on a private registry (no process/platform metrics)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self._sample: tuple[MemoryView | None, dict[int, int]] = (None, {})
        self.errors = FamilyErrors()
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self._server: Any = None
        self._thread: Any = None

    def collect(self) -> Iterator[Any]:
        """One consistent sample (swapped in whole by update()), written as the exporter writes it
        (label values printable; data can leave a family out, never fail the scrape), then the
        count of families left out."""
        view, peaks = self._sample
        yield from printable_families(families(view, peaks, self.errors), self.errors)
        yield self.errors.metric()

    @classmethod
    def serve(cls, port: int, bind: str) -> MemoryMetrics:
        from prometheus_client import start_http_server

        metrics = cls()
        try:
            metrics._server, metrics._thread = start_http_server(port, addr=bind, registry=metrics.registry)
        except (OSError, ValueError) as exc:  # port in use, address not local, bad address
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise GpudiagError(f"cannot serve metrics on {bind}:{port}: {detail}", ExitCode.USAGE) from None
        return metrics

    @property
    def port(self) -> int:
        return int(self._server.server_port) if self._server is not None else 0

    def update(self, view: MemoryView, peaks: dict[int, int] | None = None) -> None:
        self._sample = (view, dict(peaks or {}))

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
