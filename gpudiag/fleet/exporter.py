"""`gpudiag exporter`: a long-running Prometheus exporter per node, NVML only (never torch).

One scrape is one consistent sample: the collector reads every GPU once through an NVML
session whose handles are fetched at start, builds the memory view, judges the NVML-only
health checks and attributes processes, then yields every family from that one reading.
Scrapes are serialised. NVML going away under the exporter (a driver reload, a GPU reset)
is noticed by one cheap call per scrape and answered by opening NVML again, at most once
per ``REOPEN_EVERY_S``; a lost GPU stays a ``gpudiag_gpu_lost`` sample, and a PID that exited
between NVML's answer and the lookup is simply a process without details.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from gpudiag.checks import CheckResult, Facts, Options
from gpudiag.fleet import metrics_dcgm, metrics_native
from gpudiag.fleet.attribution import (
    Allocation,
    Owner,
    ProcReader,
    device_key,
    index_allocations,
    mig_legacy_key,
    owner,
)
from gpudiag.fleet.exposition import CONTENT_TYPE, TextRenderer
from gpudiag.memory import MemoryView, ProcessRow
from gpudiag.model import FactGroup, GpuState, HostProcess, Machine, NvmlStatus, Reading, Reason
from gpudiag.probe.collect import MachineSource
from gpudiag.probe.nvml import HostResolver
from gpudiag.track import TrackedProcess

# The NVML facts each family exports (the rest are never asked for on a scrape).
GROUPS = {
    # Named one by one, so that a group added later (nvidia-smi -q details: ~130 calls per GPU) never
    # creeps into every scrape.
    "native": frozenset(
        {
            FactGroup.MEMORY,
            FactGroup.UTILIZATION,
            FactGroup.THERMAL,
            FactGroup.POWER,
            FactGroup.PERFORMANCE,
            FactGroup.CLOCK_EVENTS,
            FactGroup.PCIE,
            FactGroup.ECC,
            FactGroup.MEMORY_HEALTH,
            FactGroup.RECOVERY,
            FactGroup.MIG,
            FactGroup.PROCESSES,
            FactGroup.CLOCKS,
            FactGroup.ENERGY,
            FactGroup.PCIE_REPLAYS,
        }
    ),
    "dcgm": frozenset(
        {
            FactGroup.MEMORY,
            FactGroup.UTILIZATION,
            FactGroup.THERMAL,
            FactGroup.POWER,
            FactGroup.MEMORY_HEALTH,
            FactGroup.MIG,
            FactGroup.CLOCKS,
            FactGroup.ENERGY,
            FactGroup.PCIE_REPLAYS,
        }
    ),
}
REOPEN_EVERY_S = 10.0
COMPAT = tuple(GROUPS)


class Attributor:
    """Owners of GPU processes from the kubelet (if asked) and the processes' /proc files.

    A process's owner is worked out once and kept while the PID stays on that device and the
    kubelet's answer is unchanged, so a steady node pays nothing per scrape.
    """

    def __init__(self, proc: ProcReader | None, kubelet: Any | None) -> None:
        self.proc = proc
        self.kubelet = kubelet
        self._allocations: list[Allocation] | None = None
        self._index: dict[str, tuple[Allocation, ...]] = {}
        self._cache: dict[tuple[int, int, str], Owner] = {}

    def _refresh(self) -> None:
        if self.kubelet is None:
            return
        allocations = self.kubelet.allocations()
        if allocations is not self._allocations:
            self._allocations = allocations
            self._index = index_allocations(allocations)
            self._cache.clear()

    @staticmethod
    def _keys(row: ProcessRow, gpu_uuid: str) -> tuple[str, ...]:
        keys = []
        if row.mig is not None:
            keys.append(device_key(row.mig.uuid.get("")))
            keys.append(mig_legacy_key(gpu_uuid, row.process.gpu_instance_id, row.process.compute_instance_id))
        keys.append(device_key(gpu_uuid))
        return tuple(k for k in keys if k)

    def owners(self, view: MemoryView) -> dict[tuple[int, int], Owner]:
        self._refresh()
        uuids = {r.gpu.index: r.gpu.uuid.get("") for r in view.gpus}
        found: dict[tuple[int, int], Owner] = {}
        seen: set[tuple[int, int, str]] = set()
        for row in view.processes:
            keys = self._keys(row, uuids.get(row.gpu_index, ""))
            cache_key = (row.gpu_index, row.process.pid, keys[0] if keys else "")
            seen.add(cache_key)
            if cache_key not in self._cache:
                self._cache[cache_key] = owner(row.process.pid, keys, self._index, self.proc)
            found[row.key] = self._cache[cache_key]
        for stale in set(self._cache) - seen:  # exited processes: forget them (PIDs get reused)
            del self._cache[stale]
        return found

    def device_owners(self) -> dict[str, Owner] | None:
        """The one container holding each device, for DCGM's per-device labels; None without a kubelet."""
        if self.kubelet is None:
            return None
        self._refresh()
        return {
            key: Owner(holders[0].pod, holders[0].namespace, holders[0].container)
            for key, holders in self._index.items()
            if len(holders) == 1
        }


