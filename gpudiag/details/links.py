"""`nvidia-smi -q`'s NVLinks and how a GPU reaches the others (`topo -m`, `-p2p`): the values of
``GpuDetails``' ``nvlinks`` and ``affinity``, whose composite rows stand beside those fields (read by
hand with FactGroup.LINKS).
"""

from __future__ import annotations

import msgspec

from gpudiag.values import Reading, not_recorded


class NvLink(msgspec.Struct, frozen=True):
    link: int
    active: Reading[bool]
    version: Reading[int]
    speed_mbps: Reading[int]
    remote_pci_bus_id: Reading[str]
    remote_type: Reading[str]  # "GPU", "switch" (NVSwitch), "IBM NPU" or "unknown"
    replay_errors: Reading[int]
    recovery_errors: Reading[int]
    crc_flit_errors: Reading[int]
    crc_data_errors: Reading[int]
    # Throughput counters since the driver loaded, KiB (NVML_FI_DEV_NVLINK_THROUGHPUT_*, `nvlink -gt`):
    # the payload (data) and everything on the wire (raw: headers, replays, flow control too).
    data_tx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)
    data_rx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)
    raw_tx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)
    raw_rx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)


class PeerLink(msgspec.Struct, frozen=True):
    """How this GPU reaches another one (a cell of `nvidia-smi topo -m`)."""

    gpu: int  # the other GPU's NVML index
    common_ancestor: Reading[str]  # nvidia-smi's PIX/PXB/PHB/NODE/SYS (NV# comes from nvlinks)
    nvlinks: int  # active NVLinks to the other GPU: direct, or through NVSwitches when P2P over NVLink is OK
    p2p_read: Reading[str]  # nvmlDeviceGetP2PStatus(READ): "OK" or why not
    p2p_nvlink: Reading[str]  # nvmlDeviceGetP2PStatus(NVLINK)
    # The other capabilities `nvidia-smi topo -p2p w|a|p` shows (write, atomics, PCIe/"prop").
    p2p_write: Reading[str] = msgspec.field(default_factory=not_recorded)
    p2p_atomics: Reading[str] = msgspec.field(default_factory=not_recorded)
    p2p_prop: Reading[str] = msgspec.field(default_factory=not_recorded)


# How each GPU reaches every other one is N² NVML calls and lines: the details (`-q`, a snapshot with
# details) read it up to this many GPUs (a node has 8, an HGX-2 16); beyond, `gpudiag topo` does.
PEERS_READ_UP_TO = 16


class Affinity(msgspec.Struct, frozen=True):
    cpus: Reading[str]  # CPU list, e.g. "0-15"
    numa_nodes: Reading[str]  # host NUMA nodes near the GPU, e.g. "0"
    peers: tuple[PeerLink, ...]  # none read on a machine of more than PEERS_READ_UP_TO GPUs
