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
    ECC_LOCATIONS,
    Affinity,
    Bar1,
    Clocks,
    ClockSet,
    Codecs,
    EccLocation,
    GpuDetails,
    Identity,
    MemoryHealth,
    NvLink,
    PcieDetail,
    PeerLink,
    PowerDetail,
    ProcessLoad,
    RowRemapHistogram,
    SramErrors,
    Temperatures,
)
from gpudiag.model import Reading, Reason
from gpudiag.readings import (
    CLOCK_EVENTS,
    FI_MEMORY_TEMP,
    FI_NVLINK_GET_SPEED,
    FI_POWER_AVERAGE,
    FI_POWER_INSTANT,
    FI_REMAPPED_COR_INACTIVE,
    FI_REMAPPED_UNC_INACTIVE,
    NVLINK_REMOTE_TYPES,
    P2P_NVLINK,
    P2P_READ,
    P2P_STATUS,
    TOPOLOGY_LEVELS,
)

# Clock-event reason counters as field values, by their --query-gpu names.
EVENT_COUNTER_FIELDS = tuple((event.query, event.counter_field) for event in CLOCK_EVENTS if event.counter_field)
FI_TOTAL_ENERGY = 83
FI_PCIE_REPLAY_COUNTER = 94
NVLINK_MAX_LINKS = 18  # H100; NVML answers INVALID_ARGUMENT / NOT_SUPPORTED beyond a GPU's links

_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class Reader(Protocol):
    """The session's one-call reader: errors become reasons, a lost GPU ends the GPU's read."""

    def __call__(self, function: str, *args: Any, convert: Callable[[Any], Any] | None = None) -> Reading[Any]: ...


