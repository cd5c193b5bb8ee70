"""The detail facts of a GPU that `nvidia-smi -q` shows beyond its summary table.

Kept apart from :mod:`gpudiag.model` so that plain `gpudiag list` never pays for creating
these classes: they load only when a command reads, shows or replays details. Frozen msgspec
Structs like the model's (a frozen dataclass costs ~1 ms at import). Every value is a
:class:`~gpudiag.model.Reading`, so a GPU that lacks one says why.
"""

from __future__ import annotations

import msgspec

from gpudiag.model import Reading

# NVML's memory locations (nvmlMemoryLocation_t), in nvidia-smi's names.
ECC_LOCATIONS = (
    ("l1_cache", 0),
    ("l2_cache", 1),
    ("device_memory", 2),  # also nvidia-smi's "dram": the same NVML location
    ("register_file", 3),
    ("texture_memory", 4),
    ("texture_shm", 5),
    ("cbu", 6),
    ("sram", 7),
)


class ClockSet(msgspec.Struct, frozen=True):
    """One kind of clock (current, max, application, default application) in MHz."""

    graphics: Reading[int]
    sm: Reading[int]
    memory: Reading[int]
    video: Reading[int]


class Clocks(msgspec.Struct, frozen=True):
    current: ClockSet
    max: ClockSet
    applications: ClockSet
    default_applications: ClockSet
    event_reasons_supported: Reading[int]  # NVML bitmask of the reasons this GPU reports
    # Time (µs) spent in each clock-event reason since the driver loaded, by nvidia-smi's name.
    event_reason_counters_us: tuple[tuple[str, Reading[int]], ...]


class PowerDetail(msgspec.Struct, frozen=True):
    management: Reading[bool]
    average_w: Reading[float]  # over the last second
    instant_w: Reading[float]
    requested_limit_w: Reading[float]  # what the administrator set (nvidia-smi's power.limit)
    default_limit_w: Reading[float]
    min_limit_w: Reading[float]
    max_limit_w: Reading[float]
    energy_mj: Reading[int]  # millijoules since the driver loaded


class Temperatures(msgspec.Struct, frozen=True):
    memory_c: Reading[int]
    margin_c: Reading[int]  # degrees below the slowdown limit (nvidia-smi's temperature.gpu.tlimit)
    gpu_max_c: Reading[int]  # the most the GPU is designed to run at
    memory_max_c: Reading[int]


class Identity(msgspec.Struct, frozen=True):
    serial: Reading[str]
    vbios_version: Reading[str]
    board_part_number: Reading[str]
    board_id: Reading[int]
    module_id: Reading[int]
    pci_domain: Reading[int]
    pci_bus: Reading[int]
    pci_device: Reading[int]
    pci_device_id: Reading[int]  # e.g. 0x233010DE: device 0x2330, vendor 0x10DE
    pci_subsystem_id: Reading[int]
    pci_base_class: Reading[int]  # PCI class code: 0x3 display controller (0x302: 3D controller)
    pci_sub_class: Reading[int]
    inforom_image: Reading[str]
    inforom_oem: Reading[str]
    inforom_ecc: Reading[str]
    inforom_power: Reading[str]
    inforom_checksum: Reading[int]
    gsp_firmware_version: Reading[str]
    gsp_mode_current: Reading[bool]
    gsp_mode_default: Reading[bool]
    display_mode: Reading[bool]
    display_active: Reading[bool]
    accounting_mode: Reading[bool]
    accounting_buffer_size: Reading[int]
    addressing_mode: Reading[int]  # 0 none, 1 HMM, 2 ATS
    c2c_enabled: Reading[bool]
    # Confidential-computing protected memory: (total, used, free) bytes.
    protected_memory_bytes: Reading[tuple[int, int, int]]


class EccLocation(msgspec.Struct, frozen=True):
    location: str  # one of ECC_LOCATIONS
    volatile_corrected: Reading[int]
    volatile_uncorrected: Reading[int]
    aggregate_corrected: Reading[int]
    aggregate_uncorrected: Reading[int]


