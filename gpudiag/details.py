"""The detail facts of a GPU that `nvidia-smi -q` shows beyond its summary table, and their readings.

Kept apart from :mod:`gpudiag.model` so that plain `gpudiag list` never pays for creating
these classes: they load only when a command reads, shows or replays details. Frozen msgspec
Structs like the model's (a frozen dataclass costs ~1 ms at import). Every value is a
:class:`~gpudiag.values.Reading`, so a GPU that lacks one says why. :data:`DETAIL_READINGS`
declares how NVML answers each (see :mod:`gpudiag.readings`): a reading is its field here and
its row there.
"""

from __future__ import annotations

import ctypes
import uuid
from typing import Any

import msgspec

from gpudiag.readings import (
    BOOL,
    CLOCK_EVENTS,
    FI_MEMORY_TEMP,
    FI_PCIE_ATOMICS_INBOUND,
    FI_PCIE_ATOMICS_OUTBOUND,
    FI_PCIE_REPLAY_ROLLOVER,
    FI_POWER_AVERAGE,
    FI_POWER_CURRENT_LIMIT,
    FI_POWER_DEFAULT_LIMIT,
    FI_POWER_INSTANT,
    FI_POWER_MAX_LIMIT,
    FI_POWER_MIN_LIMIT,
    FI_POWER_REQUESTED_LIMIT,
    FI_POWER_SMOOTHING_ENABLED,
    FI_REMAPPED_COR_INACTIVE,
    FI_REMAPPED_UNC_INACTIVE,
    FI_TEMPERATURE_GPU_MAX_TLIMIT,
    FI_TEMPERATURE_MEM_MAX_TLIMIT,
    FI_TEMPERATURE_SHUTDOWN_TLIMIT,
    FI_TEMPERATURE_SLOWDOWN_TLIMIT,
    MILLIWATTS,
    NS_AS_US,
    POWER_SCOPE_MEMORY,
    POWER_SCOPE_MODULE,
    TEXT,
    Codec,
    Spec,
    text,
)
from gpudiag.values import Bar1, FactGroup, Reading, not_recorded

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


# --- how NVML answers each detail reading (gpudiag.readings.Spec rows) -----------------------

BAR1 = Codec(
    lambda b: Bar1(int(b.bar1Total), int(b.bar1Used), int(b.bar1Free)),
    lambda b: {"bar1Total": b.total_bytes, "bar1Used": b.used_bytes, "bar1Free": b.free_bytes},
)
ROW_REMAP_HISTOGRAM = Codec(
    lambda r: RowRemapHistogram(int(r.max), int(r.high), int(r.partial), int(r.low), int(r.none)),
    lambda h: {"max": h.max, "high": h.high, "partial": h.partial, "low": h.low, "none": h.none},
)
PROTECTED_MEMORY = Codec(
    lambda m: (int(m.total), int(m.used), int(m.free)),
    lambda t: {"total": t[0], "used": t[1], "free": t[2]},
)
ADDRESSES = Codec(lambda pages: tuple(int(page) for page in pages), list)
# nvmlDeviceArchitecture_t by NVML's names (NVML_DEVICE_ARCH_*: 9 is "Hopper" in the H100's nvidia-smi -q);
# another code as its number.
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
ARCHITECTURE = Codec(
    lambda code: ARCHITECTURES.get(int(code), str(int(code))),
    lambda name: next((code for code, known in ARCHITECTURES.items() if known == name), None) or int(name),
)


def _named(names: dict[int, str]) -> Codec:
    """An NVML enumeration by nvidia-smi's names (another code as its number), and back."""
    codes = {name: code for code, name in names.items()}
    return Codec(lambda code: names.get(int(code), str(int(code))), lambda name: codes.get(name) or int(name))


