"""The detail facts of a GPU that `nvidia-smi -q` shows beyond its summary table, and their readings.

Kept apart from :mod:`gpudiag.model` so that plain `gpudiag list` never pays for creating
these classes: they load only when a command reads, shows or replays details. Frozen msgspec
Structs like the model's (a frozen dataclass costs ~1 ms at import). Every value is a
:class:`~gpudiag.model.Reading`, so a GPU that lacks one says why. :data:`DETAIL_READINGS`
declares how NVML answers each (see :mod:`gpudiag.readings`): a reading is its field here and
its row there.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpudiag.model import FactGroup, Reading, not_recorded
from gpudiag.readings import (
    BOOL,
    CLOCK_EVENTS,
    FI_MEMORY_TEMP,
    FI_POWER_AVERAGE,
    FI_POWER_INSTANT,
    FI_REMAPPED_COR_INACTIVE,
    FI_REMAPPED_UNC_INACTIVE,
    MILLIWATTS,
    NS_AS_US,
    TEXT,
    Codec,
    Spec,
)

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
    architecture: Reading[str] = msgspec.field(default_factory=not_recorded)  # "Hopper"


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


def _detail(key: str, **kw: Any) -> Spec:
    """A detail row: read with the details (fact group DETAILS); the fake answers a MIG device's
    handle with its GPU's details."""
    return Spec(key=f"details.{key}", group=FactGroup.DETAILS, whole_gpu=False, **kw)


def _clock_rows(kind: str, call: str, heading: str, shown: tuple[str, ...], queries: dict[str, str]) -> list[Spec]:
    return [
        _detail(
            f"clocks.{kind}.{clock}",
            call=call,
            args=(f"NVML_CLOCK_{nvml}",),
            unit="MHz",
            query=queries.get(clock, ""),
            q=f"{heading}/{'SM' if clock == 'sm' else clock.title()}" if clock in shown else "",
            smi=f"clocks/{'mem' if clock == 'memory' else clock}_clock" if kind == "current" else "",
        )
        for clock, nvml in (("graphics", "GRAPHICS"), ("sm", "SM"), ("memory", "MEM"), ("video", "VIDEO"))
    ]


_ALL_CLOCKS = ("graphics", "sm", "memory", "video")
_APP_CLOCKS = ("graphics", "memory")

