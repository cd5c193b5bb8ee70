"""Small formatting rules shared by the renderers (nvidia-smi's conventions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gpudiag.model import Reading
from gpudiag.readings import ADDRESSING_MODES, RECOVERY_ACTION_NAMES
from gpudiag.render.printable import printable
from gpudiag.units import mib

T = TypeVar("T")

NA = "N/A"


def text(reading: Reading[T], fmt: Callable[[T], str] = str) -> str:
    """The value formatted for a terminal (outside text escaped: render.printable), or ``N/A``
    (nvidia-smi's spelling) when it is missing."""
    return printable(fmt(reading.value)) if reading.value is not None else NA


def missing_note(reading: Reading[Any]) -> str:
    """Why a reading is missing, for footnotes: 'not supported', 'GPU lost', ... (a replay file's
    detail is outside text: escaped)."""
    if reading.reason is None:
        return ""
    return printable(reading.detail) if reading.detail else reading.reason.label


def mib_text(n_bytes: int) -> str:
    """``12815MiB``: whole MiB rounded as nvidia-smi rounds them (see :func:`gpudiag.units.mib`)."""
    return f"{mib(n_bytes)}MiB"


def percent_style(percent: float, warn: float = 70.0, high: float = 90.0) -> str:
    """Colour thresholds for memory/utilization bars and cells."""
    if percent >= high:
        return "red"
    if percent >= warn:
        return "yellow"
    return "green"


def temperature_style(celsius: int, slowdown: int | None) -> str:
    """Red within 5 °C of the GPU's own slowdown threshold, yellow from 80 °C."""
    if slowdown is not None and celsius >= slowdown - 5:
        return "red"
    if celsius >= 80:
        return "yellow"
    return ""


# Platform peer types by NVML's code: none is proven yet (nvidia-smi printed "Direct Connected" on an
# H100 whose code was not captured); an unknown code prints as its number.
PEER_TYPES: dict[int, str] = {}
# nvmlGpuFabricState_t and NVML_GPU_FABRIC_HEALTH_SUMMARY_*; 0 is "not supported": N/A.
FABRIC_STATES = {0: "N/A", 1: "Not Started", 2: "In Progress", 3: "Completed"}
FABRIC_SUMMARIES = {0: "N/A", 1: "Healthy", 2: "Unhealthy", 3: "Limited Capacity"}
_TRUE_FALSE = {1: "True", 2: "False"}
# NVML_POWER_PROFILE_* by their names.
POWER_PROFILES = {
    0: "Max P",
    1: "Max Q",
    2: "Compute",
    3: "Memory Bound",
    4: "Network",
    5: "Balanced",
    6: "LLM Inference",
    7: "LLM Training",
    8: "RBM",
    9: "DCPCIE",
    10: "HMMA Sparse",
    11: "HMMA Dense",
    12: "Sync Balanced",
    13: "HPC",
    14: "MIG",
}


def _health(shift: int, width: int, names: dict[int, str]) -> Callable[[Any], str]:
    """One field of a fabric health mask (NVML_GPU_FABRIC_HEALTH_MASK_*): 0 is "not supported"."""
    return lambda mask: names.get(int(mask) >> shift & width, "N/A")


def _hex(width: int) -> Callable[[Any], str]:
    return lambda v: f"0x{int(v):0{width}X}"


# How a reading's value is written, by the name its row gives in ``show`` / ``q_show``
# (gpudiag.readings.Spec): nvidia-smi's spellings. A unit, where the view has one, follows.
VALUE_FORMATS: dict[str, Callable[[Any], str]] = {
    "": str,
    "2f": lambda v: f"{v:.2f}",
    "enabled": lambda v: "Enabled" if v else "Disabled",
    "yes": lambda v: "Yes" if v else "No",
    "active": lambda v: "Active" if v else "Not Active",
    "valid": lambda v: "valid" if v else "invalid",
    "VALID": lambda v: "valid" if v else "INVALID",
    "hex": lambda v: f"0x{v:X}",
    "hex2": _hex(2),
    "hex4": _hex(4),
    "hex8": _hex(8),
    "hex16": _hex(16),
    "pyhex": hex,
    "pstate": lambda p: f"P{p}",
    "value": lambda e: str(e.value),  # an enum's value: "Default", "Exclusive_Process"
    "dotted": lambda v: f"{v[0]}.{v[1]}",  # a compute capability
    "times": lambda v: f"{v}x",  # a PCIe link width
    "mib": lambda b: str(mib(b)),  # bytes in whole MiB, rounded up as nvidia-smi rounds them
    "thousandths": lambda v: f"{v / 1000:.3f}",  # millijoules as joules
    "addressing": lambda v: ADDRESSING_MODES.get(v, str(v)),
    "recovery": lambda v: RECOVERY_ACTION_NAMES.get(v, str(v)),
    "recovery_q": lambda v: "None" if v == 0 else str(v),  # -q names no action only
    "deprecated": lambda v: "[Requested functionality has been deprecated]",
    "deprecated_q": lambda v: "Requested functionality has been deprecated",  # -q's Display Mode (driver 580)
    "hex16l": lambda v: f"0x{int(v):016x}",  # the GPU PDI
    "lower_enabled": lambda v: "enabled" if v else "disabled",  # -q's Capabilities
    "on": lambda v: "On" if v else "Off",  # -q's Clock Policy
    "peer_type": lambda v: PEER_TYPES.get(v, str(v)),
    "profiles": lambda ids: ", ".join(POWER_PROFILES.get(i, str(i)) for i in ids) or "None",
    "bridge_type": lambda chips: chips[0][0] if chips else "N/A",
    "bridge_firmware": lambda chips: f"0x{chips[0][1]:08X}" if chips else "N/A",
    "fabric_state": lambda v: FABRIC_STATES.get(v, str(v)),
    "fabric_status": lambda v: "Success" if v == 0 else f"NVML error {v}",
    "fabric_number": str,
    "fabric_uuid": str,
    "fabric_summary": lambda v: FABRIC_SUMMARIES.get(v, str(v)),
    "fabric_bandwidth": _health(0, 0x3, {1: "Degraded", 2: "Full"}),
    "fabric_route_recovery": _health(2, 0x3, _TRUE_FALSE),
    "fabric_route_unhealthy": _health(4, 0x3, _TRUE_FALSE),
    "fabric_access_timeout": _health(6, 0x3, _TRUE_FALSE),
    "fabric_configuration": _health(
        8,
        0xF,
        {
            1: "None",
            2: "Incorrect SysGUID",
            3: "Incorrect Chassis Serial Number",
            4: "No Partition",
            5: "Insufficient NVLinks",
            6: "Incompatible GPU Firmware",
            7: "Invalid Location",
            8: "GPU State Invalid",
        },
    ),
    "fabric_partition": _health(12, 0x3, _TRUE_FALSE),
}
