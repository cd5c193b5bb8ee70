"""What a reading's row says, and NVML's vocabulary, each defined once.

Modelled on DCGM's field table (``dcgm_fields.h``: one row per field with its id, type, unit,
short name and scope). A :class:`Spec` row is acquisition only: a reading's model field (its JSON
key), the NVML call that answers it (arguments, the older name tried when a driver lacks it,
whether it is asked once per session), how NVML's answer becomes the model's value and back
(:class:`Codec`), the fact group that reads it and the unit of its value. The rows themselves
stand beside the fields they fill: :data:`gpudiag.readings.GPU_READINGS` beside ``Gpu``, each
section's of ``nvidia-smi -q`` beside its Struct in :mod:`gpudiag.details`.

The vocabulary tables below are the only definition of NVML's codes: the probe decodes with them,
the fake encodes the model back with them, and the renderers take their words from them. Pure
data over the model's base (no other part of gpudiag, no pynvml): every number is NVML's own
(``nvml.h``), named where pynvml names it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import msgspec

from gpudiag.values import ComputeMode, FactGroup, RemappedRows, Utilization


class ClockEvent(msgspec.Struct, frozen=True):
    """One clock event reason (nvmlClocksEventReason*, "throttle reasons" before R535)."""

    bit: int
    name: str  # NVML's name, as gpudiag's checks and metrics say it: "HwThermalSlowdown"
    label: str  # nvidia-smi -q's line: "HW Thermal Slowdown"
    query: str  # --query-gpu's clocks_event_reasons.<query> (and the counter's name)
    counter_field: int = 0  # NVML_FI_DEV_CLOCKS_EVENT_REASON_*: time spent in it (ns); 0: none
    slowdown: bool = False  # slows a busy GPU down (throttling), rather than a state (idle, app clocks)


# In bit order: the order nvidia-smi -q lists them and the model keeps the counters in.
CLOCK_EVENTS: tuple[ClockEvent, ...] = (
    ClockEvent(0x1, "GpuIdle", "Idle", "gpu_idle"),
    ClockEvent(0x2, "ApplicationsClocksSetting", "Applications Clocks Setting", "applications_clocks_setting"),
    ClockEvent(0x4, "SwPowerCap", "SW Power Cap", "sw_power_cap", counter_field=74, slowdown=True),
    ClockEvent(0x8, "HwSlowdown", "HW Slowdown", "hw_slowdown", slowdown=True),
    ClockEvent(0x10, "SyncBoost", "Sync Boost", "sync_boost", counter_field=76),
    ClockEvent(
        0x20, "SwThermalSlowdown", "SW Thermal Slowdown", "sw_thermal_slowdown", counter_field=269, slowdown=True
    ),
    ClockEvent(
        0x40, "HwThermalSlowdown", "HW Thermal Slowdown", "hw_thermal_slowdown", counter_field=270, slowdown=True
    ),
    ClockEvent(
        0x80,
        "HwPowerBrakeSlowdown",
        "HW Power Brake Slowdown",
        "hw_power_brake_slowdown",
        counter_field=271,
        slowdown=True,
    ),
    ClockEvent(0x100, "DisplayClockSetting", "Display Clock Setting", "display_clock_setting"),
)
CLOCK_EVENT_NAMES: dict[int, str] = {event.bit: event.name for event in CLOCK_EVENTS}


def clock_event_bits(*names: str) -> int:
    """The mask of the clock events named (NVML's names): ``clock_event_bits("HwSlowdown")`` is 0x8."""
    by_name = {event.name: event.bit for event in CLOCK_EVENTS}
    mask = 0
    for name in names:
        mask |= by_name[name]
    return mask


# nvmlComputeMode_t.
COMPUTE_MODES: dict[int, ComputeMode] = {
    0: ComputeMode.DEFAULT,
    1: ComputeMode.EXCLUSIVE_THREAD,
    2: ComputeMode.PROHIBITED,
    3: ComputeMode.EXCLUSIVE_PROCESS,
}
COMPUTE_MODE_CODES: dict[ComputeMode, int] = {mode: code for code, mode in COMPUTE_MODES.items()}

# nvmlDeviceAddressingModeType_t, in nvidia-smi's words.
ADDRESSING_MODES = {0: "None", 1: "HMM", 2: "ATS"}

# NVML_GPU_RECOVERY_ACTION_* as nvidia-smi --query-gpu=gpu_recovery_action names them.
RECOVERY_ACTION_NAMES = {0: "None", 1: "Reset", 2: "Reboot", 3: "Drain P2P", 4: "Drain and Reset"}

# nvmlDeviceGetTopologyCommonAncestor's levels in `nvidia-smi topo -m`'s words.
TOPOLOGY_LEVELS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

# nvmlGpuP2PStatus_t in words (nvidia-smi topo -p2p r).
P2P_STATUS = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}
P2P_READ = 0  # NVML_P2P_CAPS_INDEX_READ (pynvml defines it as a one-item tuple)
P2P_NVLINK = 2  # NVML_P2P_CAPS_INDEX_NVLINK
P2P_WRITE = 1  # NVML_P2P_CAPS_INDEX_WRITE
P2P_ATOMICS = 3  # NVML_P2P_CAPS_INDEX_ATOMICS
P2P_PROP = 4  # NVML_P2P_CAPS_INDEX_PROP (also _PCI): P2P over PCIe
# nvmlGpuP2PStatus_t's words as `nvidia-smi topo -p2p` abbreviates them in its matrix and legend.
P2P_ABBREVIATIONS = {
    "OK": "OK",
    "chipset not supported": "CNS",
    "GPU not supported": "GNS",
    "IOH topology not supported": "TNS",
    "disabled by regkey": "DR",
    "not supported": "NS",
    "unknown": "U",
}

