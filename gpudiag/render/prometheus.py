"""The memory figures as Prometheus metrics, served by prometheus-client.

A custom collector builds the metric families from the latest sample when scraped, so a
scrape never sees half a sample, and processes or GPUs that went away simply disappear.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.memory import MemoryView
from gpudiag.model import GpuState

GPU_LABELS = ["gpu", "uuid", "name"]
PROCESS_LABELS = ["gpu", "pid", "user"]


def families(view: MemoryView | None, peaks: dict[int, int]) -> list[Any]:
    """The metric families for one sample (empty before the first)."""
    from prometheus_client.core import GaugeMetricFamily

    def family(name: str, doc: str, labels: list[str]) -> Any:
        return GaugeMetricFamily(name, doc, labels=labels)

    used = family("gpudiag_gpu_memory_used_bytes", "GPU memory in use (NVML)", GPU_LABELS)
    total = family("gpudiag_gpu_memory_total_bytes", "GPU memory size", GPU_LABELS)
    free = family("gpudiag_gpu_memory_free_bytes", "GPU memory free", GPU_LABELS)
    peak = family("gpudiag_gpu_memory_peak_used_bytes", "Most GPU memory in use since the watch began", ["gpu"])
    util = family("gpudiag_gpu_utilization_percent", "GPU utilization", GPU_LABELS)
    lost = family("gpudiag_gpu_lost", "1 when the GPU is lost (fallen off the bus)", ["gpu"])
    proc = family("gpudiag_process_memory_used_bytes", "GPU memory used by a process (NVML)", PROCESS_LABELS)
    alloc = family("gpudiag_process_torch_allocated_bytes", "PyTorch allocated (tracked processes)", PROCESS_LABELS)
    cached = family(
        "gpudiag_process_torch_cached_free_bytes", "PyTorch cached but unused (tracked processes)", PROCESS_LABELS
    )
    reserved = family(
        "gpudiag_process_torch_reserved_bytes", "PyTorch reserved by its caching allocator", PROCESS_LABELS
    )
    other = family(
        "gpudiag_process_other_bytes", "NVML's figure beyond PyTorch's reserved: context, libraries", PROCESS_LABELS
    )
    ooms = family("gpudiag_process_torch_ooms", "PyTorch out-of-memory errors so far", PROCESS_LABELS)
    retries = family(
        "gpudiag_process_torch_alloc_retries", "PyTorch allocation retries (cache flushes) so far", PROCESS_LABELS
    )
    out = [used, total, free, peak, util, lost, proc, alloc, cached, reserved, other, ooms, retries]
    if view is None:
        return out
    for row in view.gpus:
        g = row.gpu
        index = str(g.index)
        lost.add_metric([index], 1 if g.state is GpuState.LOST else 0)
        if g.index in peaks:
            peak.add_metric([index], peaks[g.index])
        labels = [index, g.uuid.get(""), g.name.get("")]
        mem = g.memory.value
        if mem is not None:
            used.add_metric(labels, mem.used_bytes)
            total.add_metric(labels, mem.total_bytes)
            free.add_metric(labels, mem.free_bytes)
        if g.utilization.value is not None:
            util.add_metric(labels, g.utilization.value.gpu_percent)
    for p in view.processes:
        labels = [str(p.gpu_index), str(p.process.pid), p.process.host.user.get("")]
        if p.process.used_memory_bytes.value is not None:
            proc.add_metric(labels, p.process.used_memory_bytes.value)
        b = p.breakdown
        if b is not None:
            alloc.add_metric(labels, b.allocated_bytes)
            cached.add_metric(labels, b.cached_free_bytes)
            reserved.add_metric(labels, b.reserved_bytes)
            if b.other_bytes is not None:
                other.add_metric(labels, b.other_bytes)
            ooms.add_metric(labels, b.ooms)
            retries.add_metric(labels, b.alloc_retries)
    return out


class MemoryMetrics:
    """Serves the latest sample on a private registry (no process/platform metrics)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self._sample: tuple[MemoryView | None, dict[int, int]] = (None, {})
        self.registry = CollectorRegistry()
        self.registry.register(self)
        self._server: Any = None
        self._thread: Any = None

    def collect(self) -> Iterator[Any]:
        yield from families(*self._sample)  # one consistent sample, swapped in whole by update()

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
