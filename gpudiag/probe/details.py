"""Reads a GPU's detail facts (:mod:`gpudiag.details`) through an open NVML session.

Imported only by the commands that show details (`list --details`, `--query` of a detail
field, `snapshot`), so plain `gpudiag list` neither imports it nor makes these calls.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Protocol

from gpudiag.details import (
    DETAIL_READINGS,
    ECC_LOCATIONS,
    Affinity,
    EccLocation,
    GpuDetails,
    NvLink,
    PeerLink,
    ProcessLoad,
    SramErrors,
)
from gpudiag.model import Reading, Reason
from gpudiag.readings import (
    FI_NVLINK_GET_SPEED,
    FI_NVLINK_THROUGHPUT_DATA_RX,
    FI_NVLINK_THROUGHPUT_DATA_TX,
    FI_NVLINK_THROUGHPUT_RAW_RX,
    FI_NVLINK_THROUGHPUT_RAW_TX,
    NVLINK_REMOTE_TYPES,
    P2P_ATOMICS,
    P2P_NVLINK,
    P2P_PROP,
    P2P_READ,
    P2P_STATUS,
    P2P_WRITE,
    TOPOLOGY_LEVELS,
    Spec,
    fields_from,
    integer,
    text,
)

# Each link's throughput counters (field id, NvLink field), read in one call with its speed.
_THROUGHPUT = (
    (FI_NVLINK_THROUGHPUT_DATA_TX, "data_tx_kib"),
    (FI_NVLINK_THROUGHPUT_DATA_RX, "data_rx_kib"),
    (FI_NVLINK_THROUGHPUT_RAW_TX, "raw_tx_kib"),
    (FI_NVLINK_THROUGHPUT_RAW_RX, "raw_rx_kib"),
)

NVLINK_MAX_LINKS = 18  # H100; NVML answers INVALID_ARGUMENT / NOT_SUPPORTED beyond a GPU's links


class Session(Protocol):
    """What the details need of an NVML session (probe.nvml.NvmlSession): errors become reasons,
    a lost GPU ends the GPU's read."""

    @property
    def lib(self) -> Any: ...

    def read(self, function: str, *args: Any, convert: Callable[[Any], Any] | None = None) -> Reading[Any]: ...

    def decoded(self, function: str, raw: Any, convert: Callable[[Any], Any] | None = None) -> Reading[Any]: ...

    def read_specs(
        self, handles: Any, h: Any, specs: tuple[Spec, ...], custom: Callable[[str], dict[str, Any]]
    ) -> dict[str, Any]: ...

    def field_values(self, h: Any, ids: list[Any]) -> dict[Any, Reading[Any]]: ...


ProcessStats = Callable[[int], tuple[Reading[float], Reading[int], Reading[float]]]
"""pid -> (CPU %, resident memory in bytes, start time), from the host's process table."""


# The members of nvmlPciInfoExt_t that nvmlPciInfo_t (drivers before R550) lacks.
_CLASS_CODES = ("baseClass", "subClass")


def cpu_list(mask_words: Any) -> str:
    """NVML's CPU bitmask (64-bit words, lowest CPU first) as a list such as ``0-15,32-47``."""
    cpus = [
        word_index * 64 + bit for word_index, word in enumerate(mask_words) for bit in range(64) if int(word) >> bit & 1
    ]
    return ranges(cpus)


def ranges(numbers: list[int]) -> str:
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def _member(session: Session, function: str, struct: Reading[Any], name: str) -> Reading[int]:
    """One integer of an NVML struct; a struct without it (an older library's layout) says so."""
    if struct.value is None:
        return Reading.missing_like(struct)
    value = getattr(struct.value, name, None)
    if value is None:
        return Reading.missing(Reason.NOT_SUPPORTED, f"{name} is not in this NVML's answer")
    return session.decoded(function, value, int)


