"""The memory figures as Prometheus metrics, served by prometheus-client."""

from __future__ import annotations

from typing import Any

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.memory import MemoryView


class MemoryMetrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.registry = CollectorRegistry()
        gpu_labels = ["gpu", "uuid", "name"]
        self.used = Gauge(
            "gpudiag_gpu_memory_used_bytes", "GPU memory in use (NVML)", gpu_labels, registry=self.registry
        )
        self.total = Gauge("gpudiag_gpu_memory_total_bytes", "GPU memory size", gpu_labels, registry=self.registry)
        self.free = Gauge("gpudiag_gpu_memory_free_bytes", "GPU memory free", gpu_labels, registry=self.registry)
        self.util = Gauge("gpudiag_gpu_utilization_percent", "GPU utilization", gpu_labels, registry=self.registry)
        proc_labels = ["gpu", "pid", "user"]
        self.proc = Gauge(
            "gpudiag_process_memory_used_bytes", "GPU memory used by a process", proc_labels, registry=self.registry
        )
        self.torch_alloc = Gauge(
            "gpudiag_process_torch_allocated_bytes",
            "PyTorch allocated (tracked processes)",
            proc_labels,
            registry=self.registry,
        )
        self.torch_reserved = Gauge(
            "gpudiag_process_torch_cached_free_bytes",
            "PyTorch cached but unused (tracked processes)",
            proc_labels,
            registry=self.registry,
        )
        self._server: Any = None
        self._thread: Any = None

    @classmethod
    def serve(cls, port: int, bind: str) -> MemoryMetrics:
        from prometheus_client import start_http_server

        metrics = cls()
        try:
            metrics._server, metrics._thread = start_http_server(port, addr=bind, registry=metrics.registry)
        except OSError as exc:
            raise GpudiagError(
                f"cannot serve metrics on {bind}:{port}: {exc.strerror or exc}", ExitCode.USAGE
            ) from None
        return metrics

    def update(self, view: MemoryView) -> None:
        for gauge in (self.used, self.total, self.free, self.util, self.proc, self.torch_alloc, self.torch_reserved):
            gauge.clear()  # processes and lost GPUs must disappear, not linger at their last value
        for row in view.gpus:
            g = row.gpu
            labels = (str(g.index), g.uuid.get(""), g.name.get(""))
            mem = g.memory.value
            if mem is not None:
                self.used.labels(*labels).set(mem.used_bytes)
                self.total.labels(*labels).set(mem.total_bytes)
                self.free.labels(*labels).set(mem.free_bytes)
            if g.utilization.value is not None:
                self.util.labels(*labels).set(g.utilization.value.gpu_percent)
        for p in view.processes:
            labels = (str(p.gpu_index), str(p.process.pid), p.process.host.user.get(""))
            if p.process.used_memory_bytes.value is not None:
                self.proc.labels(*labels).set(p.process.used_memory_bytes.value)
            if p.breakdown is not None:
                self.torch_alloc.labels(*labels).set(p.breakdown.allocated_bytes)
                self.torch_reserved.labels(*labels).set(p.breakdown.cached_free_bytes)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