# nvmlBrandType_t (NVML_BRAND_*), as nvidia-smi's Product Brand: 14 is "NVIDIA" on the captured H100.
BRAND = _named(
    {
        0: "Unknown",
        1: "Quadro",
        2: "Tesla",
        3: "NVS",
        4: "Grid",
        5: "GeForce",
        6: "Titan",
        7: "NVIDIA Virtual Applications",
        8: "NVIDIA Virtual PC",
        9: "NVIDIA Virtual Compute Server",
        10: "NVIDIA RTX Virtual Workstation",
        11: "NVIDIA Cloud Gaming",
        12: "Quadro RTX",
        13: "NVIDIA RTX",
        14: "NVIDIA",
        15: "GeForce RTX",
        16: "Titan RTX",
    }
)
DRIVER_MODEL = _named({0: "WDDM", 1: "TCC", 2: "MCDM"})  # nvmlDriverModel_t: Windows only
GPU_OPERATION_MODE = _named({0: "All On", 1: "Compute", 2: "Low Double Precision", 3: "All Off"})
# nvmlGpuVirtualizationMode_t: 1 is "Pass-Through" on the captured H100 (a VM's GPU).
VIRTUALIZATION_MODE = _named({0: "None", 1: "Pass-Through", 2: "VGPU", 3: "Host VGPU", 4: "Host VSGA"})
HOST_VGPU_MODE = _named({0: "Non SR-IOV", 1: "SR-IOV"})
BRIDGE_TYPES = {0: "PLX", 1: "BR04"}  # nvmlBridgeChipType_t
PAIR = Codec(lambda p: (int(p[0]), int(p[1])), list)


def _byte(value: Any) -> int:
    """A ``c_char`` member as its number: ctypes reads one as ``bytes`` (``b"\\x00"``), nvidia-ml-py
    13's structures as ``str`` (``"\\x00"``, the H200's capture); an integer as it is."""
    if isinstance(value, bytes | bytearray):
        return value[0] if value else 0
    if isinstance(value, str):
        if len(value) > 1:
            raise ValueError(f"not one byte: {value!r}")
        return ord(value) if value else 0
    return int(value)


def _raw(struct: Any, member: str, size: int) -> bytes:
    """A ``c_char`` array member's bytes, NULs included (reading it as an attribute stops at one)."""
    return ctypes.string_at(ctypes.addressof(struct) + getattr(type(struct), member).offset, size)


