"""`nvidia-smi -q`'s identity of a GPU: serial, VBIOS, board, PCI ids, InfoROM, GSP, modes, platform and
fabric. Each reading is its field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import ctypes
import uuid
from typing import Any

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import BOOL, TEXT, Codec, Spec, text
from gpudiag.values import Reading, not_recorded


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


PROTECTED_MEMORY = Codec(
    lambda m: (int(m.total), int(m.used), int(m.free)),
    lambda t: {"total": t[0], "used": t[1], "free": t[2]},
)


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


ROWS: tuple[Spec, ...] = (
    # The PCI ids and class codes in one call (nvmlDeviceGetPciInfoExt, a struct by reference); drivers
    # before R550: the ids from nvmlDeviceGetPciInfo, without the class codes.
    *(
        detail(
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
        detail(
            f"identity.gsp_mode_{which}",
            call="nvmlDeviceGetGspFirmwareMode",
            pick=index,
            codec=BOOL,
        )
        for index, which in ((0, "current"), (1, "default"))
    ),
    detail(
        "identity.serial",
        call="nvmlDeviceGetSerial",
        codec=TEXT,
    ),
    detail(
        "identity.vbios_version",
        call="nvmlDeviceGetVbiosVersion",
        codec=TEXT,
    ),
    detail(
        "identity.board_part_number",
        call="nvmlDeviceGetBoardPartNumber",
        codec=TEXT,
    ),
    detail("identity.board_id", call="nvmlDeviceGetBoardId"),
    detail(
        "identity.module_id",
        call="nvmlDeviceGetModuleId",
    ),
    detail(
        "identity.inforom_image",
        call="nvmlDeviceGetInforomImageVersion",
        codec=TEXT,
    ),
    *(
        detail(
            f"identity.inforom_{name}",
            call="nvmlDeviceGetInforomVersion",
            args=(f"NVML_INFOROM_{nvml}",),
            codec=TEXT,
        )
        for name, nvml in (("oem", "OEM"), ("ecc", "ECC"), ("power", "POWER"))
    ),
    detail("identity.inforom_checksum", call="nvmlDeviceGetInforomConfigurationChecksum"),
    detail("identity.architecture", call="nvmlDeviceGetArchitecture", codec=ARCHITECTURE),
    detail(
        "identity.gsp_firmware_version",
        call="nvmlDeviceGetGspFirmwareVersion",
        codec=TEXT,
    ),
    detail(
        "identity.display_mode",
        call="nvmlDeviceGetDisplayMode",
        codec=BOOL,
    ),
    detail(
        "identity.display_active",
        call="nvmlDeviceGetDisplayActive",
        codec=BOOL,
    ),
    detail(
        "identity.accounting_mode",
        call="nvmlDeviceGetAccountingMode",
        codec=BOOL,
    ),
    detail(
        "identity.accounting_buffer_size",
        call="nvmlDeviceGetAccountingBufferSize",
    ),
    detail(
        "identity.addressing_mode",  # 0 none, 1 HMM, 2 ATS
        call="nvmlDeviceGetAddressingMode",
    ),
    detail(
        "identity.c2c_enabled",
        call="nvmlDeviceGetC2cModeInfoV",
        pick="isC2cEnabled",
        codec=BOOL,
    ),
    detail(
        "identity.protected_memory_bytes",  # confidential computing: (total, used, free)
        call="nvmlDeviceGetConfComputeProtectedMemoryUsage",
        codec=PROTECTED_MEMORY,
    ),
    detail("identity.brand", call="nvmlDeviceGetBrand", codec=BRAND),
    *(
        detail(
            f"identity.driver_model_{which}",
            call="nvmlDeviceGetDriverModel_v2",
            fallback="nvmlDeviceGetDriverModel",
            pick=index,
            codec=DRIVER_MODEL,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    detail("identity.pdi", call="nvmlDeviceGetPdi"),
    detail("identity.multi_gpu_board", call="nvmlDeviceGetMultiGpuBoard", codec=BOOL),
    detail(
        "identity.platform",  # a struct by reference
        call="nvmlDeviceGetPlatformInfo",
        struct="c_nvmlPlatformInfo_v2_t",
        codec=PLATFORM,
    ),
    detail(
        "identity.bbx_flush",  # (timestamp, duration in µs); NOT_READY until the InfoROM BBX was first flushed
        call="nvmlDeviceGetLastBBXFlushTime",
        codec=PAIR,
    ),
    *(
        detail(
            f"identity.gom_{which}",
            call="nvmlDeviceGetGpuOperationMode",
            pick=index,
            codec=GPU_OPERATION_MODE,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    detail(
        "identity.virtualization_mode",
        call="nvmlDeviceGetVirtualizationMode",
        codec=VIRTUALIZATION_MODE,
    ),
    detail(
        "identity.host_vgpu_mode",
        call="nvmlDeviceGetHostVgpuMode",
        codec=HOST_VGPU_MODE,
    ),
    detail(
        "identity.vgpu_heterogeneous_mode",
        call="nvmlDeviceGetVgpuHeterogeneousMode",
        codec=BOOL,
    ),
    detail(
        "identity.egm",
        call="nvmlDeviceGetCapabilities",
        struct="c_nvmlDeviceCapabilities_v1_t",
        pick="capMask",
        codec=EGM,
    ),
    detail(
        "identity.fabric",
        call="nvmlDeviceGetGpuFabricInfoV",
        struct="c_nvmlGpuFabricInfo_v3_t",
        codec=FABRIC,
    ),
)
