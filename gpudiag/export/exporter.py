"""`gpudiag exporter`: a long-running Prometheus exporter per node, NVML only (never torch).

One scrape is one consistent sample: the collector reads every GPU once through an NVML
session whose handles are fetched at start, builds the memory view, judges the NVML-only
health checks and attributes processes, then yields every family from that one reading.
Scrapes are serialised. NVML going away under the exporter (a driver reload, a GPU reset)
is noticed by one cheap call per scrape and answered by opening NVML again, at most once
per ``REOPEN_EVERY_S``; a lost GPU stays a ``gpudiag_gpu_lost`` sample (with the identity it
last had), and a PID that exited between NVML's answer and the lookup is simply a process
without details.

HTTP: ``/metrics`` in the text format 0.0.4 (gzip when asked), OpenMetrics from prometheus-client
only for a native-family client that does not take text; ``/healthz`` says whether NVML answers;
``/livez`` fails only while a scrape hangs (a kubelet liveness probe then restarts the exporter);
``/readyz`` answers whenever the exporter does, as a broken GPU is news to scrape, not a reason
to stop being a target.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from gpudiag.checks import CheckResult, Facts, Options
from gpudiag.checks.base import groups
from gpudiag.checks.rules import BY_ID, EXPORTER_CHECKS
from gpudiag.export import metrics_dcgm, metrics_native
from gpudiag.export.attribution import (
    Allocation,
    Owner,
    ProcReader,
    gpu_keys,
    index_allocations,
    mig_keys,
    owner,
)
from gpudiag.export.exposition import CONTENT_TYPE, FamilyErrors, TextRenderer, printable_families
from gpudiag.export.gpu_families import GPU_FAMILIES
from gpudiag.export.xid import XidTally, description
from gpudiag.memory.view import GROUPS as MEMORY_GROUPS
from gpudiag.memory.view import MemoryView
from gpudiag.model import Gpu, GpuState, HostProcess, Machine, NvmlStatus, Reading, Reason
from gpudiag.probe.collect import MachineSource
from gpudiag.probe.nvml_processes import HostResolver
from gpudiag.readings import groups_of
from gpudiag.render.printable import printable
from gpudiag.track.entries import TrackedProcess

# The NVML facts each family exports (the rest are never asked for on a scrape): the groups of the
# readings of its table (export.gpu_families, metrics_dcgm.READS); native also the memory view's and
# those of the checks it judges (each cheap, held by test_the_exporter_judges_only_cheap_nvml_checks),
# so a group added later (nvidia-smi -q details: ~130 calls per GPU) never creeps into every scrape.
GROUPS = {
    "native": groups_of(s.key for f in GPU_FAMILIES for s in f.samples)
    | MEMORY_GROUPS
    | groups([BY_ID[check] for check in EXPORTER_CHECKS]),
    "dcgm": groups_of(metrics_dcgm.READS),
}
# The rows each family reads, where it exports fewer than its groups hold (None: all of them).
# dcgm-exporter's fields leave out the fan, the power limit and the graphics clock (three calls a GPU
# per scrape) and the temperature thresholds. Identity labels every DCGM series (modelName, pci_bus_id,
# device).
ONLY: dict[str, frozenset[str] | None] = {
    "native": None,
    "dcgm": frozenset(metrics_dcgm.READS) | {"uuid", "pci_bus_id", "name", "minor_number"},
}
# Readings asked as field values in the one nvmlDeviceGetFieldValues call each GPU's scrape makes
# anyway, rather than by a call each (4 a GPU): the ECC totals, NVML_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL,
# which nvml.h defines as the totals nvmlDeviceGetTotalEccErrors answers (dcgm-exporter's
# DCGM_FI_DEV_ECC_* fields are these ids). A field a board does not support is that reading's N/A alone.
AS_FIELDS = (
    ("ecc_errors.volatile_corrected", 3),
    ("ecc_errors.volatile_uncorrected", 4),
    ("ecc_errors.aggregate_corrected", 5),
    ("ecc_errors.aggregate_uncorrected", 6),
)
REOPEN_EVERY_S = 10.0
# GPM's figures (DCGM_FI_PROF_*) are for the window since an earlier scrape at least this long ago
# (probe.gpm): scrapes from two Prometheus servers a moment apart still get a window of their own.
PROFILING_WINDOW_S = 1.0
# Rows that change seldom (a mode set for the next reset, a retired page, a remapped row, a licence)
# and cost a driver round trip each (~0.3 ms of CPU on the H200: replay/call_costs.py): read once a
# minute, and afresh after any Xid (a page retirement or a row remap comes with one: 48, 63, 64, 94, 95).
SLOW_KEYS = frozenset(
    {
        "ecc_mode_current",
        "ecc_mode_pending",
        "mig_mode_current",
        "mig_mode_pending",
        "retired_pages",
        "remapped_rows",
        "vgpu_license_status",
    }
)
SLOW_EVERY_S = 60.0
# Read once per NVML session besides the rows declared fixed: a GPU's UUID never changes, and a GPU
# lost since the last scrape fails the scrape's next call (its memory) as it would the UUID's.
FIXED_KEYS = frozenset({"uuid"})
HUNG_AFTER_S = 60.0  # a scrape running this long is stuck (an NVML call that never returns): /livez fails
# zlib's fastest level: the 8-GPU, 64-process text (53 kB) to 4.6 kB in 0.45 ms, where level 6 takes
# 1.6 ms for 4.2 kB and 9 (prometheus-client's) 3.2 ms (2-core x86_64, shared).
GZIP_LEVEL = 1
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

    def owners(self, view: MemoryView) -> dict[tuple[int, int], Owner]:
        self._refresh()
        gpus = {r.gpu.index: (r.gpu, gpu_keys(r.gpu)) for r in view.gpus}  # each GPU's keys worked out once
        found: dict[tuple[int, int], Owner] = {}
        seen: set[tuple[int, int, str]] = set()
        for row in view.processes:
            known = gpus.get(row.gpu_index)
            keys: tuple[str, ...] = ()
            if known is not None:
                gpu, whole = known
                # the MIG device's own allocation first, then its GPU's
                keys = (
                    (*mig_keys(gpu, row.mig, row.process.compute_instance_id), *whole) if row.mig is not None else whole
                )
            cache_key = (row.gpu_index, row.process.pid, keys[0] if keys else "")
            seen.add(cache_key)
            if cache_key not in self._cache:
                self._cache[cache_key] = owner(row.process.pid, keys, self._index, self.proc)
            found[row.key] = self._cache[cache_key]
        for stale in set(self._cache) - seen:  # exited processes: forget them (PIDs get reused)
            del self._cache[stale]
        return found

    def device_owners(self, machine: Machine) -> dict[str, Owner] | None:
        """The one container holding each GPU and MIG device (by UUID, lower case), for DCGM's
        per-device labels; None without a kubelet."""
        if self.kubelet is None:
            return None
        self._refresh()
        out: dict[str, Owner] = {}

        def holder(uuid: str, keys: tuple[str, ...]) -> None:
            for key in keys:
                if holders := self._index.get(key):
                    if len(holders) == 1:
                        out[uuid.lower()] = Owner(holders[0].pod, holders[0].namespace, holders[0].container)
                    return

        for gpu in machine.gpus:
            if uuid := gpu.uuid.get(""):
                holder(uuid, gpu_keys(gpu))
            for mig in gpu.mig_devices:
                if mig_uuid := mig.uuid.get(""):
                    holder(mig_uuid, mig_keys(gpu, mig))
        return out


class RuleError(Exception):
    """A check's rule raised, or could not judge a GPU whose reading came back as an error: no sample."""