PLATFORM = Codec(
    lambda s: PlatformInfo(
        chassis_serial_number=text(s.chassisSerialNumber),
        slot_number=_byte(s.slotNumber),
        tray_index=_byte(s.trayIndex),
        host_id=_byte(s.hostId),
        peer_type=_byte(s.peerType),
        module_id=_byte(s.moduleId),
        fabric_guid="0x" + _raw(s, "ibGuid", 16).hex(),
    ),
    lambda p: {
        "chassisSerialNumber": p.chassis_serial_number.encode(),
        "slotNumber": bytes([p.slot_number]),
        "trayIndex": bytes([p.tray_index]),
        "hostId": bytes([p.host_id]),
        "peerType": bytes([p.peer_type]),
        "moduleId": bytes([p.module_id]),
        "ibGuid": bytes.fromhex(p.fabric_guid[2:]),
    },
)
FABRIC = Codec(
    lambda s: Fabric(
        state=int(s.state),
        status=int(s.status),
        clique_id=int(s.cliqueId),
        cluster_uuid=str(uuid.UUID(bytes=bytes(list(s.clusterUuid)))),
        health_mask=int(s.healthMask),
        health_summary=int(getattr(s, "healthSummary", 0)),
    ),
    lambda f: {
        "state": f.state,
        "status": f.status,
        "cliqueId": f.clique_id,
        "clusterUuid": list(uuid.UUID(f.cluster_uuid).bytes),
        "healthMask": f.health_mask,
        "healthSummary": f.health_summary,
    },
)
EGM = Codec(lambda mask: bool(int(mask) & 0x1), lambda on: int(bool(on)))  # NVML_DEV_CAP_EGM: bit 0
PROFILES = Codec(  # a nvmlMask255_t as the profile ids it sets, and back
    lambda m: tuple(i for i in range(255) if int(m.mask[i // 32]) >> (i % 32) & 1),
    lambda ids: {"mask": [sum(1 << (i % 32) for i in ids if i // 32 == word) for word in range(8)]},
)
BRIDGES = Codec(
    lambda h: tuple(
        (BRIDGE_TYPES.get(int(c.type), str(int(c.type))), int(c.fwVersion))
        for c in list(h.bridgeChipInfo)[: int(h.bridgeCount)]
    ),
    lambda chips: {
        "bridgeCount": len(chips),
        "bridgeChipInfo": [
            {"type": next((k for k, v in BRIDGE_TYPES.items() if v == kind), 0), "fwVersion": fw} for kind, fw in chips
        ],
    },
)


def _detail(key: str, **kw: Any) -> Spec:
    """A detail row: read with the details (fact group DETAILS); the fake answers a MIG device's
    handle with its GPU's details."""
    return Spec(key=f"details.{key}", group=FactGroup.DETAILS, whole_gpu=False, **kw)


def _clock_rows(kind: str, call: str) -> list[Spec]:
    return [
        _detail(
            f"clocks.{kind}.{clock}",
            call=call,
            args=(f"NVML_CLOCK_{nvml}",),
            unit="MHz",
        )
        for clock, nvml in (("graphics", "GRAPHICS"), ("sm", "SM"), ("memory", "MEM"), ("video", "VIDEO"))
    ]


# In the order the probe asks NVML. The field values of every row with a ``field`` are read first, in
# one nvmlDeviceGetFieldValues call.
DETAIL_READINGS: tuple[Spec, ...] = (
    _detail(
        "temperatures.memory_c",
        field=FI_MEMORY_TEMP,
        unit="C",
    ),
    _detail(
        "power.average_w",  # over the last second
        field=FI_POWER_AVERAGE,
        codec=MILLIWATTS,
        unit="W",
    ),
    _detail(
        "power.instant_w",
        field=FI_POWER_INSTANT,
        codec=MILLIWATTS,
        unit="W",
    ),
    *(
        _detail(
            f"clocks.event_reason_counters_us[{event.query}]",
            field=event.counter_field,
            value_type=3,
            codec=NS_AS_US,
            unit="us",
        )
        for event in CLOCK_EVENTS
        if event.counter_field
    ),
    _detail(
        "memory_health.remapped_inactive_correctable",
        field=FI_REMAPPED_COR_INACTIVE,
    ),
    _detail(
        "memory_health.remapped_inactive_uncorrectable",
        field=FI_REMAPPED_UNC_INACTIVE,
    ),
    _detail(
        "clocks.event_reasons_supported",
        call="nvmlDeviceGetSupportedClocksEventReasons",
        fallback="nvmlDeviceGetSupportedClocksThrottleReasons",  # drivers before R535
    ),
    *_clock_rows("current", "nvmlDeviceGetClockInfo"),
    *_clock_rows("max", "nvmlDeviceGetMaxClockInfo"),
    *_clock_rows("applications", "nvmlDeviceGetApplicationsClock"),
    *_clock_rows("default_applications", "nvmlDeviceGetDefaultApplicationsClock"),
    *(
        _detail(
            f"power.{which}_limit_w",
            call="nvmlDeviceGetPowerManagementLimitConstraints",
            pick=index,
            codec=MILLIWATTS,
            unit="W",
        )
        for index, which in ((0, "min"), (1, "max"))
    ),
    _detail(
        "power.management",
        call="nvmlDeviceGetPowerManagementMode",
        codec=BOOL,
    ),
    _detail(
        "power.requested_limit_w",  # what the administrator set (nvidia-smi's power.limit)
        call="nvmlDeviceGetPowerManagementLimit",
        codec=MILLIWATTS,
        unit="W",
    ),
    _detail(
        "power.default_limit_w",
        call="nvmlDeviceGetPowerManagementDefaultLimit",
        codec=MILLIWATTS,
        unit="W",
    ),
    _detail(
        "power.energy_mj",  # millijoules since the driver loaded
        call="nvmlDeviceGetTotalEnergyConsumption",
        unit="J",
    ),
    _detail(
        "temperatures.margin_c",
        call="nvmlDeviceGetMarginTemperature",
        unit="C",
    ),
    _detail(
        "temperatures.gpu_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_GPU_MAX",),
        unit="C",
    ),
    _detail(
        "temperatures.memory_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_MEM_MAX",),
        unit="C",
    ),
    # The PCI ids and class codes in one call (nvmlDeviceGetPciInfoExt, a struct by reference); drivers
    # before R550: the ids from nvmlDeviceGetPciInfo, without the class codes.
    *(
        _detail(
            f"identity.pci_{name}",
            call="nvmlDeviceGetPciInfoExt",
            pick=member,
            custom=True,
        )
        for name, member in (
            ("domain", "domain"),
            ("bus", "bus"),
            ("device", "device"),
            ("device_id", "pciDeviceId"),  # e.g. 0x233010DE
            ("subsystem_id", "pciSubSystemId"),
            ("base_class", "baseClass"),  # 0x3: display controller
            ("sub_class", "subClass"),
        )
    ),
    *(
        _detail(
            f"identity.gsp_mode_{which}",
            call="nvmlDeviceGetGspFirmwareMode",
            pick=index,
            codec=BOOL,
        )
        for index, which in ((0, "current"), (1, "default"))
    ),
    _detail(
        "identity.serial",
        call="nvmlDeviceGetSerial",
        codec=TEXT,
    ),
    _detail(
        "identity.vbios_version",
        call="nvmlDeviceGetVbiosVersion",
        codec=TEXT,
    ),
    _detail(
        "identity.board_part_number",
        call="nvmlDeviceGetBoardPartNumber",
        codec=TEXT,
    ),
    _detail("identity.board_id", call="nvmlDeviceGetBoardId"),
    _detail(
        "identity.module_id",
        call="nvmlDeviceGetModuleId",
    ),
    _detail(
        "identity.inforom_image",
        call="nvmlDeviceGetInforomImageVersion",
        codec=TEXT,
    ),
    *(
        _detail(
            f"identity.inforom_{name}",
            call="nvmlDeviceGetInforomVersion",
            args=(f"NVML_INFOROM_{nvml}",),
            codec=TEXT,
        )
        for name, nvml in (("oem", "OEM"), ("ecc", "ECC"), ("power", "POWER"))
    ),
    _detail("identity.inforom_checksum", call="nvmlDeviceGetInforomConfigurationChecksum"),
    _detail("identity.architecture", call="nvmlDeviceGetArchitecture", codec=ARCHITECTURE),
    _detail(
        "identity.gsp_firmware_version",
        call="nvmlDeviceGetGspFirmwareVersion",
        codec=TEXT,
    ),
    _detail(
        "identity.display_mode",
        call="nvmlDeviceGetDisplayMode",
        codec=BOOL,
    ),
    _detail(
        "identity.display_active",
        call="nvmlDeviceGetDisplayActive",
        codec=BOOL,
    ),
    _detail(
        "identity.accounting_mode",
        call="nvmlDeviceGetAccountingMode",
        codec=BOOL,
    ),
    _detail(
        "identity.accounting_buffer_size",
        call="nvmlDeviceGetAccountingBufferSize",
    ),
    _detail(
        "identity.addressing_mode",  # 0 none, 1 HMM, 2 ATS
        call="nvmlDeviceGetAddressingMode",
    ),
    _detail(
        "identity.c2c_enabled",
        call="nvmlDeviceGetC2cModeInfoV",
        pick="isC2cEnabled",
        codec=BOOL,
    ),
    _detail(
        "identity.protected_memory_bytes",  # confidential computing: (total, used, free)
        call="nvmlDeviceGetConfComputeProtectedMemoryUsage",
        codec=PROTECTED_MEMORY,
    ),
    _detail(
        "memory_health.ecc_by_location",  # 4 counters at each of ECC_LOCATIONS
        call="nvmlDeviceGetMemoryErrorCounter",
        custom=True,
    ),
    _detail(
        "memory_health.sram",  # a struct by reference
        call="nvmlDeviceGetSramEccErrorStatus",
        custom=True,
    ),
    _detail(
        "memory_health.row_remap_histogram",
        call="nvmlDeviceGetRowRemapperHistogram",
        codec=ROW_REMAP_HISTOGRAM,
    ),
    *(
        _detail(
            f"memory_health.retired_{kind}_addresses",
            call="nvmlDeviceGetRetiredPages",
            args=(f"NVML_PAGE_RETIREMENT_CAUSE_{cause}",),
            codec=ADDRESSES,
        )
        for kind, cause in (("single_bit", "MULTIPLE_SINGLE_BIT_ECC_ERRORS"), ("double_bit", "DOUBLE_BIT_ECC_ERROR"))
    ),
    _detail("bar1", call="nvmlDeviceGetBAR1MemoryInfo", codec=BAR1),
    *(
        _detail(
            f"pcie.{direction}_kbps",  # KB/s over the last 20 ms, as NVML samples it
            call="nvmlDeviceGetPcieThroughput",
            args=(f"NVML_PCIE_UTIL_{direction.upper()}_BYTES",),
            unit="KB/s",
        )
        for direction in ("tx", "rx")
    ),
    _detail(
        "pcie.replay_counter",
        call="nvmlDeviceGetPcieReplayCounter",
    ),
    *(
        _detail(
            f"codecs.encoder_{name}",
            call="nvmlDeviceGetEncoderStats",
            pick=index,
        )
        for index, name in ((0, "sessions"), (1, "average_fps"), (2, "average_latency_us"))
    ),
    *(
        _detail(
            f"codecs.{name}_percent",
            call=call,
            pick=0,  # (percent, sampling period in µs)
            unit="%",
        )
        for name, call in (
            ("encoder", "nvmlDeviceGetEncoderUtilization"),
            ("decoder", "nvmlDeviceGetDecoderUtilization"),
            ("jpeg", "nvmlDeviceGetJpgUtilization"),
            ("ofa", "nvmlDeviceGetOfaUtilization"),
        )
    ),
    _detail("nvlinks", call="nvmlDeviceGetNvLinkState", custom=True),  # each link, with FactGroup.LINKS
    _detail("affinity", call="nvmlDeviceGetCpuAffinity", custom=True),  # topology to each peer, with LINKS
    _detail("process_load", call="nvmlDeviceGetProcessUtilization", custom=True),
    # --- nvidia-smi -q parity: driver 580's remaining labels, each from its NVML call ------------------
    _detail("identity.brand", call="nvmlDeviceGetBrand", codec=BRAND),
    *(
        _detail(
            f"identity.driver_model_{which}",
            call="nvmlDeviceGetDriverModel_v2",
            fallback="nvmlDeviceGetDriverModel",
            pick=index,
            codec=DRIVER_MODEL,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    _detail("identity.pdi", call="nvmlDeviceGetPdi"),
    _detail("identity.multi_gpu_board", call="nvmlDeviceGetMultiGpuBoard", codec=BOOL),
    _detail(
        "identity.platform",  # a struct by reference
        call="nvmlDeviceGetPlatformInfo",
        struct="c_nvmlPlatformInfo_v2_t",
        codec=PLATFORM,
    ),
    _detail(
        "identity.bbx_flush",  # (timestamp, duration in µs); NOT_READY until the InfoROM BBX was first flushed
        call="nvmlDeviceGetLastBBXFlushTime",
        codec=PAIR,
    ),
    *(
        _detail(
            f"identity.gom_{which}",
            call="nvmlDeviceGetGpuOperationMode",
            pick=index,
            codec=GPU_OPERATION_MODE,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    _detail(
        "identity.virtualization_mode",
        call="nvmlDeviceGetVirtualizationMode",
        codec=VIRTUALIZATION_MODE,
    ),
    _detail(
        "identity.host_vgpu_mode",
        call="nvmlDeviceGetHostVgpuMode",
        codec=HOST_VGPU_MODE,
    ),
    _detail(
        "identity.vgpu_heterogeneous_mode",
        call="nvmlDeviceGetVgpuHeterogeneousMode",
        codec=BOOL,
    ),
    _detail(
        "identity.egm",
        call="nvmlDeviceGetCapabilities",
        struct="c_nvmlDeviceCapabilities_v1_t",
        pick="capMask",
        codec=EGM,
    ),
    _detail(
        "identity.fabric",
        call="nvmlDeviceGetGpuFabricInfoV",
        struct="c_nvmlGpuFabricInfo_v3_t",
        codec=FABRIC,
    ),
    _detail(
        "pcie.replay_rollovers",
        field=FI_PCIE_REPLAY_ROLLOVER,
    ),
    *(
        _detail(
            f"pcie.atomic_caps_{direction}",
            field=field,
        )
        for direction, field in (("outbound", FI_PCIE_ATOMICS_OUTBOUND), ("inbound", FI_PCIE_ATOMICS_INBOUND))
    ),
    _detail(
        "pcie.bridge_chips",
        call="nvmlDeviceGetBridgeChipInfo",
        codec=BRIDGES,
    ),
    *(
        _detail(f"codecs.fbc_{name}", call="nvmlDeviceGetFBCStats", pick=member)
        for name, member in (
            ("sessions", "sessionsCount"),
            ("average_fps", "averageFPS"),
            ("average_latency_us", "averageLatency"),
        )
    ),
    *(
        _detail(
            f"memory_health.dram_encryption_{which}",
            call="nvmlDeviceGetDramEncryptionMode",
            pick=index,
            codec=BOOL,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    *(
        _detail(
            f"memory_health.{name}_repair_pending",
            call="nvmlDeviceGetRepairStatus",
            pick=index,
            codec=BOOL,
        )
        for index, name in ((0, "channel"), (1, "tpc"))
    ),
    _detail(
        "memory_health.unrepairable_memory",
        call="nvmlDeviceGetUnrepairableMemoryFlag_v1",
        codec=BOOL,
    ),
    *(
        _detail(
            f"temperatures.{name}_tlimit_c",  # signed: degrees beyond (negative) or below the T.Limit
            field=field,
            value_type=5,
            unit="C",
        )
        for name, field in (
            ("shutdown", FI_TEMPERATURE_SHUTDOWN_TLIMIT),
            ("slowdown", FI_TEMPERATURE_SLOWDOWN_TLIMIT),
            ("gpu_max", FI_TEMPERATURE_GPU_MAX_TLIMIT),
            ("memory_max", FI_TEMPERATURE_MEM_MAX_TLIMIT),
        )
    ),
    *(
        _detail(
            f"temperatures.{name}",  # the target set with nvidia-smi -gtt, and the range it takes
            call="nvmlDeviceGetTemperatureThreshold",
            args=(f"NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_{threshold}",),
            unit="C",
        )
        for name, threshold in (("target_c", "CURR"), ("target_min_c", "MIN"), ("target_max_c", "MAX"))
    ),
    *(
        _detail(
            f"power.{scope_name}_{name}_w",
            field=field,
            scope=scope,
            codec=MILLIWATTS,
            unit="W",
        )
        for scope_name, scope, readings in (
            (
                "memory",
                POWER_SCOPE_MEMORY,
                (("average", FI_POWER_AVERAGE), ("instant", FI_POWER_INSTANT)),
            ),
            (
                "module",
                POWER_SCOPE_MODULE,
                (
                    ("average", FI_POWER_AVERAGE),
                    ("instant", FI_POWER_INSTANT),
                    ("current_limit", FI_POWER_CURRENT_LIMIT),
                    ("requested_limit", FI_POWER_REQUESTED_LIMIT),
                    ("default_limit", FI_POWER_DEFAULT_LIMIT),
                    ("min_limit", FI_POWER_MIN_LIMIT),
                    ("max_limit", FI_POWER_MAX_LIMIT),
                ),
            ),
        )
        for name, field in readings
    ),
    _detail("power.smoothing", field=FI_POWER_SMOOTHING_ENABLED, codec=BOOL),
    *(
        _detail(
            f"power.profiles_{which}",
            call="nvmlDeviceWorkloadPowerProfileGetCurrentProfiles",
            struct="c_nvmlWorkloadPowerProfileCurrentProfiles_v1_t",
            pick=f"{which}ProfilesMask",
            codec=PROFILES,
        )
        for which in ("requested", "enforced")
    ),
    _detail(
        "clocks.max_customer_boost_graphics",
        call="nvmlDeviceGetMaxCustomerBoostClock",
        args=("NVML_CLOCK_GRAPHICS",),
        unit="MHz",
    ),
    *(
        _detail(
            f"clocks.auto_boost{suffix}",
            call="nvmlDeviceGetAutoBoostedClocksEnabled",
            pick=index,
            codec=BOOL,
        )
        for index, suffix in ((0, ""), (1, "_default"))
    ),
    _detail("clocks.supported", call="nvmlDeviceGetSupportedMemoryClocks", custom=True),  # with each's graphics clocks
)