# nvmlIntNvLinkDeviceType_t.
NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBM NPU", 2: "switch", 255: "unknown"}

# NVML's "no instance id" (gpuInstanceId, computeInstanceId) for a process on a GPU without MIG.
NO_INSTANCE = 0xFFFFFFFF

# Field ids (nvmlDeviceGetFieldValues) gpudiag reads, as pynvml names them (NVML_FI_DEV_*).
FI_MEMORY_TEMP = 82
FI_GPU_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: NVML_GPU_RECOVERY_ACTION_*, 0 none needed
FI_NVLINK_GET_SPEED = 164
FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186
FI_REMAPPED_COR_INACTIVE = 301
FI_REMAPPED_UNC_INACTIVE = 302
FI_PCIE_REPLAY_ROLLOVER = 95
# The same counters as nvmlDeviceGetTotalEnergyConsumption and nvmlDeviceGetPcieReplayCounter, read
# with the exporter's other field values in its one call (the H200 answered both alike:
# docs/hardware/h200-driver580/nvml-getters-*.json), a driver round trip (~0.3 ms) less each.
FI_TOTAL_ENERGY_CONSUMPTION = 83
FI_PCIE_REPLAY_COUNTER = 94
FI_POWER_MIN_LIMIT = 187
FI_POWER_MAX_LIMIT = 188
FI_POWER_DEFAULT_LIMIT = 189
FI_POWER_CURRENT_LIMIT = 190
FI_POWER_REQUESTED_LIMIT = 192
FI_TEMPERATURE_SHUTDOWN_TLIMIT = 193  # signed: degrees from the T.Limit
FI_TEMPERATURE_SLOWDOWN_TLIMIT = 194
FI_TEMPERATURE_MEM_MAX_TLIMIT = 195
FI_TEMPERATURE_GPU_MAX_TLIMIT = 196
FI_PCIE_ATOMICS_OUTBOUND = 228
FI_PCIE_ATOMICS_INBOUND = 229
FI_POWER_SMOOTHING_ENABLED = 251
# A power field's scopeId (nvmlPowerScopeType_t); 0 is the GPU's own.
POWER_SCOPE_MODULE = 1
POWER_SCOPE_MEMORY = 2
# NVML_FI_DEV_PERF_POLICY_*: time (ns) each policy held the clocks down, by Violations' field names. 74 and
# 76 are also the SwPowerCap and SyncBoost clock-event counters (nvidia-ml-py names them both ways).
FI_PERF_POLICIES = (
    ("power", 74),
    ("thermal", 75),
    ("sync_boost", 76),
    ("board_limit", 77),
    ("low_utilization", 78),
    ("reliability", 79),
)
# Each NVLink's throughput counters (KiB since the driver loaded), read with the link as the scope, or
# with ALL_LINKS for their sum.
FI_NVLINK_THROUGHPUT_DATA_TX = 138
FI_NVLINK_THROUGHPUT_DATA_RX = 139
FI_NVLINK_THROUGHPUT_RAW_TX = 140
FI_NVLINK_THROUGHPUT_RAW_RX = 141
FI_PCIE_COUNT_TX_BYTES = 197  # bytes the GPU sent over PCIe (NVML: "value can be wrapped")
FI_PCIE_COUNT_RX_BYTES = 198
ALL_LINKS = 0xFFFFFFFF  # a field's scopeId (UINT_MAX) that sums every NVLink of the GPU