class RowRemapHistogram(msgspec.Struct, frozen=True):
    """Banks by how many spare rows they have left (nvmlRowRemapperHistogramValues_t)."""

    max: int
    high: int
    partial: int
    low: int
    none: int


class SramErrors(msgspec.Struct, frozen=True):
    """SRAM ECC errors by kind and, for aggregate uncorrectable ones, by unit (Hopper and later)."""

    volatile_corrected: int
    volatile_uncorrected_parity: int
    volatile_uncorrected_secded: int
    aggregate_corrected: int
    aggregate_uncorrected_parity: int
    aggregate_uncorrected_secded: int
    aggregate_l2: int
    aggregate_sm: int
    aggregate_mcu: int  # microcontroller
    aggregate_pcie: int
    aggregate_other: int
    threshold_exceeded: bool  # enough uncorrectable SRAM errors that the GPU should be serviced


class MemoryHealth(msgspec.Struct, frozen=True):
    ecc_by_location: tuple[EccLocation, ...]
    row_remap_histogram: Reading[RowRemapHistogram]
    sram: Reading[SramErrors]
    # Rows remapped in an earlier boot whose remapping no longer applies (nvidia-smi's *_inactive).
    remapped_inactive_correctable: Reading[int]
    remapped_inactive_uncorrectable: Reading[int]
    retired_single_bit_addresses: Reading[tuple[int, ...]]
    retired_double_bit_addresses: Reading[tuple[int, ...]]


class Bar1(msgspec.Struct, frozen=True):
    total_bytes: int
    used_bytes: int
    free_bytes: int


class PcieDetail(msgspec.Struct, frozen=True):
    tx_kbps: Reading[int]  # KB/s over the last 20 ms, as NVML samples it
    rx_kbps: Reading[int]
    replay_counter: Reading[int]


class Codecs(msgspec.Struct, frozen=True):
    encoder_percent: Reading[int]
    decoder_percent: Reading[int]
    jpeg_percent: Reading[int]
    ofa_percent: Reading[int]
    encoder_sessions: Reading[int]
    encoder_average_fps: Reading[int]
    encoder_average_latency_us: Reading[int]


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


class PeerLink(msgspec.Struct, frozen=True):
    """How this GPU reaches another one (a cell of `nvidia-smi topo -m`)."""

    gpu: int  # the other GPU's NVML index
    common_ancestor: Reading[str]  # nvidia-smi's PIX/PXB/PHB/NODE/SYS (NV# comes from nvlinks)
    nvlinks: int  # active NVLinks to the other GPU: direct, or through NVSwitches when P2P over NVLink is OK
    p2p_read: Reading[str]  # nvmlDeviceGetP2PStatus(READ): "OK" or why not
    p2p_nvlink: Reading[str]  # nvmlDeviceGetP2PStatus(NVLINK)


class Affinity(msgspec.Struct, frozen=True):
    cpus: Reading[str]  # CPU list, e.g. "0-15"
    numa_nodes: Reading[str]  # host NUMA nodes near the GPU, e.g. "0"
    peers: tuple[PeerLink, ...]


class ProcessLoad(msgspec.Struct, frozen=True):
    """One process's share of the GPU (nvmlDeviceGetProcessUtilization) and its host view."""

    pid: int
    sm_percent: int
    memory_percent: int
    encoder_percent: int
    decoder_percent: int
    sampled_at_us: int  # NVML's timestamp of the sample (µs; the cursor for the next read)
    cpu_percent: Reading[float]
    rss_bytes: Reading[int]
    started_at: Reading[float]  # unix time


class GpuDetails(msgspec.Struct, frozen=True):
    clocks: Clocks
    power: PowerDetail
    temperatures: Temperatures
    identity: Identity
    memory_health: MemoryHealth
    bar1: Reading[Bar1]
    pcie: PcieDetail
    codecs: Codecs
    nvlinks: Reading[tuple[NvLink, ...]]  # missing when the GPU has no NVLink (or links were not read)
    affinity: Reading[Affinity]
    # Per-process load; NOT_FOUND when no process ran since the last sample (NVML's answer).
    process_load: Reading[tuple[ProcessLoad, ...]]