class CheckChanges:
    """Says once, in a log line, when a check's verdict or finding changes (the first scrape: what
    warns or fails); ``gpudiag_check_reason_info`` has the same text for the latest scrape."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._last: dict[tuple[str, str], tuple[str, str]] | None = None

    def __call__(self, results: list[CheckResult]) -> None:
        now = {(r.id, r.target): (r.status.value, r.finding) for r in results if r.status.value != "SKIP"}
        last = self._last
        for (check, target), (status, finding) in now.items():
            before = None if last is None else last.get((check, target))
            if before != (status, finding) and (before is not None or status != "PASS"):
                where = f" {target}" if target else ""
                self._say(f"gpudiag: check {check}{where}: {status}: {printable(finding)}")
        self._last = now


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
    log: Callable[[str], None] | None = None  # where check changes are said (the exporter's stderr)
    errors: FamilyErrors = field(default_factory=FamilyErrors)  # families data left out: counted, said
    _renderer: TextRenderer = field(default_factory=TextRenderer)
    _hosts: CachedHost | None = None
    _known: dict[int, Gpu] = field(default_factory=dict)  # each GPU as last seen working, by index
    _busy_since: float | None = None
    _changes: CheckChanges | None = None
    # One scrape and done (`--once`): GPM waits for its window then, instead of measuring since a scrape.
    once: bool = False
    xids: XidTally = field(default_factory=XidTally)
    _xid_watch: Any = None  # probe.xid_watch.XidWatch of the open NVML session; None: not made yet
    _last_counts: dict[tuple[str, str], tuple[int, float]] = field(
        default_factory=dict
    )  # (counter, UUID) -> (count, when)
    _said: set[str] = field(default_factory=set)  # what the log said once

    def __post_init__(self) -> None:
        self.source.facts = GROUPS[self.compat]
        self.source.only = ONLY[self.compat]
        self._hosts = CachedHost(self.source.host)
        session = self.source.session
        session.set_host(self._hosts)
        session.as_fields = AS_FIELDS
        if not self.once:  # GPM: since the previous scrape, never waiting (probe.gpm)
            session.gpm_window_s, session.gpm_wait = PROFILING_WINDOW_S, False
            session.gpm_clock, session.gpm_sleep = self.clock, None
            session.slow_keys, session.slow_every_s, session.slow_clock = SLOW_KEYS, SLOW_EVERY_S, self.clock
            session.fixed_keys = FIXED_KEYS
        if self.log is not None:
            self._changes = CheckChanges(self.log)
            self.errors = FamilyErrors(self.log)
        self._renderer = TextRenderer(self.errors)

    def _ensure_session(self) -> None:
        session = self.source.session
        if session.opened and session.still_valid() and not self._needs_rediscovery:
            return
        now = self.clock()
        if self._last_reopen is not None and now - self._last_reopen < REOPEN_EVERY_S:
            return
        self._last_reopen = now
        if self._xid_watch is not None:  # its event set belongs to the NVML session that ends now
            self._xid_watch.close()
            self._xid_watch = None
        session.reopen()  # also when it never opened: the driver may have loaded since
        self._needs_rediscovery = False

    def sample(self) -> tuple[Machine, MemoryView]:
        """One reading of the node (under the lock)."""
        from gpudiag.memory.build import build

        self._ensure_session()
        machine = self.source.read()
        self._take_xids(machine)
        self._say_once_what_is_not_there(machine)
        if self._hosts is not None:
            self._hosts.keep({p.pid for g in machine.gpus for p in g.processes.get(())})
        # A lost or unopened GPU may come back after a reset: look for it again, now and then.
        self._needs_rediscovery = any(g.state is not GpuState.OK for g in machine.gpus)
        if set(self._known) - {g.index for g in machine.gpus}:
            self._known.clear()  # NVML counts the GPUs differently now: indices may name other GPUs
        self._known.update((g.index, g) for g in machine.gpus if g.state is GpuState.OK)
        return machine, build(machine, self.tracked())

    def _take_xids(self, machine: Machine) -> None:
        """The Xid events NVML reported since the last scrape (watching from the first; never waiting)."""
        session = self.source.session
        if not session.opened or self.once:
            return
        uuids = {g.index: g.uuid.value for g in machine.gpus if g.uuid.value is not None}
        if self._xid_watch is None:
            self._xid_watch = session.watch_xids()
            self.xids.watch(uuids[i] for i in self._xid_watch.watched if i in uuids)
            if self._xid_watch.missing:
                self._say("xids", f"gpudiag: Xid errors not watched on {', '.join(self._xid_watch.missing)}")
        counted = self.xids.add(self._xid_watch.poll(), uuids)
        if counted:
            session.forget_slow()
        for uuid, xid in counted:
            index = next(i for i, u in uuids.items() if u == uuid)
            self._say(f"xid:{uuid}:{xid}", f"gpudiag: GPU {index}: Xid {xid} ({description(xid)})", once=False)

    def _say_once_what_is_not_there(self, machine: Machine) -> None:
        """A GPU without GPM gets no profiling figures (rather than zeros): said once, in the log."""
        for g in machine.gpus:
            why = g.profiling.reason
            if why in (Reason.NOT_SUPPORTED, Reason.FUNCTION_NOT_FOUND, Reason.NO_PERMISSION):
                detail = g.profiling.detail or why.label
                self._say(
                    f"gpm:{g.uuid.get(g.index)}",
                    f"gpudiag: GPU {g.index} ({g.name.get('?')}): no profiling metrics (DCGM_FI_PROF_*): {detail}",
                )

    def _say(self, key: str, line: str, once: bool = True) -> None:
        if self.log is None or (once and key in self._said):
            return
        self._said.add(key)
        self.log(printable(line))  # findings quote GPU names and other outside text

    def per_second(self, machine: Machine) -> dict[str, dict[str, float]]:
        """The increase per second of the counters DCGM's rate fields are made of (metrics_dcgm.RATES),
        by counter, then GPU UUID, since the previous scrape; none on a GPU's first scrape or after a
        counter went back (the driver reloaded, or NVML's PCIe byte counter wrapped)."""
        now = self.clock()
        out: dict[str, dict[str, float]] = {}
        for g in machine.gpus:
            uuid = g.uuid.value
            if uuid is None:
                continue
            rx, tx = g.nvlink_data_rx_kib.value, g.nvlink_data_tx_kib.value
            counts = {
                "nvlink_data_kib": None if rx is None or tx is None else rx + tx,
                "pcie_data_tx_bytes": g.pcie_data_tx_bytes.value,
                "pcie_data_rx_bytes": g.pcie_data_rx_bytes.value,
            }
            for counter, count in counts.items():
                if count is None:
                    continue
                before = self._last_counts.get((counter, uuid))
                self._last_counts[(counter, uuid)] = (count, now)
                if before is not None and count >= before[0] and now > before[1]:
                    out.setdefault(counter, {})[uuid] = (count - before[0]) / (now - before[1])
        return out

    def _checks(self, machine: Machine) -> list[CheckResult]:
        from gpudiag.checks import rules

        facts = Facts(
            machine=machine, torch=Reading.missing(Reason.UNAVAILABLE, "not asked by the exporter"), devices=None
        )
        failed: list[str] = []
        results = rules.run(facts, Options(), only=rules.EXPORTER_CHECKS, failed=failed)
        for line in failed:  # a rule that raised has no status series: counted and said, never a silent gap
            head, _, error = line.removeprefix("check ").partition(": ")  # "ID: why" or "ID GPU 0: why"
            check, _, target = head.partition(" ")
            self.errors.add(
                f'gpudiag_check_status{{check="{check}"}}', RuleError(f"{target}: {error}" if target else error)
            )
        if self._changes is not None:
            self._changes(results)
        return results

    def hung_for(self) -> float:
        """How long the scrape in progress has been running (0 when none is)."""
        since = self._busy_since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    def collect(self) -> Iterator[Any]:
        with self._lock:
            self._busy_since = self.clock()
            try:
                yield from self._families()
            finally:
                self._busy_since = None

    def _families(self) -> Iterator[Any]:
        """The families of one sample (under the lock held by collect()), then the count of those
        left out (data can leave a family out of a scrape, never fail the scrape: FamilyErrors)."""
        try:
            yield from self._sampled_families()
        except Exception as error:  # not one family: the node could not be read into one sample
            self.errors.add("of the node (no sample)", error)
        yield self.errors.metric()

    def _sampled_families(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        machine, view = self.sample()
        up = GaugeMetricFamily(
            "gpudiag_nvml_up",
            "1 when NVML answers; status says why not (/healthz has the sentence)",
            labels=["status"],
        )
        up.add_metric([machine.nvml.status.value], 1 if machine.nvml.status is NvmlStatus.OK else 0)
        yield up
        xids = None if self.once else self.xids
        if self.compat == "dcgm":
            owners = self._guarded("pod labels (of DCGM_FI_*)", lambda: self.attributor.device_owners(machine), None)
            yield from self.errors.built(
                "DCGM_FI_* (dcgm)",
                lambda: list(
                    metrics_dcgm.families(machine, self.hostname, owners, self._known, xids, self.per_second(machine))
                ),
            )
        else:
            checks = None
            if machine.nvml.status is NvmlStatus.OK:
                checks = self._guarded("gpudiag_check_*", lambda: self._checks(machine), None)
            yield from metrics_native.families(
                view,
                checks=checks,
                owners=self._guarded(
                    "pod and job labels (of gpudiag_process_*)", lambda: self.attributor.owners(view), {}
                ),
                max_process_series=self.max_process_series,
                known=self._known,
                xids=xids,
                errors=self.errors,
            )
        kubelet = self.attributor.kubelet
        if kubelet is not None:  # after the attribution above: says how this very sample went
            asked = GaugeMetricFamily(
                "gpudiag_kubelet_up",
                "1 when the kubelet's pod-resources API answered the last time it was asked "
                "(0: no pod, namespace or container labels from it until it answers again)",
            )
            asked.add_metric([], 0 if getattr(kubelet, "last_error", "") else 1)
            yield asked

    def _guarded(self, what: str, make: Callable[[], Any], default: Any) -> Any:
        """``make()``, or ``default`` when outside data makes it raise (counted and said)."""
        try:
            return make()
        except Exception as error:
            self.errors.add(what, error)
            return default

    def render_text(self, names: frozenset[str] | None = None) -> bytes:
        """One scrape in the text format (the fast path; see gpudiag.export.exposition), all of it
        or the families ``names`` names (a scrape's ``name[]`` parameters)."""
        return self._renderer.render(self.collect(), names)

    def health(self) -> tuple[bool, str]:
        """For /healthz: NVML answers (opening it again if it went away)."""
        with self._lock:
            self._ensure_session()
            info = self.source.session.info
            if not self.source.session.opened or info.status is not NvmlStatus.OK:
                return False, info.detail or "NVML is not initialised"
            return True, "ok"


class Printable:
    """The exporter's families as prometheus-client renders them (OpenMetrics): label values and
    HELP written as the text format's renderer writes them, a family that cannot be written left out."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter

    def collect(self) -> Iterator[Any]:
        return printable_families(self.exporter.collect(), self.exporter.errors)


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


def wants_openmetrics(accept: str) -> bool:
    """Whether a client asks for OpenMetrics and does not take the text format. Prometheus lists
    both (OpenMetrics first): it gets the text format, which the fast renderer writes."""
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",")}
    return "application/openmetrics-text" in types and not types & {"text/plain", "text/*", "*/*"}


def wsgi_app(exporter: Exporter) -> Callable[..., Any]:
    """/metrics (and /); /healthz, /livez, /readyz; 404 elsewhere."""
    from urllib.parse import parse_qs

    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.exposition import gzip_accepted

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Printable(exporter))
    openmetrics = make_wsgi_app(registry)  # the native family only: DCGM's counters need the text format

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            ok, why = exporter.health()
            return _plain(start_response, ok, why)
        if path == "/livez":
            hung = exporter.hung_for()
            if hung > HUNG_AFTER_S:
                return _plain(start_response, False, f"a scrape has been running for {hung:.0f} s (NVML hung?)")
            return _plain(start_response, True, "ok")
        if path == "/readyz":
            return _plain(start_response, True, "ok")
        if path in ("/", "/metrics"):
            if exporter.compat == "native" and wants_openmetrics(environ.get("HTTP_ACCEPT", "")):
                return openmetrics(environ, start_response)  # prometheus-client: also name[] and gzip
            wanted = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
            body = exporter.render_text(frozenset(wanted) if wanted else None)
            headers = [("Content-Type", CONTENT_TYPE)]
            if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
                body = gzip.compress(body, compresslevel=GZIP_LEVEL)
                headers.append(("Content-Encoding", "gzip"))
            headers.append(("Content-Length", str(len(body))))
            start_response("200 OK", headers)
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics, /healthz, /livez or /readyz\n"]

    return app


def _plain(start_response: Callable[..., Any], ok: bool, text: str) -> list[bytes]:
    start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
    return [f"{text}\n".encode()]


class Server:
    """The exporter's HTTP server on its own thread.

    ``poll_interval``: how often the serving thread looks for :meth:`shutdown` (socketserver's
    default), so the longest a shutdown waits.
    """

    def __init__(self, exporter: Exporter, bind: str, port: int, poll_interval: float = 0.5) -> None:
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        server_class = type("Server", (_ThreadingServer,), {"address_family": family})
        self._httpd = server_class((bind, port), _QuietHandler)
        self._httpd.set_app(wsgi_app(exporter))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(poll_interval,), name="gpudiag-exporter", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_port)

    def shutdown(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