# NVML GPM metrics (NVML_GPM_METRIC_*, nvmlGpmMetricsGet) by the model.Profiling field each fills, with
# the factor from GPM's unit to the model's: percent stays percent, MiB/s becomes bytes/s (as DCGM
# converts them). DCGM's DCGM_FI_PROF_* fields read the same metrics on Hopper and newer
# (dcgm_fields.cpp, DcgmFieldIdToNvmlGpmMetricId).
MIB = 1024 * 1024
GPM_METRICS: tuple[tuple[str, int, int], ...] = (
    ("graphics_active_percent", 1, 1),  # NVML_GPM_METRIC_GRAPHICS_UTIL
    ("sm_active_percent", 2, 1),  # SM_UTIL
    ("sm_occupancy_percent", 3, 1),  # SM_OCCUPANCY
    ("tensor_active_percent", 5, 1),  # ANY_TENSOR_UTIL
    ("fp64_active_percent", 11, 1),  # FP64_UTIL (non-tensor)
    ("fp32_active_percent", 12, 1),  # FP32_UTIL
    ("fp16_active_percent", 13, 1),  # FP16_UTIL
    ("dram_active_percent", 10, 1),  # DRAM_BW_UTIL
    ("pcie_tx_bytes_per_s", 20, MIB),  # PCIE_TX_PER_SEC
    ("pcie_rx_bytes_per_s", 21, MIB),  # PCIE_RX_PER_SEC
    ("nvlink_tx_bytes_per_s", 61, MIB),  # NVLINK_TOTAL_TX_PER_SEC
    ("nvlink_rx_bytes_per_s", 60, MIB),  # NVLINK_TOTAL_RX_PER_SEC
)


# --- the declaration of a reading ---------------------------------------------------------


class Codec(msgspec.Struct, frozen=True):
    """NVML's raw answer (after the row's ``pick``) as the model's value, and back: ``encode`` is
    what the fake NVML answers for a value (a dict: the attributes of a struct)."""

    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]