class CachedHost:
    """Resolves each PID once while NVML keeps listing it: a steady node pays the host lookup
    (psutil) only for new processes. PIDs no longer listed are forgotten, as PIDs get reused."""

    def __init__(self, resolve: HostResolver) -> None:
        self._resolve = resolve
        self._known: dict[int, HostProcess] = {}

    def __call__(self, pid: int) -> HostProcess:
        found = self._known.get(pid)
        if found is None:
            found = self._known[pid] = self._resolve(pid)
        return found

    def keep(self, pids: set[int]) -> None:
        for pid in set(self._known) - pids:
            del self._known[pid]


@dataclass(eq=False)  # hashed by identity: prometheus-client keeps collectors in a dict
class Exporter:
    """The prometheus-client collector: one sample of the node per scrape."""

    source: MachineSource
    compat: str = "native"
    hostname: str = field(default_factory=socket.gethostname)
    max_process_series: int = metrics_native.DEFAULT_MAX_PROCESS_SERIES
    tracked: Callable[[], dict[int, TrackedProcess]] = dict
    attributor: Attributor = field(default_factory=lambda: Attributor(None, None))
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_reopen: float | None = None
    _needs_rediscovery: bool = False
    _renderer: TextRenderer = field(default_factory=TextRenderer)
    _hosts: CachedHost | None = None

    def __post_init__(self) -> None:
        self.source.facts = GROUPS[self.compat]
        self._hosts = CachedHost(self.source.host)
        self.source.session.set_host(self._hosts)

    def _ensure_session(self) -> None:
        session = self.source.session
        if session.opened and session.still_valid() and not self._needs_rediscovery:
            return
        now = self.clock()
        if self._last_reopen is not None and now - self._last_reopen < REOPEN_EVERY_S:
            return
        self._last_reopen = now
        session.reopen()  # also when it never opened: the driver may have loaded since
        self._needs_rediscovery = False

    def sample(self) -> tuple[Machine, MemoryView]:
        """One reading of the node (under the lock)."""
        from gpudiag import memory

        self._ensure_session()
        machine = self.source.read()
        if self._hosts is not None:
            self._hosts.keep({p.pid for g in machine.gpus for p in g.processes.get(())})
        # A lost or unopened GPU may come back after a reset: look for it again, now and then.
        self._needs_rediscovery = any(g.state is not GpuState.OK for g in machine.gpus)
        return machine, memory.build(machine, self.tracked())

    def _checks(self, machine: Machine) -> list[CheckResult]:
        from gpudiag.checks import rules

        facts = Facts(
            machine=machine, torch=Reading.missing(Reason.UNAVAILABLE, "not asked by the exporter"), devices=None
        )
        return rules.run(facts, Options(), only=rules.EXPORTER_CHECKS)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            machine, view = self.sample()
            up = GaugeMetricFamily(
                "gpudiag_nvml_up",
                "1 when NVML answers; status says why not (/healthz has the sentence)",
                labels=["status"],
            )
            up.add_metric([machine.nvml.status.value], 1 if machine.nvml.status is NvmlStatus.OK else 0)
            yield up
            if self.compat == "dcgm":
                yield from metrics_dcgm.families(machine, self.hostname, self.attributor.device_owners())
            else:
                yield from metrics_native.families(
                    view,
                    checks=self._checks(machine) if machine.nvml.status is NvmlStatus.OK else None,
                    owners=self.attributor.owners(view),
                    max_process_series=self.max_process_series,
                )
            kubelet = self.attributor.kubelet
            if kubelet is not None:  # after the attribution above: says how this very sample went
                asked = GaugeMetricFamily(
                    "gpudiag_kubelet_up", "1 when the kubelet's pod-resources API answered the last time it was asked"
                )
                asked.add_metric([], 0 if getattr(kubelet, "last_error", "") else 1)
                yield asked

    def render_text(self) -> bytes:
        """One scrape in the text format (the fast path; see gpudiag.fleet.exposition)."""
        return self._renderer.render(self.collect())

    def health(self) -> tuple[bool, str]:
        """For /healthz: NVML answers (opening it again if it went away)."""
        with self._lock:
            self._ensure_session()
            info = self.source.session.info
            if not self.source.session.opened or info.status is not NvmlStatus.OK:
                return False, info.detail or "NVML is not initialised"
            return True, "ok"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the log."""


class _ThreadingServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._serve_one, args=(request, client_address), daemon=True)
        thread.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


def wsgi_app(exporter: Exporter) -> Callable[..., Any]:
    """/metrics (and /) from a private registry with only the exporter; /healthz; 404 elsewhere."""
    from prometheus_client import CollectorRegistry, make_wsgi_app

    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            ok, why = exporter.health()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"{why}\n".encode()]
        if path in ("/", "/metrics"):
            if "openmetrics" in environ.get("HTTP_ACCEPT", "") or environ.get("QUERY_STRING"):
                return metrics(environ, start_response)  # OpenMetrics or name[] filters: prometheus-client
            body = exporter.render_text()
            start_response("200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


class Server:
    """The exporter's HTTP server on its own thread."""

    def __init__(self, exporter: Exporter, bind: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        server_class = type("Server", (_ThreadingServer,), {"address_family": family})
        self._httpd = server_class((bind, port), _QuietHandler)
        self._httpd.set_app(wsgi_app(exporter))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="gpudiag-exporter", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_port)

    def shutdown(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
