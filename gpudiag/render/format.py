"""Small formatting rules shared by the renderers (nvidia-smi's conventions)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from gpudiag.model import Reading, Reason
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


# Platform peer types (nvmlPlatformInfo_v2_t.peerType) by NVML's code, as --query-gpu names them: the
# H200's capture answered 0 where nvidia-smi printed "Direct Connected" (and the H100's nvidia-smi too);
# no other code is proven yet, so another prints as its number.
PEER_TYPES: dict[int, str] = {0: "Direct Connected"}
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


def _guid(guid: str) -> str:
    """The platform's fabric GUID as nvidia-smi prints it: 16 hex digits, the first 8 of its 16 bytes
    (both captured boards print 0x0000000000000000 for 16 zero bytes; which 8 bytes a set GUID shows is
    not proven by a capture yet)."""
    return guid[:18]


def timestamp(t: float) -> str:
    """nvidia-smi's CSV timestamp, in local time."""
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def _hex(width: int) -> Callable[[Any], str]:
    return lambda v: f"0x{int(v):0{width}X}"


# How a reading's value is written, by the name an output's table gives after ``=`` (the query
# package's names, render.details_lines): nvidia-smi's spellings. A unit, where the view has one, follows.
VALUE_FORMATS: dict[str, Callable[[Any], str]] = {
    "": str,
    "2f": lambda v: f"{v:.2f}",
    "int": lambda v: str(int(v)),  # a flag as a number: the list queries' 0 / 1
    "timestamp": timestamp,  # seconds since the epoch as --query's timestamp
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
    "guid": _guid,
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


# --- where nvidia-smi prints N/A for an answer NVML gave -------------------------------------------
# By a reading's key: when its whole value (a struct, before a line picks its part) says nvidia-smi
# shows none of it, and why. Derived from raw NVML answers beside nvidia-smi's output on both captured
# boards (docs/hardware: nvml-getters-*.json, nvidia-smi-q.txt, the --query-gpu fields); they apply
# to every board.
NaRule = tuple[Callable[[Any], bool], str]


def _no_fabric(fabric: Any) -> bool:
    return int(fabric.state) == 0  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED


def _no_position(platform: Any) -> bool:
    return not platform.chassis_serial_number and int(platform.fabric_guid, 16) == 0


_FABRIC: NaRule = (_no_fabric, "the GPU is in no NVLink fabric (fabric state: not supported)")
_NO_ATOMICS: NaRule = (lambda caps: int(caps) == 0, "no PCIe atomic operations reported")
# -q and -q -x: the H200 answered fabric state 0 (status 0, clique 0, a zero cluster UUID) and printed
# every Fabric line N/A; it answered atomic caps 0 (SUCCESS) and printed N/A; its platform struct had no
# chassis serial and a zero GUID (slot 0, tray 0, host 1, peer 0) and -q printed all six lines N/A.
Q_NA_RULES: dict[str, NaRule] = {
    "details.identity.fabric": _FABRIC,
    "details.identity.platform": (_no_position, "the platform reports no chassis or fabric GUID for this GPU"),
    "details.pcie.atomic_caps_outbound": _NO_ATOMICS,
    "details.pcie.atomic_caps_inbound": _NO_ATOMICS,
}
# --query-gpu: the same fabric answer printed N/A; the same platform struct printed its values ("", 0, 0,
# 1, "Direct Connected", 0x0000000000000000).
QUERY_NA_RULES: dict[str, NaRule] = {"details.identity.fabric": _FABRIC}


def as_nvidia_smi_shows(key: str, reading: Reading[Any], rules: dict[str, NaRule]) -> Reading[Any]:
    """``reading`` (the reading at ``key``), or N/A with why where ``rules`` say nvidia-smi shows none of it."""
    rule = rules.get(key)
    if rule is None or reading.value is None or not rule[0](reading.value):
        return reading
    return Reading.missing(Reason.NOT_SUPPORTED, rule[1])
