"""The detail facts of a GPU that `nvidia-smi -q` shows beyond its summary table, and their readings.

Kept apart from :mod:`gpudiag.model` so that plain `gpudiag list` never pays for creating
these classes: they load only when a command reads, shows or replays details. Frozen msgspec
Structs like the model's (a frozen dataclass costs ~1 ms at import). Every value is a
:class:`~gpudiag.values.Reading`, so a GPU that lacks one says why.
:data:`gpudiag.detail_readings.DETAIL_READINGS` declares how NVML answers each: a reading is its
field here and its row there.
"""

from __future__ import annotations

import msgspec

from gpudiag.values import Bar1, Reading, not_recorded

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
    max_customer_boost_graphics: Reading[int] = msgspec.field(default_factory=not_recorded)  # MHz
    auto_boost: Reading[bool] = msgspec.field(default_factory=not_recorded)
    auto_boost_default: Reading[bool] = msgspec.field(default_factory=not_recorded)
    # Each supported memory clock (MHz) with the graphics clocks (MHz) it allows, fastest first.
    supported: Reading[tuple[tuple[int, tuple[int, ...]], ...]] = msgspec.field(default_factory=not_recorded)


class PowerDetail(msgspec.Struct, frozen=True):
    management: Reading[bool]
    average_w: Reading[float]  # over the last second
    instant_w: Reading[float]
    requested_limit_w: Reading[float]  # what the administrator set (nvidia-smi's power.limit)
    default_limit_w: Reading[float]
    min_limit_w: Reading[float]
    max_limit_w: Reading[float]
    energy_mj: Reading[int]  # millijoules since the driver loaded
    # The memory's and the whole module's readings (field values of scope MEMORY and MODULE).
    memory_average_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    memory_instant_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_average_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_instant_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_current_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_requested_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_default_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_min_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_max_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    smoothing: Reading[bool] = msgspec.field(default_factory=not_recorded)  # power smoothing enabled
    # Workload power profiles (NVML_POWER_PROFILE_* ids) requested and enforced.
    profiles_requested: Reading[tuple[int, ...]] = msgspec.field(default_factory=not_recorded)
    profiles_enforced: Reading[tuple[int, ...]] = msgspec.field(default_factory=not_recorded)


class Temperatures(msgspec.Struct, frozen=True):
    memory_c: Reading[int]
    margin_c: Reading[int]  # degrees below the slowdown limit (nvidia-smi's temperature.gpu.tlimit)
    gpu_max_c: Reading[int]  # the most the GPU is designed to run at
    memory_max_c: Reading[int]
    # Each limit as degrees from the T.Limit (driver 580's -q: negative beyond it, 0 at it).
    shutdown_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    slowdown_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    gpu_max_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    memory_max_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    target_c: Reading[int] = msgspec.field(default_factory=not_recorded)  # the GPU target temperature set
    target_min_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    target_max_c: Reading[int] = msgspec.field(default_factory=not_recorded)


class PlatformInfo(msgspec.Struct, frozen=True):
    """Where the GPU sits in its system (nvmlDeviceGetPlatformInfo, nvmlPlatformInfo_v2_t)."""

    chassis_serial_number: str
    slot_number: int
    tray_index: int
    host_id: int
    peer_type: int  # NVML's code (see PEER_TYPES)
    module_id: int
    fabric_guid: str  # ibGuid, its 16 bytes in hex


class Fabric(msgspec.Struct, frozen=True):
    """The GPU's NVLink fabric registration (nvmlDeviceGetGpuFabricInfoV, nvmlGpuFabricInfo_v3_t)."""

    state: int  # nvmlGpuFabricState_t: 0 not supported, 1 not started, 2 in progress, 3 completed
    status: int  # the registration's nvmlReturn_t
    clique_id: int
    cluster_uuid: str
    health_mask: int  # NVML_GPU_FABRIC_HEALTH_MASK_* fields
    health_summary: int  # NVML_GPU_FABRIC_HEALTH_SUMMARY_*


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
    architecture: Reading[str] = msgspec.field(default_factory=not_recorded)  # "Hopper"
    brand: Reading[str] = msgspec.field(default_factory=not_recorded)  # "NVIDIA", "GeForce RTX"
    driver_model_current: Reading[str] = msgspec.field(default_factory=not_recorded)  # Windows only
    driver_model_pending: Reading[str] = msgspec.field(default_factory=not_recorded)
    pdi: Reading[int] = msgspec.field(default_factory=not_recorded)  # the GPU's per-device identifier
    multi_gpu_board: Reading[bool] = msgspec.field(default_factory=not_recorded)
    platform: Reading[PlatformInfo] = msgspec.field(default_factory=not_recorded)
    bbx_flush: Reading[tuple[int, int]] = msgspec.field(default_factory=not_recorded)  # (time, duration µs)
    gom_current: Reading[str] = msgspec.field(default_factory=not_recorded)  # GPU operation mode
    gom_pending: Reading[str] = msgspec.field(default_factory=not_recorded)
    virtualization_mode: Reading[str] = msgspec.field(default_factory=not_recorded)
    host_vgpu_mode: Reading[str] = msgspec.field(default_factory=not_recorded)
    vgpu_heterogeneous_mode: Reading[bool] = msgspec.field(default_factory=not_recorded)
    egm: Reading[bool] = msgspec.field(default_factory=not_recorded)  # extended GPU memory capability
    fabric: Reading[Fabric] = msgspec.field(default_factory=not_recorded)


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
    channel_repair_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)
    tpc_repair_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)
    unrepairable_memory: Reading[bool] = msgspec.field(default_factory=not_recorded)
    dram_encryption_current: Reading[bool] = msgspec.field(default_factory=not_recorded)
    dram_encryption_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)


class PcieDetail(msgspec.Struct, frozen=True):
    tx_kbps: Reading[int]  # KB/s over the last 20 ms, as NVML samples it
    rx_kbps: Reading[int]
    replay_counter: Reading[int]
    replay_rollovers: Reading[int] = msgspec.field(default_factory=not_recorded)
    atomic_caps_outbound: Reading[int] = msgspec.field(default_factory=not_recorded)  # NVML_PCIE_ATOMICS_CAP_*
    atomic_caps_inbound: Reading[int] = msgspec.field(default_factory=not_recorded)
    # Bridge chips between the host and the GPU, as (type, firmware version).
    bridge_chips: Reading[tuple[tuple[str, int], ...]] = msgspec.field(default_factory=not_recorded)


class Codecs(msgspec.Struct, frozen=True):
    encoder_percent: Reading[int]
    decoder_percent: Reading[int]
    jpeg_percent: Reading[int]
    ofa_percent: Reading[int]
    encoder_sessions: Reading[int]
    encoder_average_fps: Reading[int]
    encoder_average_latency_us: Reading[int]
    fbc_sessions: Reading[int] = msgspec.field(default_factory=not_recorded)  # frame buffer capture
    fbc_average_fps: Reading[int] = msgspec.field(default_factory=not_recorded)
    fbc_average_latency_us: Reading[int] = msgspec.field(default_factory=not_recorded)


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
