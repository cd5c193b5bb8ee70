"""The fake NVML's answers for the composite detail calls, from a machine's recorded :class:`GpuDetails`.

The simple detail readings are answered from their rows (``gpudiag.details.DETAIL_READINGS``) by
:class:`~gpudiag.replay.fake_nvml.FakeNvml` itself; this module answers what is built from several
readings or filled by reference (PCI ids, ECC by location, SRAM errors, NVLink, topology, affinity,
per-process load). Loaded on the first such call: each returns what NVML returned on the recorded
GPU (same shapes as nvidia-ml-py) or raises the error class that the recorded reading's reason
stands for, as `docs/hardware/.../nvml-getters-*.json` show.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pynvml

from gpudiag.model import Gpu, Machine, Reading, Reason
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
)
from gpudiag.replay.fake_answers import FakeHandle, fail, recorded

if TYPE_CHECKING:
    from gpudiag.details import GpuDetails, NvLink

_TOPOLOGY_CODES = {level: code for code, level in TOPOLOGY_LEVELS.items()}
# The per-link field values NVML answers with the link as the scope: the NvLink reading each is.
NVLINK_FIELDS = {
    FI_NVLINK_GET_SPEED: "speed_mbps",
    FI_NVLINK_THROUGHPUT_DATA_TX: "data_tx_kib",
    FI_NVLINK_THROUGHPUT_DATA_RX: "data_rx_kib",
    FI_NVLINK_THROUGHPUT_RAW_TX: "raw_tx_kib",
    FI_NVLINK_THROUGHPUT_RAW_RX: "raw_rx_kib",
}
_P2P_CODES = {status: code for code, status in P2P_STATUS.items()}
_NVLINK_REMOTE_CODES = {kind: code for code, kind in NVLINK_REMOTE_TYPES.items()}


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
    """Detail calls of a FakeNvml, which keeps the machine, the call log and the init state: it hands
    over how a call is entered (logged, refused before init or when the driver lacks it) and how a
    handle becomes its GPU."""

    def __init__(self, enter: Callable[[str], None], gpu: Callable[[FakeHandle], Gpu]) -> None:
        self._enter = enter
        self._gpu = gpu

    def _details(self, name: str, handle: Any) -> GpuDetails:
        self._enter(name)
        return recorded(self._gpu(handle).details)  # type: ignore[no-any-return]

    # -- identity --------------------------------------------------------------------

    def nvmlDeviceGetPciInfoExt(self, handle: Any, ref: Any) -> None:
        ident = self._details("nvmlDeviceGetPciInfoExt", handle).identity
        info = ref._obj  # ctypes.byref(struct)
        info.baseClass, info.subClass = int(recorded(ident.pci_base_class)), int(recorded(ident.pci_sub_class))
        for attr, pick in self.detail_pci(self._gpu(handle)).items():
            setattr(info, attr, pick)
        info.busId = str(recorded(self._gpu(handle).pci_bus_id)).encode()

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
        return {k: int(recorded(v)) for k, v in pairs.items()}

    # -- memory health ---------------------------------------------------------------

    def nvmlDeviceGetMemoryErrorCounter(self, handle: Any, error_type: int, counter: int, location: int) -> int:
        from gpudiag.details import ECC_LOCATIONS

        health = self._details("nvmlDeviceGetMemoryErrorCounter", handle).memory_health
        names = {code: name for name, code in ECC_LOCATIONS}
        for loc in health.ecc_by_location:
            if loc.location == names.get(location):
                corrected = error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
                if counter == pynvml.NVML_VOLATILE_ECC:
                    return int(recorded(loc.volatile_corrected if corrected else loc.volatile_uncorrected))
                return int(recorded(loc.aggregate_corrected if corrected else loc.aggregate_uncorrected))
        return int(fail(pynvml.NVML_ERROR_INVALID_ARGUMENT))

    def nvmlDeviceGetSramEccErrorStatus(self, handle: Any, ref: Any) -> None:
        e = recorded(self._details("nvmlDeviceGetSramEccErrorStatus", handle).memory_health.sram)
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

    def detail_retired_addresses(self, gpu: Gpu, single_bit: bool) -> list[int] | None:
        """Recorded retired-page addresses, for FakeNvml.nvmlDeviceGetRetiredPages; None if not recorded."""
        d = gpu.details.value
        if d is None:
            return None
        health = d.memory_health
        addresses = health.retired_single_bit_addresses if single_bit else health.retired_double_bit_addresses
        return list(recorded(addresses))

    # -- NVLink and topology ---------------------------------------------------------

    def nvlink_speed(self, gpu: Gpu, link: int) -> int:
        """NVML_FI_DEV_NVLINK_GET_SPEED of one link (the field's scope), for FakeNvml's field values."""
        return self.nvlink_field(gpu, FI_NVLINK_GET_SPEED, link)

    def nvlink_field(self, gpu: Gpu, field_id: int, link: int) -> int:
        """A per-link field (:data:`NVLINK_FIELDS`: speed, throughput counters) of one link, the field's scope."""
        found = self._link(recorded(gpu.details), link)
        if found is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        assert found is not None
        return int(recorded(getattr(found, NVLINK_FIELDS[field_id])))

    @staticmethod
    def _link(d: GpuDetails, link: int) -> NvLink | None:
        links = recorded(d.nvlinks)
        return next((x for x in links if x.link == link), None)

    def _nvlink(self, name: str, handle: Any, link: int) -> NvLink:
        found = self._link(self._details(name, handle), link)
        if found is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # past this GPU's last link
        assert found is not None
        return found

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        active = recorded(self._nvlink("nvmlDeviceGetNvLinkState", handle, link).active)
        return int(pynvml.NVML_FEATURE_ENABLED if active else pynvml.NVML_FEATURE_DISABLED)

    def nvmlDeviceGetNvLinkVersion(self, handle: Any, link: int) -> int:
        return int(recorded(self._nvlink("nvmlDeviceGetNvLinkVersion", handle, link).version))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:
        return SimpleNamespace(
            busId=recorded(self._nvlink("nvmlDeviceGetNvLinkRemotePciInfo", handle, link).remote_pci_bus_id)
        )

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        kind = recorded(self._nvlink("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link).remote_type)
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
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(recorded(by_counter[counter]))

    def _peer(self, name: str, handle: Any, other: Any) -> Any:
        for peer in recorded(self._details(name, handle).affinity).peers:
            if peer.gpu == other.gpu:
                return peer
        return fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetTopologyCommonAncestor(self, handle: Any, other: Any) -> int:
        level = recorded(self._peer("nvmlDeviceGetTopologyCommonAncestor", handle, other).common_ancestor)
        return _TOPOLOGY_CODES[level]

    def nvmlDeviceGetP2PStatus(self, handle: Any, other: Any, index: int) -> int:
        peer = self._peer("nvmlDeviceGetP2PStatus", handle, other)
        by_index = {
            P2P_READ: peer.p2p_read,
            P2P_NVLINK: peer.p2p_nvlink,
            P2P_WRITE: peer.p2p_write,
            P2P_ATOMICS: peer.p2p_atomics,
            P2P_PROP: peer.p2p_prop,
        }
        if index not in by_index:
            return int(fail(pynvml.NVML_ERROR_NOT_SUPPORTED))
        return _P2P_CODES[recorded(by_index[index])]

    def nvmlDeviceGetCpuAffinity(self, handle: Any, words: int) -> list[int]:
        return _mask(recorded(recorded(self._details("nvmlDeviceGetCpuAffinity", handle).affinity).cpus), words)

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, words: int, scope: int) -> list[int]:
        affinity = recorded(self._details("nvmlDeviceGetMemoryAffinity", handle).affinity)
        return _mask(recorded(affinity.numa_nodes), words)

    # -- clocks ----------------------------------------------------------------------

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> list[int]:
        supported = recorded(self._details("nvmlDeviceGetSupportedMemoryClocks", handle).clocks.supported)
        return [memory for memory, _ in supported]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, memory: int) -> list[int]:
        supported = recorded(self._details("nvmlDeviceGetSupportedGraphicsClocks", handle).clocks.supported)
        for clock, graphics in supported:
            if clock == memory:
                return list(graphics)
        return list(fail(pynvml.NVML_ERROR_INVALID_ARGUMENT))  # a memory clock it does not have

    # -- processes -------------------------------------------------------------------

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Any]:
        loads = recorded(self._details("nvmlDeviceGetProcessUtilization", handle).process_load)
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
