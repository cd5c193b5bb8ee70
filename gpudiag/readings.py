"""NVML's vocabulary, declared once: the codes NVML answers with and what gpudiag calls them.

Each table here is the only definition of its codes; the probe decodes NVML's answers with it,
the fake NVML encodes the model back with it, and the renderers take their words from it. Pure
data over the model (it imports nothing else of gpudiag and no pynvml): every number is NVML's
own (``nvml.h``), named where pynvml names it.
"""

from __future__ import annotations

import msgspec

from gpudiag.model import ComputeMode


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

# nvmlIntNvLinkDeviceType_t.
NVLINK_REMOTE_TYPES = {0: "GPU", 1: "IBM NPU", 2: "switch", 255: "unknown"}

# NVML's "no instance id" (gpuInstanceId, computeInstanceId) for a process on a GPU without MIG.
NO_INSTANCE = 0xFFFFFFFF

# Field ids (nvmlDeviceGetFieldValues) gpudiag reads, as pynvml names them (NVML_FI_DEV_*).
FI_MEMORY_TEMP = 82
FI_NVLINK_GET_SPEED = 164
FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186
FI_REMAPPED_COR_INACTIVE = 301
FI_REMAPPED_UNC_INACTIVE = 302
