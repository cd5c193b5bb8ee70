"""How NVML answers each detail reading of :mod:`gpudiag.details` (see :mod:`gpudiag.readings`): the
codecs, and one `Spec` row per reading in :data:`DETAIL_READINGS`. A data module: a reading is its field
there and its row here; it loads only where details are read, probed or replayed.
"""

from __future__ import annotations

import ctypes
import uuid
from typing import Any

from gpudiag.details import Fabric, PlatformInfo, RowRemapHistogram
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
from gpudiag.values import Bar1, FactGroup

# NVML's memory locations (nvmlMemoryLocation_t), in nvidia-smi's names.
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
