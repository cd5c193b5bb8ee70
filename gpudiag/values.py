"""A reading and its vocabulary: a value or why it is missing, and the groups of facts a command
reads; with the small GPU values NVML's reading declarations (readings.py) build on.

The base of the model: :mod:`gpudiag.model` (the machine) re-exports every name here, and
:mod:`gpudiag.readings` and :mod:`gpudiag.details` import from here, so that the machine can name
the details it may carry without a cycle.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")
U = TypeVar("U")


class Reason(str, enum.Enum):
    """Why a reading is missing. Values are stable: they appear in JSON output."""

    NOT_SUPPORTED = "not_supported"
    NO_PERMISSION = "no_permission"
    GPU_LOST = "gpu_lost"
    FUNCTION_NOT_FOUND = "function_not_found"  # the installed driver lacks this NVML call
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"  # the source itself could not run (no driver, no psutil access)
    UNKNOWN_ERROR = "unknown_error"
    # The command did not ask for this fact (see FactGroup): says nothing about the hardware, and
    # renderers of a command never show a fact their command did not read.
    NOT_READ = "not_read"
    # The replayed snapshot does not hold this fact (taken before gpudiag read it, or without the
    # group that reads it): says nothing about the hardware either.
    NOT_RECORDED = "not_recorded"

    @property
    def label(self) -> str:
        return _REASON_LABELS[self]


_REASON_LABELS = {
    Reason.NOT_SUPPORTED: "not supported",
    Reason.NO_PERMISSION: "no permission",
    Reason.GPU_LOST: "GPU lost",
    Reason.FUNCTION_NOT_FOUND: "not in this driver",
    Reason.NOT_FOUND: "not found",
    Reason.UNAVAILABLE: "unavailable",
    Reason.UNKNOWN_ERROR: "unknown error",
    Reason.NOT_READ: "not read by this command",
    Reason.NOT_RECORDED: "not recorded in this snapshot",
}


class Reading(msgspec.Struct, Generic[T], frozen=True):
    """A value, or the reason it could not be read. Build with :meth:`of` / :meth:`missing`."""

    value: T | None = None
    reason: Reason | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if (self.value is None) == (self.reason is None):
            raise ValueError("a Reading holds exactly one of a value or a reason")

    @classmethod
    def of(cls, value: T) -> Reading[T]:
        return cls(value=value)

    @classmethod
    def missing(cls, reason: Reason, detail: str = "") -> Reading[T]:
        """The one way to build a missing reading."""
        return cls(reason=reason, detail=detail)

    @classmethod
    def missing_like(cls, other: Reading[Any]) -> Reading[T]:
        """``other``'s absence (reason and detail) as a reading of another type: a fact built
        from a missing one is missing for the same reason."""
        if other.reason is None:
            raise ValueError("missing_like needs a missing reading")
        return cls(reason=other.reason, detail=other.detail)

    @property
    def ok(self) -> bool:
        return self.reason is None

    def get(self, default: U) -> T | U:
        return self.value if self.value is not None else default

    def map(self, fn: Callable[[T], U]) -> Reading[U]:
        if self.value is None:
            return Reading.missing_like(self)
        return Reading(value=fn(self.value))

    def __bool__(self) -> bool:  # pragma: no cover - guard against `if reading:` misuse
        raise TypeError("use Reading.ok or Reading.value; truthiness is ambiguous")


def not_recorded() -> Reading[Any]:
    """The default of a reading added after snapshots were taken without it: replayed, they say
    "not recorded", never a number and never "not supported"."""
    return Reading.missing(Reason.NOT_RECORDED)


class FactGroup(str, enum.Enum):
    """Groups of per-GPU facts a command asks the source for; each group costs NVML calls per GPU.

    A group not asked for leaves its fields as ``Reason.NOT_READ``. Identity (UUID, bus id, name,
    minor number) is always read: selection and every renderer need it; a read of named rows
    (`list --query`, probe.collect's ``only``) reads the UUID and the identity it names.
    """

    MEMORY = "memory"  # memory
    UTILIZATION = "utilization"  # utilization
    THERMAL = "thermal"  # temperature_c, temperature_slowdown_c, temperature_shutdown_c, fan_percent
    POWER = "power"  # power_draw_w, power_limit_w
    PERFORMANCE = "performance"  # pstate
    CLOCK_EVENTS = "clock_events"  # clock_event_reasons
    MODES = "modes"  # persistence_mode, compute_mode
    CAPABILITY = "capability"  # compute_capability
    PCIE = "pcie"  # pcie
    NUMA = "numa"  # numa_node
    ECC = "ecc"  # ecc_mode_current, ecc_mode_pending, ecc_errors
    MEMORY_HEALTH = "memory_health"  # retired_pages, remapped_rows
    INFOROM = "inforom"  # inforom_valid: nvmlDeviceValidateInforom, ~70 ms per GPU on an H100
    RECOVERY = "recovery"  # recovery_action
    MIG = "mig"  # mig_mode_current, mig_mode_pending, mig_devices
    PROCESSES = "processes"  # processes
    CLOCKS = "clocks"  # clock_sm_mhz, clock_memory_mhz, clock_graphics_mhz
    ENERGY = "energy"  # energy_mj
    PCIE_REPLAYS = "pcie_replays"  # pcie_replays
    # dcgm-exporter's default fields that NVML answers (the exporter's; snapshots record them too).
    MEMORY_TEMPERATURE = "memory_temperature"  # memory_temperature_c (a field value)
    CODECS = "codecs"  # encoder_percent, decoder_percent
    VIOLATIONS = "violations"  # violations: time each policy held the clocks down (field values)
    NVLINK_TRAFFIC = "nvlink_traffic"  # nvlink_data_rx_kib, nvlink_data_tx_kib (field values)
    PCIE_TRAFFIC = "pcie_traffic"  # pcie_data_tx_bytes, pcie_data_rx_bytes (field values)
    VGPU = "vgpu"  # vgpu_license_status
    # NVML GPM (Hopper and newer): two samples a window apart; a long-running reader keeps the last one.
    PROFILING = "profiling"  # profiling
    # What `nvidia-smi -q` adds (details: clocks, power detail, identity, NVLink, topology, per-process
    # load, ...): ~130 NVML calls per GPU (more with NVLink), read only by the commands that show them.
    DETAILS = "details"
    # With DETAILS: each NVLink and how each GPU reaches each other one (topology, P2P, CPU/NUMA
    # affinity): ~8 calls per link and 3 per GPU pair, so `--query` fields leave it out.
    LINKS = "links"
    # MIG's GPU instance profiles (with the room left for each) and the GPU and compute instances
    # (`gpudiag mig`, `nvidia-smi mig -lgip/-lgi/-lci`): ~40 calls on a MIG-enabled GPU, one on others.
    MIG_LAYOUT = "mig_layout"


ALL_GROUPS: frozenset[FactGroup] = frozenset(FactGroup)


# --- the values NVML's reading declarations build on ------------------------------------------


class ComputeMode(str, enum.Enum):
    DEFAULT = "Default"
    EXCLUSIVE_THREAD = "Exclusive_Thread"  # deprecated by NVIDIA, still reported by old drivers
    PROHIBITED = "Prohibited"
    EXCLUSIVE_PROCESS = "Exclusive_Process"


class Utilization(msgspec.Struct, frozen=True):
    gpu_percent: int
    memory_percent: int


class RemappedRows(msgspec.Struct, frozen=True):
    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


class Bar1(msgspec.Struct, frozen=True):
    """The BAR1 aperture through which the host maps GPU memory (nvmlDeviceGetBAR1MemoryInfo)."""

    total_bytes: int
    used_bytes: int
    free_bytes: int