def text(value: Any) -> str:
    """NVML's strings: bytes from older nvidia-ml-py, str from newer; anything else is not a string
    NVML gave (TypeError, which the probe's guard makes the reading's error)."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {type(value).__name__}")


def integer(value: Any) -> int:
    """An NVML number as pynvml gives it (an int, or a ctypes integer's value); a str, a float, None
    or a struct is not one (TypeError), where ``int()`` would read ``"7"`` or ``7.9``."""
    return operator.index(value)


def truth(value: Any) -> bool:
    """An NVML flag (an integer, 0 or not): a str, None or a struct is not one, where ``bool()``
    would call anything true."""
    return bool(operator.index(value))


def _flag(value: Any) -> int:
    return int(bool(value))


INT = Codec(integer, int)
BOOL = Codec(truth, _flag)
TEXT = Codec(text, str)
MILLIWATTS = Codec(lambda mw: round(int(mw) / 1000.0, 3), lambda w: round(float(w) * 1000))  # model: watts
NS_AS_US = Codec(lambda ns: int(ns) // 1000, lambda us: int(us) * 1000)  # NVML counts ns; nvidia-smi shows µs
MIG_ENABLED = Codec(lambda mode: integer(mode) == 1, _flag)  # NVML_DEVICE_MIG_ENABLE
COMPUTE_MODE = Codec(COMPUTE_MODES.__getitem__, COMPUTE_MODE_CODES.__getitem__)
CAPABILITY = Codec(lambda cc: (int(cc[0]), int(cc[1])), lambda cc: (int(cc[0]), int(cc[1])))
UTILIZATION = Codec(
    lambda u: Utilization(gpu_percent=int(u.gpu), memory_percent=int(u.memory)),
    lambda u: {"gpu": u.gpu_percent, "memory": u.memory_percent},
)
GRID_LICENSE_FEATURE_VGPU = 1  # NVML_GRID_LICENSE_FEATURE_CODE_VGPU


def _vgpu_license_status(features: Any) -> int:
    """DCGM's DCGM_FI_DEV_VGPU_LICENSE_STATUS from nvmlDeviceGetGridLicensableFeatures: 1 when the vGPU
    feature is licensed, 0 when it is not or the GPU has no vGPU licensing (bare metal)."""
    if not features.isGridLicenseSupported:
        return 0
    for feature in list(features.gridLicensableFeatures)[: int(features.licensableFeaturesCount)]:
        if int(feature.featureCode) == GRID_LICENSE_FEATURE_VGPU:
            return int(int(feature.featureState) > 0)
    return 0


def _grid_features(status: int) -> dict[str, Any]:
    """NVML's answer for a status: its array of NVML_GRID_LICENSE_FEATURE_MAX_COUNT features, zeroed
    where unused (as the H100 capture shows it)."""
    from types import SimpleNamespace

    features = [SimpleNamespace(featureCode=0, featureState=0) for _ in range(3)]
    if not status:
        return {"isGridLicenseSupported": 0, "licensableFeaturesCount": 0, "gridLicensableFeatures": features}
    features[0] = SimpleNamespace(featureCode=GRID_LICENSE_FEATURE_VGPU, featureState=1)
    return {"isGridLicenseSupported": 1, "licensableFeaturesCount": 1, "gridLicensableFeatures": features}


VGPU_LICENSE = Codec(_vgpu_license_status, _grid_features)
REMAPPED_ROWS = Codec(
    lambda r: RemappedRows(correctable=int(r[0]), uncorrectable=int(r[1]), pending=bool(r[2]), failure=bool(r[3])),
    lambda r: (r.correctable, r.uncorrectable, int(r.pending), int(r.failure)),
)


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    """One NVML reading, acquisition only: where it lives in the model, how NVML answers it, the
    fact group that reads it and the unit of its value. How an output shows it is that output's
    table, keyed by ``key`` (``query/reading_names.py``, ``render/details_lines.py``,
    ``export/gpu_families.py``)."""

    key: str  # the model field, dotted from the GPU ("pcie.gen_max", "details.power.average_w"): its JSON path
    call: str = ""  # the NVML function; with ``field``: nvmlDeviceGetFieldValues
    args: tuple[str | int, ...] = ()  # after the device handle: NVML constants by name (looked up on the module)
    field: int = 0  # an NVML field id, read in one nvmlDeviceGetFieldValues call with the group's others
    # with ``field``: its scopeId, where the field takes one (a link, ALL_LINKS for their sum; power:
    # NVML_POWER_SCOPE_GPU 0, MODULE 1, MEMORY 2)
    scope: int = 0
    value_type: int = 1  # the field's nvmlValueType_t: 1 unsigned int, 3 unsigned long long, 5 signed int
    # A struct the call fills by reference (nvidia-ml-py's class name, made with its version set):
    # the call is made as ``call(handle, *args, byref(struct))`` and ``pick`` reads the struct.
    struct: str = ""
    pick: int | str | None = None  # the part of the answer: an index of a list, an attribute of a struct
    codec: Codec = INT
    fallback: str = ""  # the same answer's older NVML name, called when the driver lacks ``call``
    fixed: bool = False  # cannot change while the driver stays loaded: asked once per NVML session
    group: FactGroup | None = None  # the fact group that reads it; None: identity, always read
    whole_gpu: bool = True  # the fake NVML: a MIG device's handle does not answer it (NOT_SUPPORTED)
    custom: bool = False  # read and faked by hand (several calls, a struct by reference): see above
    unit: str = ""  # the unit of its value as -q writes it after the value ("C", "W", "MHz", "%")