class DetailsProbe:
    """Reads :class:`GpuDetails` for the GPUs of one session; keeps process-utilization cursors.

    The simple readings are ``DETAIL_READINGS``' rows, read by the session; this class reads the
    composite ones (the PCI ids, ECC by location, SRAM errors, NVLinks, topology, process load).
    """

    def __init__(self, session: Session, process_stats: ProcessStats, cpu_count: int) -> None:
        self._session = session
        self._lib = session.lib
        self._read = session.read
        self._process_stats = process_stats
        self._cpu_words = max(1, (cpu_count + 63) // 64)
        self._last_seen: dict[int, int] = {}  # GPU index -> NVML timestamp of the last process sample

    def read(self, index: int, h: Any, peers: list[tuple[int, Any]], links: bool = True) -> GpuDetails:
        """The GPU's details; ``links`` (FactGroup.LINKS) adds its NVLinks and how it reaches ``peers``."""
        not_read: Reading[Any] = Reading.missing(Reason.NOT_READ)
        composite: dict[str, Callable[[], dict[str, Any]]] = {
            "details.identity.pci_domain": lambda: self._pci_ids(h),
            "details.memory_health.ecc_by_location": lambda: {"details.memory_health.ecc_by_location": self._ecc(h)},
            "details.memory_health.sram": lambda: {"details.memory_health.sram": self._sram(h)},
            "details.nvlinks": lambda: {"details.nvlinks": self._nvlinks(h) if links else not_read},
            "details.affinity": lambda: {
                "details.affinity": Reading.of(self._affinity(h, peers)) if links else not_read
            },
            "details.process_load": lambda: {"details.process_load": self._process_load(index, h)},
            "details.clocks.supported": lambda: {"details.clocks.supported": self._supported_clocks(h)},
        }
        values = self._session.read_specs(None, h, DETAIL_READINGS, lambda key: composite[key]())
        details: dict[str, Any] = fields_from(GpuDetails, {key[len("details.") :]: v for key, v in values.items()})
        return GpuDetails(**details)

    # -- the composite readings ------------------------------------------------------

    def _struct(self, function: str, h: Any, struct: Any) -> Reading[Any]:
        """A call that fills a versioned struct the caller passes (nvidia-ml-py's newer getters)."""
        return self._read(function, h, ctypes.byref(struct), convert=lambda _: struct)

    def _pci_ids(self, h: Any) -> dict[str, Reading[Any]]:
        """The PCI ids and class codes: one nvmlDeviceGetPciInfoExt; drivers before R550 have the ids
        (nvmlDeviceGetPciInfo) without the class codes."""
        lib = self._lib
        ext = lib.nvmlPciInfoExt_v1_t()
        ext.version = lib.nvmlPciInfoExt_v1
        pci = pci_ext = self._struct("nvmlDeviceGetPciInfoExt", h, ext)
        function = "nvmlDeviceGetPciInfoExt"
        if pci_ext.reason is Reason.FUNCTION_NOT_FOUND:
            pci, function = self._read("nvmlDeviceGetPciInfo", h), "nvmlDeviceGetPciInfo"
        return {
            spec.key: _member(self._session, function, pci_ext if spec.pick in _CLASS_CODES else pci, str(spec.pick))
            for spec in DETAIL_READINGS
            if spec.call == "nvmlDeviceGetPciInfoExt"
        }

    def _supported_clocks(self, h: Any) -> Reading[tuple[tuple[int, tuple[int, ...]], ...]]:
        """Each supported memory clock with the graphics clocks it allows (1 + one call per memory clock)."""
        memory: Reading[Any] = self._read(
            "nvmlDeviceGetSupportedMemoryClocks", h, convert=lambda clocks: [int(c) for c in clocks]
        )
        if memory.value is None:
            return Reading.missing_like(memory)
        pairs = []
        for clock in memory.value:
            graphics: Reading[Any] = self._read(
                "nvmlDeviceGetSupportedGraphicsClocks", h, clock, convert=lambda clocks: tuple(int(g) for g in clocks)
            )
            if graphics.value is None:
                return Reading.missing_like(graphics)
            pairs.append((clock, graphics.value))
        return Reading.of(tuple(pairs))

    def _ecc(self, h: Any) -> tuple[EccLocation, ...]:
        lib = self._lib
        corrected, uncorrected = lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        volatile, aggregate = lib.NVML_VOLATILE_ECC, lib.NVML_AGGREGATE_ECC

        def count(error_type: int, counter: int, location: int) -> Reading[int]:
            return self._read("nvmlDeviceGetMemoryErrorCounter", h, error_type, counter, location, convert=int)

        return tuple(
            EccLocation(
                location=name,
                volatile_corrected=count(corrected, volatile, code),
                volatile_uncorrected=count(uncorrected, volatile, code),
                aggregate_corrected=count(corrected, aggregate, code),
                aggregate_uncorrected=count(uncorrected, aggregate, code),
            )
            for name, code in ECC_LOCATIONS
        )

    def _sram(self, h: Any) -> Reading[SramErrors]:
        function = "nvmlDeviceGetSramEccErrorStatus"
        status = self._struct(function, h, self._lib.c_nvmlEccSramErrorStatus_v1_t())
        if status.value is None:
            return Reading.missing_like(status)
        return self._session.decoded(
            function,
            status.value,
            lambda e: SramErrors(
                volatile_corrected=int(e.volatileCor),
                volatile_uncorrected_parity=int(e.volatileUncParity),
                volatile_uncorrected_secded=int(e.volatileUncSecDed),
                aggregate_corrected=int(e.aggregateCor),
                aggregate_uncorrected_parity=int(e.aggregateUncParity),
                aggregate_uncorrected_secded=int(e.aggregateUncSecDed),
                aggregate_l2=int(e.aggregateUncBucketL2),
                aggregate_sm=int(e.aggregateUncBucketSm),
                aggregate_mcu=int(e.aggregateUncBucketMcu),
                aggregate_pcie=int(e.aggregateUncBucketPcie),
                aggregate_other=int(e.aggregateUncBucketOther),
                threshold_exceeded=bool(e.bThresholdExceeded),
            ),
        )

    def _nvlinks(self, h: Any) -> Reading[tuple[NvLink, ...]]:
        lib = self._lib
        states: list[Reading[bool]] = []
        for link in range(NVLINK_MAX_LINKS):
            state = self._read(
                "nvmlDeviceGetNvLinkState", h, link, convert=lambda s: integer(s) == lib.NVML_FEATURE_ENABLED
            )
            if state.value is None:
                if link == 0 and state.reason is not None:
                    no_link = state.reason is Reason.NOT_SUPPORTED and not state.detail
                    return Reading.missing(state.reason, "this GPU has no NVLink" if no_link else state.detail)
                break  # past the GPU's last link
            states.append(state)
        ids = [
            (fid, link) for link in range(len(states)) for fid in (FI_NVLINK_GET_SPEED, *(f for f, _ in _THROUGHPUT))
        ]
        speeds = self._session.field_values(h, ids)  # one call for every link's speed and counters

        def read(function: str, link: int, *args: Any, convert: Callable[[Any], Any]) -> Reading[Any]:
            return self._read(function, h, link, *args, convert=convert)

        links = []
        for link, state in enumerate(states):
            links.append(
                NvLink(
                    link=link,
                    active=state,
                    version=read("nvmlDeviceGetNvLinkVersion", link, convert=int),
                    speed_mbps=self._as_int(speeds[(FI_NVLINK_GET_SPEED, link)], f"field {FI_NVLINK_GET_SPEED}"),
                    remote_pci_bus_id=read("nvmlDeviceGetNvLinkRemotePciInfo", link, convert=lambda p: text(p.busId)),
                    remote_type=read(
                        "nvmlDeviceGetNvLinkRemoteDeviceType",
                        link,
                        convert=lambda t: NVLINK_REMOTE_TYPES.get(int(t), "unknown"),
                    ),
                    replay_errors=read(
                        "nvmlDeviceGetNvLinkErrorCounter", link, lib.NVML_NVLINK_ERROR_DL_REPLAY, convert=int
                    ),
                    recovery_errors=read(
                        "nvmlDeviceGetNvLinkErrorCounter", link, lib.NVML_NVLINK_ERROR_DL_RECOVERY, convert=int
                    ),
                    crc_flit_errors=read(
                        "nvmlDeviceGetNvLinkErrorCounter", link, lib.NVML_NVLINK_ERROR_DL_CRC_FLIT, convert=int
                    ),
                    crc_data_errors=read(
                        "nvmlDeviceGetNvLinkErrorCounter", link, lib.NVML_NVLINK_ERROR_DL_CRC_DATA, convert=int
                    ),
                    **{name: self._as_int(speeds[(fid, link)], f"field {fid}") for fid, name in _THROUGHPUT},
                )
            )
        return Reading.of(tuple(links))

    def _as_int(self, reading: Reading[Any], what: str) -> Reading[int]:
        return reading if reading.value is None else self._session.decoded(what, reading.value, int)

    def nvlinks(self, h: Any) -> Reading[tuple[NvLink, ...]]:
        """Each NVLink of the GPU: state, version, speed, far end, error and throughput counters
        (`gpudiag nvlink`, `topo -m`'s NV#)."""
        return self._nvlinks(h)

    def affinity(self, h: Any, peers: list[tuple[int, Any]]) -> Affinity:
        """CPU and NUMA affinity, and how the GPU reaches each of ``peers`` (`gpudiag topo`); NV#
        counts come from :func:`with_nvlink_counts`, which sees every GPU's links."""
        return self._affinity(h, peers)

    def _affinity(self, h: Any, peers: list[tuple[int, Any]]) -> Affinity:
        lib = self._lib
        links = []

        def p2p(oh: Any, index: int) -> Reading[str]:
            return self._read("nvmlDeviceGetP2PStatus", h, oh, index, convert=lambda s: P2P_STATUS.get(int(s), str(s)))

        for other, oh in peers:
            links.append(
                PeerLink(
                    gpu=other,
                    common_ancestor=self._read(
                        "nvmlDeviceGetTopologyCommonAncestor",
                        h,
                        oh,
                        convert=lambda lv: TOPOLOGY_LEVELS.get(int(lv), "?"),
                    ),
                    nvlinks=0,  # filled in by the session, which sees every GPU's links
                    p2p_read=p2p(oh, P2P_READ),
                    p2p_nvlink=p2p(oh, P2P_NVLINK),
                    p2p_write=p2p(oh, P2P_WRITE),
                    p2p_atomics=p2p(oh, P2P_ATOMICS),
                    p2p_prop=p2p(oh, P2P_PROP),
                )
            )
        return Affinity(
            cpus=self._read("nvmlDeviceGetCpuAffinity", h, self._cpu_words, convert=cpu_list),
            numa_nodes=self._read(
                "nvmlDeviceGetMemoryAffinity", h, self._cpu_words, lib.NVML_AFFINITY_SCOPE_NODE, convert=cpu_list
            ),
            peers=tuple(links),
        )

    def process_load(self, index: int, h: Any) -> Reading[tuple[ProcessLoad, ...]]:
        """Each process's share of the GPU since the last call for this GPU (`gpudiag pmon`)."""
        return self._process_load(index, h)

    def _process_load(self, index: int, h: Any) -> Reading[tuple[ProcessLoad, ...]]:
        # NVML returns samples newer than the timestamp given: the first read takes all it keeps.
        since = self._last_seen.get(index, 0)
        samples: Reading[Any] = self._read("nvmlDeviceGetProcessUtilization", h, since, convert=_newest_samples)
        if samples.value is None:
            if samples.reason is Reason.NOT_FOUND:
                return Reading.missing(Reason.NOT_FOUND, "no process ran on the GPU since the last sample")
            return Reading.missing_like(samples)
        latest: dict[int, tuple[int, int, int, int, int]] = samples.value
        if latest:
            self._last_seen[index] = max(sample[4] for sample in latest.values())
        loads = []
        for pid, (sm, memory, encoder, decoder, stamp) in sorted(latest.items()):
            cpu, rss, started = self._process_stats(pid)
            loads.append(
                ProcessLoad(
                    pid=pid,
                    sm_percent=sm,
                    memory_percent=memory,
                    encoder_percent=encoder,
                    decoder_percent=decoder,
                    sampled_at_us=stamp,
                    cpu_percent=cpu,
                    rss_bytes=rss,
                    started_at=started,
                )
            )
        return Reading.of(tuple(loads))


def _newest_samples(samples: Any) -> dict[int, tuple[int, int, int, int, int]]:
    """Each process's newest sample (NVML keeps several per process): pid -> (SM, memory, encoder,
    decoder %, timestamp µs)."""
    latest: dict[int, tuple[int, int, int, int, int]] = {}
    for s in samples:
        sample = (int(s.smUtil), int(s.memUtil), int(s.encUtil), int(s.decUtil), int(s.timeStamp))
        pid = int(s.pid)
        if pid not in latest or sample[4] > latest[pid][4]:
            latest[pid] = sample
    return latest


def with_nvlink_counts(details: list[GpuDetails | None], bus_ids: list[str | None]) -> list[GpuDetails | None]:
    """Fill each peer's NVLink count, as `nvidia-smi topo -m` shows NV#: the active links whose far
    end is that peer, or, when the two reach each other over NVLink through NVSwitches, every
    active link to a switch."""
    from msgspec.structs import replace

    by_bus = {bus.lower(): i for i, bus in enumerate(bus_ids) if bus}
    out: list[GpuDetails | None] = []
    for d in details:
        if d is None or d.nvlinks.value is None or d.affinity.value is None:
            out.append(d)
            continue
        out.append(
            replace(d, affinity=Reading.of(affinity_with_nvlink_counts(d.affinity.value, d.nvlinks.value, by_bus)))
        )
    return out


def affinity_with_nvlink_counts(affinity: Affinity, nvlinks: tuple[NvLink, ...], by_bus: dict[str, int]) -> Affinity:
    """One GPU's peers with their NV# counts (:func:`with_nvlink_counts`); ``by_bus``: each GPU's
    position by its bus id, lower case."""
    from msgspec.structs import replace

    counts: dict[int, int] = {}
    switched = 0
    for link in nvlinks:
        if not link.active.get(False):
            continue
        if link.remote_type.value == "switch":
            switched += 1
            continue
        remote = link.remote_pci_bus_id.value
        if remote is not None and remote.lower() in by_bus:
            counts[by_bus[remote.lower()]] = counts.get(by_bus[remote.lower()], 0) + 1
    peers = tuple(
        replace(p, nvlinks=counts.get(p.gpu, 0) + (switched if p.p2p_nvlink.value == "OK" else 0))
        for p in affinity.peers
    )
    return replace(affinity, peers=peers)


class PsutilProcessStats:
    """CPU %, RSS and start time of host processes, as nvitop shows them.

    CPU % is measured between two reads of the same process: on the first read it is the
    average since the process started (psutil's first cpu_percent() has no interval).
    """

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._procs: dict[int, Any] = {}

    def __call__(self, pid: int) -> tuple[Reading[float], Reading[int], Reading[float]]:
        psutil = self._psutil
        try:
            proc = self._procs.get(pid)
            first = proc is None
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
            with proc.oneshot():
                started = float(proc.create_time())
                rss = int(proc.memory_info().rss)
                if first:
                    times = proc.cpu_times()
                    proc.cpu_percent(None)  # start the interval for the next read
                    cpu = 100.0 * (times.user + times.system) / max(time.time() - started, 1e-3)
                else:
                    cpu = float(proc.cpu_percent(None))
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            gone: Reading[Any] = Reading.missing(Reason.NOT_FOUND, "process exited")
            return gone, gone, gone
        except psutil.AccessDenied:
            denied: Reading[Any] = Reading.missing(Reason.NO_PERMISSION, "the host hides this process")
            return denied, denied, denied
        return Reading.of(round(cpu, 1)), Reading.of(rss), Reading.of(started)