# In the order the probe asks NVML. The field values of every row with a ``field`` are read first, in
# one nvmlDeviceGetFieldValues call.
DETAIL_READINGS: tuple[Spec, ...] = (
    _detail(
        "temperatures.memory_c",
        field=FI_MEMORY_TEMP,
        unit="C",
        query="temperature.memory",
        q="Temperature/Memory Current Temp",
        smi="temperature/memory_temp",
    ),
    _detail(
        "power.average_w",  # over the last second
        field=FI_POWER_AVERAGE,
        codec=MILLIWATTS,
        unit="W",
        show="2f",
        query="power.draw.average",
        q="GPU Power Readings/Average Power Draw",
        smi="gpu_power_readings/average_power_draw",
    ),
    _detail(
        "power.instant_w",
        field=FI_POWER_INSTANT,
        codec=MILLIWATTS,
        unit="W",
        show="2f",
        query="power.draw.instant",
        q="GPU Power Readings/Instantaneous Power Draw",
        smi="gpu_power_readings/instant_power_draw",
    ),
    *(
        _detail(
            f"clocks.event_reason_counters_us[{event.query}]",
            field=event.counter_field,
            value_type=3,
            codec=NS_AS_US,
            unit="us",
            query=f"clocks_event_reasons_counters.{event.query}",
            q=f"Clocks Event Reasons Counters/{event.label}",
        )
        for event in CLOCK_EVENTS
        if event.counter_field
    ),
    _detail(
        "memory_health.remapped_inactive_correctable",
        field=FI_REMAPPED_COR_INACTIVE,
        query="remapped_rows.correctable_inactive",
    ),
    _detail(
        "memory_health.remapped_inactive_uncorrectable",
        field=FI_REMAPPED_UNC_INACTIVE,
        query="remapped_rows.uncorrectable_inactive",
    ),
    _detail(
        "clocks.event_reasons_supported",
        call="nvmlDeviceGetSupportedClocksEventReasons",
        fallback="nvmlDeviceGetSupportedClocksThrottleReasons",  # drivers before R535
        show="hex16",
        query="clocks_event_reasons.supported",
    ),
    *_clock_rows(
        "current",
        "nvmlDeviceGetClockInfo",
        "Clocks",
        _ALL_CLOCKS,
        {c: f"clocks.current.{c}" for c in _ALL_CLOCKS},
    ),
    *_clock_rows(
        "max",
        "nvmlDeviceGetMaxClockInfo",
        "Max Clocks",
        _ALL_CLOCKS,
        {c: f"clocks.max.{c}" for c in ("graphics", "sm", "memory")},
    ),
    *_clock_rows(
        "applications",
        "nvmlDeviceGetApplicationsClock",
        "Applications Clocks",
        _APP_CLOCKS,
        {c: f"clocks.applications.{c}" for c in _APP_CLOCKS},
    ),
    *_clock_rows(
        "default_applications",
        "nvmlDeviceGetDefaultApplicationsClock",
        "Default Applications Clocks",
        _APP_CLOCKS,
        {c: f"clocks.default_applications.{c}" for c in _APP_CLOCKS},
    ),
    *(
        _detail(
            f"power.{which}_limit_w",
            call="nvmlDeviceGetPowerManagementLimitConstraints",
            pick=index,
            codec=MILLIWATTS,
            unit="W",
            show="2f",
            query=f"power.{which}_limit",
            q=f"GPU Power Readings/{which.title()} Power Limit",
        )
        for index, which in ((0, "min"), (1, "max"))
    ),
    _detail(
        "power.management",
        call="nvmlDeviceGetPowerManagementMode",
        codec=BOOL,
        show="enabled",
        query="power.management",
        q="GPU Power Readings/Power Management",
    ),
    _detail(
        "power.requested_limit_w",  # what the administrator set (nvidia-smi's power.limit)
        call="nvmlDeviceGetPowerManagementLimit",
        codec=MILLIWATTS,
        unit="W",
        show="2f",
        query="power.limit",
        q="GPU Power Readings/Requested Power Limit",
    ),
    _detail(
        "power.default_limit_w",
        call="nvmlDeviceGetPowerManagementDefaultLimit",
        codec=MILLIWATTS,
        unit="W",
        show="2f",
        query="power.default_limit",
        q="GPU Power Readings/Default Power Limit",
    ),
    _detail(
        "power.energy_mj",  # millijoules since the driver loaded
        call="nvmlDeviceGetTotalEnergyConsumption",
        unit="J",
        q_show="thousandths",
        q="GPU Power Readings/Total Energy Consumption",
    ),
    _detail(
        "temperatures.margin_c",
        call="nvmlDeviceGetMarginTemperature",
        unit="C",
        query="temperature.gpu.tlimit",
        q="Temperature/GPU T.Limit Temp (margin)",
        smi="temperature/gpu_temp_tlimit",
    ),
    _detail(
        "temperatures.gpu_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_GPU_MAX",),
        unit="C",
        q="Temperature/GPU Max Operating Temp",
    ),
    _detail(
        "temperatures.memory_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_MEM_MAX",),
        unit="C",
        q="Temperature/Memory Max Operating Temp",
    ),
    # The PCI ids and class codes in one call (nvmlDeviceGetPciInfoExt, a struct by reference); drivers
    # before R550: the ids from nvmlDeviceGetPciInfo, without the class codes.
    *(
        _detail(
            f"identity.pci_{name}",
            call="nvmlDeviceGetPciInfoExt",
            pick=member,
            custom=True,
            show=show,
            query=query,
            q=f"PCI/{label}",
        )
        for name, member, show, query, label in (
            ("domain", "domain", "hex4", "pci.domain", "Domain"),
            ("bus", "bus", "hex2", "pci.bus", "Bus"),
            ("device", "device", "hex2", "pci.device", "Device"),
            ("device_id", "pciDeviceId", "hex8", "pci.device_id", "Device Id"),  # e.g. 0x233010DE
            ("subsystem_id", "pciSubSystemId", "hex8", "pci.sub_device_id", "Sub System Id"),
            ("base_class", "baseClass", "hex", "pci.baseClass", "Base Classcode"),  # 0x3: display controller
            ("sub_class", "subClass", "hex", "pci.subClass", "Sub Classcode"),
        )
    ),
    *(
        _detail(
            f"identity.gsp_mode_{which}",
            call="nvmlDeviceGetGspFirmwareMode",
            pick=index,
            codec=BOOL,
            show="enabled",
            query=f"gsp.mode.{which}",
            q=f"GSP Firmware Mode/{which.title()}",
        )
        for index, which in ((0, "current"), (1, "default"))
    ),
    _detail(
        "identity.serial",
        call="nvmlDeviceGetSerial",
        codec=TEXT,
        query="serial",
        q="Serial Number",
        smi="serial",
    ),
    _detail(
        "identity.vbios_version", call="nvmlDeviceGetVbiosVersion", codec=TEXT, query="vbios_version", q="VBIOS Version"
    ),
    _detail("identity.board_part_number", call="nvmlDeviceGetBoardPartNumber", codec=TEXT, q="Board Part Number"),
    _detail("identity.board_id", call="nvmlDeviceGetBoardId", q_show="pyhex", q="Board ID"),
    _detail(
        "identity.module_id",
        call="nvmlDeviceGetModuleId",
        query="platform.module_id",
        q="Module Id",
        smi="platformInfo/module_id",
    ),
    _detail(
        "identity.inforom_image",
        call="nvmlDeviceGetInforomImageVersion",
        codec=TEXT,
        query="inforom.img",
        q="Inforom Version/Image Version",
    ),
    *(
        _detail(
            f"identity.inforom_{name}",
            call="nvmlDeviceGetInforomVersion",
            args=(f"NVML_INFOROM_{nvml}",),
            codec=TEXT,
            query=f"inforom.{query}",
            q=f"Inforom Version/{label}",
        )
        for name, nvml, query, label in (
            ("oem", "OEM", "oem", "OEM Object"),
            ("ecc", "ECC", "ecc", "ECC Object"),
            ("power", "POWER", "pwr", "Power Management Object"),
        )
    ),
    _detail("identity.inforom_checksum", call="nvmlDeviceGetInforomConfigurationChecksum"),
    _detail("identity.architecture", call="nvmlDeviceGetArchitecture", codec=ARCHITECTURE, q="Product Architecture"),
    _detail(
        "identity.gsp_firmware_version",
        call="nvmlDeviceGetGspFirmwareVersion",
        codec=TEXT,
        q="GSP Firmware Version",
    ),
    _detail(
        "identity.display_mode",
        call="nvmlDeviceGetDisplayMode",
        codec=BOOL,
        show="enabled",
        query="display_mode=deprecated;display_attached=yes",
        q="Display Mode",
    ),
    _detail(
        "identity.display_active",
        call="nvmlDeviceGetDisplayActive",
        codec=BOOL,
        show="enabled",
        query="display_active",
        q="Display Active",
    ),
    _detail(
        "identity.accounting_mode",
        call="nvmlDeviceGetAccountingMode",
        codec=BOOL,
        show="enabled",
        query="accounting.mode",
        q="Accounting Mode",
    ),
    _detail(
        "identity.accounting_buffer_size",
        call="nvmlDeviceGetAccountingBufferSize",
        query="accounting.buffer_size",
        q="Accounting Mode Buffer Size",
    ),
    _detail(
        "identity.addressing_mode",  # 0 none, 1 HMM, 2 ATS
        call="nvmlDeviceGetAddressingMode",
        show="addressing",
        query="addressing_mode",
        q="Addressing Mode",
    ),
    _detail(
        "identity.c2c_enabled",
        call="nvmlDeviceGetC2cModeInfoV",
        pick="isC2cEnabled",
        codec=BOOL,
        show="enabled",
        query="c2c.mode",
        q="GPU C2C Mode",
    ),
    _detail(
        "identity.protected_memory_bytes",  # confidential computing: (total, used, free)
        call="nvmlDeviceGetConfComputeProtectedMemoryUsage",
        codec=PROTECTED_MEMORY,
        query="protected_memory.total:0=mib;protected_memory.used:1=mib;protected_memory.free:2=mib",
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
        query="ecc.errors.uncorrected.volatile.sram.parity:volatile_uncorrected_parity;"
        "ecc.errors.uncorrected.volatile.sram.secded:volatile_uncorrected_secded;"
        "ecc.errors.uncorrected.aggregate.sram.parity:aggregate_uncorrected_parity;"
        "ecc.errors.uncorrected.aggregate.sram.secded:aggregate_uncorrected_secded;"
        "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded:threshold_exceeded=yes;"
        "ecc.errors.uncorrected.aggregate.sram.l2:aggregate_l2;"
        "ecc.errors.uncorrected.aggregate.sram.sm:aggregate_sm;"
        "ecc.errors.uncorrected.aggregate.sram.mcu:aggregate_mcu;"
        "ecc.errors.uncorrected.aggregate.sram.pcie:aggregate_pcie;"
        "ecc.errors.uncorrected.aggregate.sram.other:aggregate_other",
    ),
    _detail(
        "memory_health.row_remap_histogram",
        call="nvmlDeviceGetRowRemapperHistogram",
        codec=ROW_REMAP_HISTOGRAM,
        query=";".join(f"remapped_rows.histogram.{a}:{a}" for a in ("max", "high", "partial", "low", "none")),
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
            q=f"PCI/{direction.title()} Throughput",
            smi=f"pci/{direction}_util",
        )
        for direction in ("tx", "rx")
    ),
    _detail(
        "pcie.replay_counter",
        call="nvmlDeviceGetPcieReplayCounter",
        q="PCI/Replays Since Reset",
        smi="pci/replay_counter",
    ),
    *(
        _detail(
            f"codecs.encoder_{name}",
            call="nvmlDeviceGetEncoderStats",
            pick=index,
            unit=unit,
            query=f"encoder.stats.{query}",
            q=f"Encoder Stats/{label}",
        )
        for index, name, query, label, unit in (
            (0, "sessions", "sessionCount", "Active Sessions", ""),
            (1, "average_fps", "averageFps", "Average FPS", ""),
            (2, "average_latency_us", "averageLatency", "Average Latency", "us"),
        )
    ),
    *(
        _detail(
            f"codecs.{name}_percent",
            call=call,
            pick=0,  # (percent, sampling period in µs)
            unit="%",
            query=f"utilization.{name}",
            q=f"Utilization/{label}",
        )
        for name, call, label in (
            ("encoder", "nvmlDeviceGetEncoderUtilization", "Encoder"),
            ("decoder", "nvmlDeviceGetDecoderUtilization", "Decoder"),
            ("jpeg", "nvmlDeviceGetJpgUtilization", "JPEG"),
            ("ofa", "nvmlDeviceGetOfaUtilization", "OFA"),
        )
    ),
    _detail("nvlinks", call="nvmlDeviceGetNvLinkState", custom=True),  # each link, with FactGroup.LINKS
    _detail("affinity", call="nvmlDeviceGetCpuAffinity", custom=True),  # topology to each peer, with LINKS
    _detail("process_load", call="nvmlDeviceGetProcessUtilization", custom=True),
)
