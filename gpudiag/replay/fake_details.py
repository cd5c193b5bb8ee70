"""The fake NVML's answers for the detail calls, from a machine's recorded :class:`GpuDetails`.

Loaded by :class:`~gpudiag.replay.fake_nvml.FakeNvml` on the first detail call: each call returns what NVML
returned on the recorded GPU (same shapes as nvidia-ml-py) or raises the error class that
the recorded reading's reason stands for, as `docs/hardware/.../nvml-getters-*.json` show.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pynvml

from gpudiag.model import Gpu, Machine, Reading, Reason
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

if TYPE_CHECKING:
    from gpudiag.details import ClockSet, GpuDetails, NvLink
    from gpudiag.replay.fake_nvml import FakeNvml

_TOPOLOGY_CODES = {level: code for code, level in TOPOLOGY_LEVELS.items()}
_P2P_CODES = {status: code for code, status in P2P_STATUS.items()}
_NVLINK_REMOTE_CODES = {kind: code for code, kind in NVLINK_REMOTE_TYPES.items()}
_COUNTER_BY_FIELD = {event.counter_field: event.query for event in CLOCK_EVENTS if event.counter_field}
_SAMPLING_PERIOD_US = 100000  # the codec utilizations' sampling period on the captured H100


def _raise(code: int) -> Any:
    raise pynvml.NVMLError(code)


def _value(reading: Reading[Any]) -> Any:
    from gpudiag.replay.fake_nvml import _value as value

    return value(reading)


def _mask(numbers: str, words: int) -> list[int]:
    """ "0-15,32" as NVML's array of 64-bit words."""
    out = [0] * words
    for part in filter(None, numbers.split(",")):
        first, _, last = part.partition("-")
        for n in range(int(first), int(last or first) + 1):
            if n // 64 < words:
                out[n // 64] |= 1 << (n % 64)
    return out


class FakeDetails:
    """Detail calls of a FakeNvml, which keeps the machine, the call log and the init state."""

    # A struct class named like an NVML function: without this, FakeNvml would answer it as a call.
    nvmlPciInfoExt_v1_t = pynvml.nvmlPciInfoExt_v1_t  # noqa: N815 - pynvml's name

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake

    def _enter(self, name: str) -> None:
        self._fake._enter(name)

    def _gpu(self, handle: Any) -> Gpu:
        return self._fake._gpu(handle)

    def _details(self, name: str, handle: Any) -> GpuDetails:
        self._enter(name)
        return _value(self._gpu(handle).details)  # type: ignore[no-any-return]

    # -- clocks ----------------------------------------------------------------------

    def _clock(self, name: str, handle: Any, pick: str, clock_type: int) -> int:
        clocks = self._details(name, handle).clocks
        chosen: ClockSet = getattr(clocks, pick)
        by_type = {0: chosen.graphics, 1: chosen.sm, 2: chosen.memory, 3: chosen.video}
        if clock_type not in by_type:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(_value(by_type[clock_type]))

    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int:
        return self._clock("nvmlDeviceGetClockInfo", handle, "current", clock_type)

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, clock_type: int) -> int:
        return self._clock("nvmlDeviceGetMaxClockInfo", handle, "max", clock_type)

    def nvmlDeviceGetApplicationsClock(self, handle: Any, clock_type: int) -> int:
        return self._clock("nvmlDeviceGetApplicationsClock", handle, "applications", clock_type)

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: Any, clock_type: int) -> int:
        return self._clock("nvmlDeviceGetDefaultApplicationsClock", handle, "default_applications", clock_type)

    def nvmlDeviceGetSupportedClocksEventReasons(self, handle: Any) -> int:
        return int(
            _value(self._details("nvmlDeviceGetSupportedClocksEventReasons", handle).clocks.event_reasons_supported)
        )

    def nvmlDeviceGetSupportedClocksThrottleReasons(self, handle: Any) -> int:
        return int(
            _value(self._details("nvmlDeviceGetSupportedClocksThrottleReasons", handle).clocks.event_reasons_supported)
        )

    # -- power and temperature -------------------------------------------------------

    def nvmlDeviceGetPowerManagementMode(self, handle: Any) -> int:
        return int(bool(_value(self._details("nvmlDeviceGetPowerManagementMode", handle).power.management)))

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        return round(
            float(_value(self._details("nvmlDeviceGetPowerManagementLimit", handle).power.requested_limit_w)) * 1000
        )

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        power = self._details("nvmlDeviceGetPowerManagementDefaultLimit", handle).power
        return round(float(_value(power.default_limit_w)) * 1000)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        power = self._details("nvmlDeviceGetPowerManagementLimitConstraints", handle).power
        return [round(_value(power.min_limit_w) * 1000), round(_value(power.max_limit_w) * 1000)]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return int(_value(self._details("nvmlDeviceGetTotalEnergyConsumption", handle).power.energy_mj))

    def nvmlDeviceGetMarginTemperature(self, handle: Any) -> int:
        return int(_value(self._details("nvmlDeviceGetMarginTemperature", handle).temperatures.margin_c))

    def detail_threshold(self, handle: Any, threshold: int) -> int:
        temps = self._details("nvmlDeviceGetTemperatureThreshold", handle).temperatures
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX:
            return int(_value(temps.gpu_max_c))
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX:
            return int(_value(temps.memory_max_c))
        return int(_raise(pynvml.NVML_ERROR_NOT_SUPPORTED))

    # -- field values (called by FakeNvml.nvmlDeviceGetFieldValues) ---------------------

    def detail_field(self, gpu: Gpu, field_id: Any) -> SimpleNamespace:
        scope = 0
        if isinstance(field_id, tuple):
            field_id, scope = field_id
        reading: Reading[Any]
        value_type = 1
        d = gpu.details.value
        if d is None:
            reading = gpu.details
        elif field_id == FI_MEMORY_TEMP:
            reading = d.temperatures.memory_c
        elif field_id == pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
            reading, value_type = d.power.energy_mj, 3
        elif field_id == pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER:
            reading = d.pcie.replay_counter
        elif field_id in (FI_POWER_AVERAGE, FI_POWER_INSTANT):
            watts = d.power.average_w if field_id == FI_POWER_AVERAGE else d.power.instant_w
            reading = watts.map(lambda w: round(w * 1000))
        elif field_id in _COUNTER_BY_FIELD:
            name = _COUNTER_BY_FIELD[field_id]
            reading, value_type = dict(d.clocks.event_reason_counters_us)[name].map(lambda us: us * 1000), 3
        elif field_id == FI_REMAPPED_COR_INACTIVE:
            reading = d.memory_health.remapped_inactive_correctable
        elif field_id == FI_REMAPPED_UNC_INACTIVE:
            reading = d.memory_health.remapped_inactive_uncorrectable
        elif field_id == FI_NVLINK_GET_SPEED:
            link = self._link(d, scope)
            reading = link.speed_mbps if link is not None else Reading.missing(Reason.NOT_SUPPORTED)
        else:
            reading = Reading.missing(Reason.NOT_SUPPORTED)
        if reading.reason is not None:
            from gpudiag.replay.fake_nvml import _REASON_ERRORS

            return SimpleNamespace(fieldId=field_id, scopeId=scope, nvmlReturn=_REASON_ERRORS[reading.reason])
        member = "ullVal" if value_type == 3 else "uiVal"
        return SimpleNamespace(
            fieldId=field_id,
            scopeId=scope,
            nvmlReturn=pynvml.NVML_SUCCESS,
            valueType=value_type,
            value=SimpleNamespace(**{member: int(_value(reading))}),
        )

    def fill_field(self, gpu: Gpu, field_id: Any, slot: Any) -> None:
        """Fill one nvmlFieldValue_t of FakeNvml.nvmlDeviceGetFieldValues from the recorded details."""
        answer = self.detail_field(gpu, field_id)
        slot.nvmlReturn = answer.nvmlReturn
        if answer.nvmlReturn == pynvml.NVML_SUCCESS:
            slot.valueType = answer.valueType
            member = "ullVal" if answer.valueType == 3 else "uiVal"
            setattr(slot.value, member, getattr(answer.value, member))

    # -- identity --------------------------------------------------------------------

    def _ident(self, name: str, handle: Any, attr: str) -> Any:
        return _value(getattr(self._details(name, handle).identity, attr))

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        return str(self._ident("nvmlDeviceGetSerial", handle, "serial"))

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        return str(self._ident("nvmlDeviceGetVbiosVersion", handle, "vbios_version"))

    def nvmlDeviceGetBoardPartNumber(self, handle: Any) -> str:
        return str(self._ident("nvmlDeviceGetBoardPartNumber", handle, "board_part_number"))

    def nvmlDeviceGetBoardId(self, handle: Any) -> int:
        return int(self._ident("nvmlDeviceGetBoardId", handle, "board_id"))

    def nvmlDeviceGetModuleId(self, handle: Any) -> int:
        return int(self._ident("nvmlDeviceGetModuleId", handle, "module_id"))

    def nvmlDeviceGetInforomImageVersion(self, handle: Any) -> str:
        return str(self._ident("nvmlDeviceGetInforomImageVersion", handle, "inforom_image"))

    def nvmlDeviceGetInforomVersion(self, handle: Any, obj: int) -> str:
        attr = {
            pynvml.NVML_INFOROM_OEM: "inforom_oem",
            pynvml.NVML_INFOROM_ECC: "inforom_ecc",
            pynvml.NVML_INFOROM_POWER: "inforom_power",
        }.get(obj)
        if attr is None:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return str(self._ident("nvmlDeviceGetInforomVersion", handle, str(attr)))

    def nvmlDeviceGetInforomConfigurationChecksum(self, handle: Any) -> int:
        return int(self._ident("nvmlDeviceGetInforomConfigurationChecksum", handle, "inforom_checksum"))

    def nvmlDeviceGetGspFirmwareVersion(self, handle: Any) -> str:
        return str(self._ident("nvmlDeviceGetGspFirmwareVersion", handle, "gsp_firmware_version"))

    def nvmlDeviceGetGspFirmwareMode(self, handle: Any) -> list[int]:
        ident = self._details("nvmlDeviceGetGspFirmwareMode", handle).identity
        return [int(bool(_value(ident.gsp_mode_current))), int(bool(_value(ident.gsp_mode_default)))]

    def nvmlDeviceGetDisplayMode(self, handle: Any) -> int:
        return int(bool(self._ident("nvmlDeviceGetDisplayMode", handle, "display_mode")))

    def nvmlDeviceGetDisplayActive(self, handle: Any) -> int:
        return int(bool(self._ident("nvmlDeviceGetDisplayActive", handle, "display_active")))

    def nvmlDeviceGetAccountingMode(self, handle: Any) -> int:
        return int(bool(self._ident("nvmlDeviceGetAccountingMode", handle, "accounting_mode")))

    def nvmlDeviceGetAccountingBufferSize(self, handle: Any) -> int:
        return int(self._ident("nvmlDeviceGetAccountingBufferSize", handle, "accounting_buffer_size"))

    def nvmlDeviceGetAddressingMode(self, handle: Any) -> int:
        return int(self._ident("nvmlDeviceGetAddressingMode", handle, "addressing_mode"))

    def nvmlDeviceGetC2cModeInfoV(self, handle: Any) -> Any:
        return SimpleNamespace(isC2cEnabled=int(bool(self._ident("nvmlDeviceGetC2cModeInfoV", handle, "c2c_enabled"))))

    def nvmlDeviceGetConfComputeProtectedMemoryUsage(self, handle: Any) -> Any:
        total, used, free = self._ident(
            "nvmlDeviceGetConfComputeProtectedMemoryUsage", handle, "protected_memory_bytes"
        )
        return SimpleNamespace(total=total, used=used, free=free)

    def nvmlDeviceGetPciInfoExt(self, handle: Any, ref: Any) -> None:
        ident = self._details("nvmlDeviceGetPciInfoExt", handle).identity
        info = ref._obj  # ctypes.byref(struct)
        info.baseClass, info.subClass = int(_value(ident.pci_base_class)), int(_value(ident.pci_sub_class))
        for attr, pick in self.detail_pci(self._gpu(handle)).items():
            setattr(info, attr, pick)
        info.busId = str(_value(self._gpu(handle).pci_bus_id)).encode()

    def detail_pci(self, gpu: Gpu) -> dict[str, Any]:
        """The PCI ids FakeNvml.nvmlDeviceGetPciInfo adds when details are recorded."""
        d = gpu.details.value
        if d is None:
            return {}
        ident = d.identity
        pairs = {
            "domain": ident.pci_domain,
            "bus": ident.pci_bus,
            "device": ident.pci_device,
            "pciDeviceId": ident.pci_device_id,
            "pciSubSystemId": ident.pci_subsystem_id,
        }
        return {k: int(_value(v)) for k, v in pairs.items()}

    # -- memory health ---------------------------------------------------------------

    def nvmlDeviceGetMemoryErrorCounter(self, handle: Any, error_type: int, counter: int, location: int) -> int:
        from gpudiag.details import ECC_LOCATIONS

        health = self._details("nvmlDeviceGetMemoryErrorCounter", handle).memory_health
        names = {code: name for name, code in ECC_LOCATIONS}
        for loc in health.ecc_by_location:
            if loc.location == names.get(location):
                corrected = error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
                if counter == pynvml.NVML_VOLATILE_ECC:
                    return int(_value(loc.volatile_corrected if corrected else loc.volatile_uncorrected))
                return int(_value(loc.aggregate_corrected if corrected else loc.aggregate_uncorrected))
        return int(_raise(pynvml.NVML_ERROR_INVALID_ARGUMENT))

    def nvmlDeviceGetSramEccErrorStatus(self, handle: Any, ref: Any) -> None:
        e = _value(self._details("nvmlDeviceGetSramEccErrorStatus", handle).memory_health.sram)
        status = ref._obj
        status.volatileCor, status.aggregateCor = e.volatile_corrected, e.aggregate_corrected
        status.volatileUncParity, status.volatileUncSecDed = (
            e.volatile_uncorrected_parity,
            e.volatile_uncorrected_secded,
        )
        status.aggregateUncParity, status.aggregateUncSecDed = (
            e.aggregate_uncorrected_parity,
            e.aggregate_uncorrected_secded,
        )
        status.aggregateUncBucketL2, status.aggregateUncBucketSm = e.aggregate_l2, e.aggregate_sm
        status.aggregateUncBucketMcu, status.aggregateUncBucketPcie = e.aggregate_mcu, e.aggregate_pcie
        status.aggregateUncBucketOther = e.aggregate_other
        status.bThresholdExceeded = int(e.threshold_exceeded)

    def nvmlDeviceGetRowRemapperHistogram(self, handle: Any) -> Any:
        h = _value(self._details("nvmlDeviceGetRowRemapperHistogram", handle).memory_health.row_remap_histogram)
        return SimpleNamespace(max=h.max, high=h.high, partial=h.partial, low=h.low, none=h.none)

    def detail_retired_addresses(self, gpu: Gpu, single_bit: bool) -> list[int] | None:
        """Recorded retired-page addresses, for FakeNvml.nvmlDeviceGetRetiredPages; None if not recorded."""
        d = gpu.details.value
        if d is None:
            return None
        health = d.memory_health
        return list(_value(health.retired_single_bit_addresses if single_bit else health.retired_double_bit_addresses))

    # -- BAR1, PCIe, codecs ----------------------------------------------------------

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: Any) -> Any:
        b = _value(self._details("nvmlDeviceGetBAR1MemoryInfo", handle).bar1)
        return SimpleNamespace(bar1Total=b.total_bytes, bar1Used=b.used_bytes, bar1Free=b.free_bytes)

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        pcie = self._details("nvmlDeviceGetPcieThroughput", handle).pcie
        return int(_value(pcie.tx_kbps if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else pcie.rx_kbps))

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return int(_value(self._details("nvmlDeviceGetPcieReplayCounter", handle).pcie.replay_counter))

    def _codec(self, name: str, handle: Any, attr: str) -> list[int]:
        return [int(_value(getattr(self._details(name, handle).codecs, attr))), _SAMPLING_PERIOD_US]

    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        return self._codec("nvmlDeviceGetEncoderUtilization", handle, "encoder_percent")

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        return self._codec("nvmlDeviceGetDecoderUtilization", handle, "decoder_percent")

    def nvmlDeviceGetJpgUtilization(self, handle: Any) -> list[int]:
        return self._codec("nvmlDeviceGetJpgUtilization", handle, "jpeg_percent")

    def nvmlDeviceGetOfaUtilization(self, handle: Any) -> list[int]:
        return self._codec("nvmlDeviceGetOfaUtilization", handle, "ofa_percent")

    def nvmlDeviceGetEncoderStats(self, handle: Any) -> list[int]:
        c = self._details("nvmlDeviceGetEncoderStats", handle).codecs
        return [
            int(_value(c.encoder_sessions)),
            int(_value(c.encoder_average_fps)),
            int(_value(c.encoder_average_latency_us)),
        ]

    # -- NVLink and topology ---------------------------------------------------------

    @staticmethod
    def _link(d: GpuDetails, link: int) -> NvLink | None:
        links = _value(d.nvlinks)
        return next((x for x in links if x.link == link), None)

    def _nvlink(self, name: str, handle: Any, link: int) -> NvLink:
        found = self._link(self._details(name, handle), link)
        if found is None:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # past this GPU's last link
        assert found is not None
        return found

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        active = _value(self._nvlink("nvmlDeviceGetNvLinkState", handle, link).active)
        return int(pynvml.NVML_FEATURE_ENABLED if active else pynvml.NVML_FEATURE_DISABLED)

    def nvmlDeviceGetNvLinkVersion(self, handle: Any, link: int) -> int:
        return int(_value(self._nvlink("nvmlDeviceGetNvLinkVersion", handle, link).version))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:
        return SimpleNamespace(
            busId=_value(self._nvlink("nvmlDeviceGetNvLinkRemotePciInfo", handle, link).remote_pci_bus_id)
        )

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        kind = _value(self._nvlink("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link).remote_type)
        return _NVLINK_REMOTE_CODES.get(kind, 255)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int:
        found = self._nvlink("nvmlDeviceGetNvLinkErrorCounter", handle, link)
        by_counter = {
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY: found.replay_errors,
            pynvml.NVML_NVLINK_ERROR_DL_RECOVERY: found.recovery_errors,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT: found.crc_flit_errors,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA: found.crc_data_errors,
        }
        if counter not in by_counter:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(_value(by_counter[counter]))

    def _peer(self, name: str, handle: Any, other: Any) -> Any:
        for peer in _value(self._details(name, handle).affinity).peers:
            if peer.gpu == other.gpu:
                return peer
        return _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTopologyCommonAncestor(self, handle: Any, other: Any) -> int:
        level = _value(self._peer("nvmlDeviceGetTopologyCommonAncestor", handle, other).common_ancestor)
        return _TOPOLOGY_CODES[level]

    def nvmlDeviceGetP2PStatus(self, handle: Any, other: Any, index: int) -> int:
        peer = self._peer("nvmlDeviceGetP2PStatus", handle, other)
        if index == P2P_READ:
            return _P2P_CODES[_value(peer.p2p_read)]
        if index == P2P_NVLINK:
            return _P2P_CODES[_value(peer.p2p_nvlink)]
        return int(_raise(pynvml.NVML_ERROR_NOT_SUPPORTED))

    def nvmlDeviceGetCpuAffinity(self, handle: Any, words: int) -> list[int]:
        return _mask(_value(_value(self._details("nvmlDeviceGetCpuAffinity", handle).affinity).cpus), words)

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, words: int, scope: int) -> list[int]:
        return _mask(_value(_value(self._details("nvmlDeviceGetMemoryAffinity", handle).affinity).numa_nodes), words)

    # -- processes -------------------------------------------------------------------

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Any]:
        loads = _value(self._details("nvmlDeviceGetProcessUtilization", handle).process_load)
        # A replay holds one moment: its samples are always newer than the cursor asked for.
        return [
            SimpleNamespace(
                pid=p.pid,
                timeStamp=max(p.sampled_at_us, since + 1),
                smUtil=p.sm_percent,
                memUtil=p.memory_percent,
                encUtil=p.encoder_percent,
                decUtil=p.decoder_percent,
            )
            for p in loads
        ]


class RecordedProcessStats:
    """The host view (CPU %, RSS, start time) recorded with each process's GPU load."""

    def __init__(self, machine: Machine) -> None:
        self._by_pid: dict[int, tuple[Reading[float], Reading[int], Reading[float]]] = {}
        for gpu in machine.gpus:
            d = gpu.details.value
            if d is None:
                continue
            for p in d.process_load.get(()):
                self._by_pid[p.pid] = (p.cpu_percent, p.rss_bytes, p.started_at)

    def __call__(self, pid: int) -> tuple[Reading[float], Reading[int], Reading[float]]:
        if pid in self._by_pid:
            return self._by_pid[pid]
        gone: Reading[Any] = Reading.missing(Reason.NOT_FOUND, "process exited")
        return gone, gone, gone