ProcessStats = Callable[[int], tuple[Reading[float], Reading[int], Reading[float]]]
"""pid -> (CPU %, resident memory in bytes, start time), from the host's process table."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _mw(value: Any) -> float:
    return round(int(value) / 1000.0, 3)


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


def _member(struct: Reading[Any], name: str) -> Reading[int]:
    """One integer of an NVML struct; a struct without it (an older library's layout) says so."""
    if struct.value is None:
        return Reading.missing_like(struct)
    value = getattr(struct.value, name, None)
    if value is None:
        return Reading.missing(Reason.NOT_SUPPORTED, f"{name} is not in this NVML's answer")
    return Reading.of(int(value))


class DetailsProbe:
    """Reads :class:`GpuDetails` for the GPUs of one session; keeps process-utilization cursors."""

    def __init__(self, lib: Any, read: Reader, process_stats: ProcessStats, cpu_count: int) -> None:
        self._lib = lib
        self._read = read
        self._process_stats = process_stats
        self._cpu_words = max(1, (cpu_count + 63) // 64)
        self._last_seen: dict[int, int] = {}  # GPU index -> NVML timestamp of the last process sample

    def read(self, index: int, h: Any, peers: list[tuple[int, Any]], links: bool = True) -> GpuDetails:
        """The GPU's details; ``links`` (FactGroup.LINKS) adds its NVLinks and how it reaches ``peers``."""
        fields = self._field_values(
            h,
            [FI_MEMORY_TEMP, FI_TOTAL_ENERGY, FI_PCIE_REPLAY_COUNTER, FI_POWER_AVERAGE, FI_POWER_INSTANT]
            + [fid for _, fid in EVENT_COUNTER_FIELDS]
            + [FI_REMAPPED_COR_INACTIVE, FI_REMAPPED_UNC_INACTIVE],
        )
        return GpuDetails(
            clocks=self._clocks(h, fields),
            power=self._power(h, fields),
            temperatures=self._temperatures(h, fields),
            identity=self._identity(h),
            memory_health=self._memory_health(h, fields),
            bar1=self._read(
                "nvmlDeviceGetBAR1MemoryInfo",
                h,
                convert=lambda b: Bar1(int(b.bar1Total), int(b.bar1Used), int(b.bar1Free)),
            ),
            pcie=PcieDetail(
                tx_kbps=self._read("nvmlDeviceGetPcieThroughput", h, self._lib.NVML_PCIE_UTIL_TX_BYTES, convert=int),
                rx_kbps=self._read("nvmlDeviceGetPcieThroughput", h, self._lib.NVML_PCIE_UTIL_RX_BYTES, convert=int),
                replay_counter=self._read("nvmlDeviceGetPcieReplayCounter", h, convert=int),
            ),
            codecs=self._codecs(h),
            nvlinks=self._nvlinks(h) if links else Reading.missing(Reason.NOT_READ),
            affinity=Reading.of(self._affinity(h, peers)) if links else Reading.missing(Reason.NOT_READ),
            process_load=self._process_load(index, h),
        )

    # -- field values ----------------------------------------------------------------

    def _field_values(self, h: Any, ids: list[Any]) -> dict[Any, Reading[Any]]:
        lib = self._lib
        raw: Reading[Any] = self._read("nvmlDeviceGetFieldValues", h, ids)
        if raw.value is None:
            return {fid: Reading.missing_like(raw) for fid in ids}
        out: dict[Any, Reading[Any]] = {}
        for fid, value in zip(ids, raw.value, strict=True):
            if int(value.nvmlReturn) == lib.NVML_SUCCESS:
                member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", 1)), "uiVal")
                out[fid] = Reading.of(getattr(value.value, member))
                continue
            code = int(value.nvmlReturn)
            reason = {
                lib.NVML_ERROR_NOT_SUPPORTED: Reason.NOT_SUPPORTED,
                lib.NVML_ERROR_NO_PERMISSION: Reason.NO_PERMISSION,
                lib.NVML_ERROR_NOT_FOUND: Reason.NOT_FOUND,
            }.get(code, Reason.UNKNOWN_ERROR)
            out[fid] = Reading.missing(
                reason, "" if reason is not Reason.UNKNOWN_ERROR else f"field {fid}: NVML error {code}"
            )
        return out

    # -- groups ----------------------------------------------------------------------

    def _clock_set(self, function: str, h: Any) -> ClockSet:
        lib = self._lib
        return ClockSet(
            graphics=self._read(function, h, lib.NVML_CLOCK_GRAPHICS, convert=int),
            sm=self._read(function, h, lib.NVML_CLOCK_SM, convert=int),
            memory=self._read(function, h, lib.NVML_CLOCK_MEM, convert=int),
            video=self._read(function, h, lib.NVML_CLOCK_VIDEO, convert=int),
        )

    def _clocks(self, h: Any, fields: dict[Any, Reading[Any]]) -> Clocks:
        supported = self._read("nvmlDeviceGetSupportedClocksEventReasons", h, convert=int)
        if supported.reason is Reason.FUNCTION_NOT_FOUND:  # drivers before R535
            supported = self._read("nvmlDeviceGetSupportedClocksThrottleReasons", h, convert=int)
        return Clocks(
            current=self._clock_set("nvmlDeviceGetClockInfo", h),
            max=self._clock_set("nvmlDeviceGetMaxClockInfo", h),
            applications=self._clock_set("nvmlDeviceGetApplicationsClock", h),
            default_applications=self._clock_set("nvmlDeviceGetDefaultApplicationsClock", h),
            event_reasons_supported=supported,
            # NVML counts nanoseconds; nvidia-smi shows microseconds.
            event_reason_counters_us=tuple(
                (name, fields[fid].map(lambda ns: int(ns) // 1000)) for name, fid in EVENT_COUNTER_FIELDS
            ),
        )

    def _power(self, h: Any, fields: dict[Any, Reading[Any]]) -> PowerDetail:
        constraints: Reading[Any] = self._read("nvmlDeviceGetPowerManagementLimitConstraints", h)
        return PowerDetail(
            management=self._read("nvmlDeviceGetPowerManagementMode", h, convert=bool),
            average_w=fields[FI_POWER_AVERAGE].map(_mw),
            instant_w=fields[FI_POWER_INSTANT].map(_mw),
            requested_limit_w=self._read("nvmlDeviceGetPowerManagementLimit", h, convert=_mw),
            default_limit_w=self._read("nvmlDeviceGetPowerManagementDefaultLimit", h, convert=_mw),
            min_limit_w=constraints.map(lambda c: _mw(c[0])),
            max_limit_w=constraints.map(lambda c: _mw(c[1])),
            energy_mj=self._read("nvmlDeviceGetTotalEnergyConsumption", h, convert=int),
        )

    def _temperatures(self, h: Any, fields: dict[Any, Reading[Any]]) -> Temperatures:
        lib = self._lib
        return Temperatures(
            memory_c=fields[FI_MEMORY_TEMP].map(int),
            margin_c=self._read("nvmlDeviceGetMarginTemperature", h, convert=int),
            gpu_max_c=self._read(
                "nvmlDeviceGetTemperatureThreshold", h, lib.NVML_TEMPERATURE_THRESHOLD_GPU_MAX, convert=int
            ),
            memory_max_c=self._read(
                "nvmlDeviceGetTemperatureThreshold", h, lib.NVML_TEMPERATURE_THRESHOLD_MEM_MAX, convert=int
            ),
        )

    def _struct(self, function: str, h: Any, struct: Any) -> Reading[Any]:
        """A call that fills a versioned struct the caller passes (nvidia-ml-py's newer getters)."""
        return self._read(function, h, ctypes.byref(struct), convert=lambda _: struct)

    def _identity(self, h: Any) -> Identity:
        lib = self._lib
        ext = lib.nvmlPciInfoExt_v1_t()
        ext.version = lib.nvmlPciInfoExt_v1
        pci = pci_ext = self._struct("nvmlDeviceGetPciInfoExt", h, ext)  # ids and class codes in one call
        if pci_ext.reason is Reason.FUNCTION_NOT_FOUND:  # drivers before R550: the ids without class codes
            pci = self._read("nvmlDeviceGetPciInfo", h)
        gsp: Reading[Any] = self._read("nvmlDeviceGetGspFirmwareMode", h)

        def inforom(obj: int) -> Reading[str]:
            return self._read("nvmlDeviceGetInforomVersion", h, obj, convert=_text)

        return Identity(
            serial=self._read("nvmlDeviceGetSerial", h, convert=_text),
            vbios_version=self._read("nvmlDeviceGetVbiosVersion", h, convert=_text),
            board_part_number=self._read("nvmlDeviceGetBoardPartNumber", h, convert=_text),
            board_id=self._read("nvmlDeviceGetBoardId", h, convert=int),
            module_id=self._read("nvmlDeviceGetModuleId", h, convert=int),
            pci_domain=_member(pci, "domain"),
            pci_bus=_member(pci, "bus"),
            pci_device=_member(pci, "device"),
            pci_device_id=_member(pci, "pciDeviceId"),
            pci_subsystem_id=_member(pci, "pciSubSystemId"),
            pci_base_class=_member(pci_ext, "baseClass"),
            pci_sub_class=_member(pci_ext, "subClass"),
            inforom_image=self._read("nvmlDeviceGetInforomImageVersion", h, convert=_text),
            inforom_oem=inforom(lib.NVML_INFOROM_OEM),
            inforom_ecc=inforom(lib.NVML_INFOROM_ECC),
            inforom_power=inforom(lib.NVML_INFOROM_POWER),
            inforom_checksum=self._read("nvmlDeviceGetInforomConfigurationChecksum", h, convert=int),
            gsp_firmware_version=self._read("nvmlDeviceGetGspFirmwareVersion", h, convert=_text),
            gsp_mode_current=gsp.map(lambda m: bool(m[0])),
            gsp_mode_default=gsp.map(lambda m: bool(m[1])),
            display_mode=self._read("nvmlDeviceGetDisplayMode", h, convert=bool),
            display_active=self._read("nvmlDeviceGetDisplayActive", h, convert=bool),
            accounting_mode=self._read("nvmlDeviceGetAccountingMode", h, convert=bool),
            accounting_buffer_size=self._read("nvmlDeviceGetAccountingBufferSize", h, convert=int),
            addressing_mode=self._read("nvmlDeviceGetAddressingMode", h, convert=int),
            c2c_enabled=self._read("nvmlDeviceGetC2cModeInfoV", h, convert=lambda c: bool(c.isC2cEnabled)),
            protected_memory_bytes=self._read(
                "nvmlDeviceGetConfComputeProtectedMemoryUsage",
                h,
                convert=lambda m: (int(m.total), int(m.used), int(m.free)),
            ),
        )

    def _memory_health(self, h: Any, fields: dict[Any, Reading[Any]]) -> MemoryHealth:
        lib = self._lib
        corrected, uncorrected = lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        volatile, aggregate = lib.NVML_VOLATILE_ECC, lib.NVML_AGGREGATE_ECC

        def count(error_type: int, counter: int, location: int) -> Reading[int]:
            return self._read("nvmlDeviceGetMemoryErrorCounter", h, error_type, counter, location, convert=int)

        locations = tuple(
            EccLocation(
                location=name,
                volatile_corrected=count(corrected, volatile, code),
                volatile_uncorrected=count(uncorrected, volatile, code),
                aggregate_corrected=count(corrected, aggregate, code),
                aggregate_uncorrected=count(uncorrected, aggregate, code),
            )
            for name, code in ECC_LOCATIONS
        )

        def retired(cause: int) -> Reading[tuple[int, ...]]:
            return self._read("nvmlDeviceGetRetiredPages", h, cause, convert=lambda a: tuple(int(x) for x in a))

        return MemoryHealth(
            ecc_by_location=locations,
            sram=self._struct("nvmlDeviceGetSramEccErrorStatus", h, lib.c_nvmlEccSramErrorStatus_v1_t()).map(
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
                )
            ),
            row_remap_histogram=self._read(
                "nvmlDeviceGetRowRemapperHistogram",
                h,
                convert=lambda r: RowRemapHistogram(int(r.max), int(r.high), int(r.partial), int(r.low), int(r.none)),
            ),
            remapped_inactive_correctable=fields[FI_REMAPPED_COR_INACTIVE].map(int),
            remapped_inactive_uncorrectable=fields[FI_REMAPPED_UNC_INACTIVE].map(int),
            retired_single_bit_addresses=retired(lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
            retired_double_bit_addresses=retired(lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        )

    def _codecs(self, h: Any) -> Codecs:
        stats: Reading[Any] = self._read("nvmlDeviceGetEncoderStats", h)

        def percent(function: str) -> Reading[int]:
            return self._read(function, h, convert=lambda u: int(u[0]))  # (percent, sampling period in µs)

        return Codecs(
            encoder_percent=percent("nvmlDeviceGetEncoderUtilization"),
            decoder_percent=percent("nvmlDeviceGetDecoderUtilization"),
            jpeg_percent=percent("nvmlDeviceGetJpgUtilization"),
            ofa_percent=percent("nvmlDeviceGetOfaUtilization"),
            encoder_sessions=stats.map(lambda s: int(s[0])),
            encoder_average_fps=stats.map(lambda s: int(s[1])),
            encoder_average_latency_us=stats.map(lambda s: int(s[2])),
        )

    def _nvlinks(self, h: Any) -> Reading[tuple[NvLink, ...]]:
        lib = self._lib
        states: list[Reading[bool]] = []
        for link in range(NVLINK_MAX_LINKS):
            state = self._read("nvmlDeviceGetNvLinkState", h, link, convert=lambda s: s == lib.NVML_FEATURE_ENABLED)
            if state.value is None:
                if link == 0 and state.reason is not None:
                    return Reading.missing(state.reason, state.detail or "this GPU has no NVLink")
                break  # past the GPU's last link
            states.append(state)
        speed_ids = [(FI_NVLINK_GET_SPEED, link) for link in range(len(states))]
        speeds = self._field_values(h, speed_ids)  # one call for every link's speed

        def read(function: str, link: int, *args: Any, convert: Callable[[Any], Any]) -> Reading[Any]:
            return self._read(function, h, link, *args, convert=convert)

        links = []
        for link, state in enumerate(states):
            links.append(
                NvLink(
                    link=link,
                    active=state,
                    version=read("nvmlDeviceGetNvLinkVersion", link, convert=int),
                    speed_mbps=speeds[(FI_NVLINK_GET_SPEED, link)].map(int),
                    remote_pci_bus_id=read("nvmlDeviceGetNvLinkRemotePciInfo", link, convert=lambda p: _text(p.busId)),
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
                )
            )
        return Reading.of(tuple(links))

    def _affinity(self, h: Any, peers: list[tuple[int, Any]]) -> Affinity:
        lib = self._lib
        links = []
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
                    p2p_read=self._read(
                        "nvmlDeviceGetP2PStatus", h, oh, P2P_READ, convert=lambda s: P2P_STATUS.get(int(s), str(s))
                    ),
                    p2p_nvlink=self._read(
                        "nvmlDeviceGetP2PStatus", h, oh, P2P_NVLINK, convert=lambda s: P2P_STATUS.get(int(s), str(s))
                    ),
                )
            )
        return Affinity(
            cpus=self._read("nvmlDeviceGetCpuAffinity", h, self._cpu_words, convert=cpu_list),
            numa_nodes=self._read(
                "nvmlDeviceGetMemoryAffinity", h, self._cpu_words, lib.NVML_AFFINITY_SCOPE_NODE, convert=cpu_list
            ),
            peers=tuple(links),
        )

    def _process_load(self, index: int, h: Any) -> Reading[tuple[ProcessLoad, ...]]:
        # NVML returns samples newer than the timestamp given: the first read takes all it keeps.
        since = self._last_seen.get(index, 0)
        samples: Reading[Any] = self._read("nvmlDeviceGetProcessUtilization", h, since)
        if samples.value is None:
            if samples.reason is Reason.NOT_FOUND:
                return Reading.missing(Reason.NOT_FOUND, "no process ran on the GPU since the last sample")
            return Reading.missing_like(samples)
        latest: dict[int, Any] = {}
        for s in samples.value:  # several samples per process: keep each one's newest
            if int(s.pid) not in latest or int(s.timeStamp) > int(latest[int(s.pid)].timeStamp):
                latest[int(s.pid)] = s
        if latest:
            self._last_seen[index] = max(int(s.timeStamp) for s in latest.values())
        loads = []
        for pid, s in sorted(latest.items()):
            cpu, rss, started = self._process_stats(pid)
            loads.append(
                ProcessLoad(
                    pid=pid,
                    sm_percent=int(s.smUtil),
                    memory_percent=int(s.memUtil),
                    encoder_percent=int(s.encUtil),
                    decoder_percent=int(s.decUtil),
                    sampled_at_us=int(s.timeStamp),
                    cpu_percent=cpu,
                    rss_bytes=rss,
                    started_at=started,
                )
            )
        return Reading.of(tuple(loads))


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
        affinity = d.affinity.value
        counts: dict[int, int] = {}
        switched = 0
        for link in d.nvlinks.value:
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
        out.append(replace(d, affinity=Reading.of(replace(affinity, peers=peers))))
    return out


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
