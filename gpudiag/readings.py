"""The per-GPU readings, each declared once: its field in :class:`Gpu` and its row in :data:`GPU_READINGS`.

A reading's field (its JSON key, in the Struct's field order) and its :class:`~gpudiag.spec.Spec` row
stand in this one module: the row says how NVML answers it (see :mod:`gpudiag.spec`). From the rows:

- the probe (``probe/nvml.py``, ``probe/details.py``) makes the calls and builds the model;
- the fake NVML (``replay/fake_nvml.py``) answers the same calls from a machine file;
- the capture tool (``tests/hardware/capture.py``) answers them from the real H100's recording.

How each output shows a reading is that output's table, keyed by the row's ``key``: ``--query-gpu``
names and the names of their formats (``query/reading_names.py``, the query package's), ``-q`` lines
(``render/details_lines.py``, whose layout also gives ``-q -x`` its elements), the exporter's
families (``export/gpu_families.py``). A reading no table names is read and kept (JSON, snapshots)
but shown by none.

:data:`GPU_READINGS` are the per-GPU readings every command may read (here, on the path of
``list``); ``gpudiag.details.DETAIL_READINGS`` are what ``nvidia-smi -q`` adds, each section's rows
beside its Struct, loaded only where shown. A *composite* row (``custom=True``: a reading built from
several calls, or from a struct passed by reference) is read and faked by hand. :mod:`gpudiag.model`
re-exports the Structs; NVML's vocabulary is re-exported here for the consumers that read it with the rows.
"""

from __future__ import annotations

import enum
import functools
import inspect
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.spec import ADDRESSING_MODES as ADDRESSING_MODES
from gpudiag.spec import ALL_LINKS as ALL_LINKS
from gpudiag.spec import (
    BOOL,
    CAPABILITY,
    COMPUTE_MODE,
    FI_PCIE_REPLAY_COUNTER,
    FI_TOTAL_ENERGY_CONSUMPTION,
    MIG_ENABLED,
    MILLIWATTS,
    REMAPPED_ROWS,
    UTILIZATION,
)
from gpudiag.spec import CLOCK_EVENT_NAMES as CLOCK_EVENT_NAMES
from gpudiag.spec import CLOCK_EVENTS as CLOCK_EVENTS
from gpudiag.spec import COMPUTE_MODES as COMPUTE_MODES
from gpudiag.spec import FI_GPU_RECOVERY_ACTION as FI_GPU_RECOVERY_ACTION
from gpudiag.spec import FI_MEMORY_TEMP as FI_MEMORY_TEMP
from gpudiag.spec import FI_NVLINK_GET_SPEED as FI_NVLINK_GET_SPEED
from gpudiag.spec import FI_NVLINK_THROUGHPUT_DATA_RX as FI_NVLINK_THROUGHPUT_DATA_RX
from gpudiag.spec import FI_NVLINK_THROUGHPUT_DATA_TX as FI_NVLINK_THROUGHPUT_DATA_TX
from gpudiag.spec import FI_NVLINK_THROUGHPUT_RAW_RX as FI_NVLINK_THROUGHPUT_RAW_RX
from gpudiag.spec import FI_NVLINK_THROUGHPUT_RAW_TX as FI_NVLINK_THROUGHPUT_RAW_TX
from gpudiag.spec import FI_PCIE_ATOMICS_INBOUND as FI_PCIE_ATOMICS_INBOUND
from gpudiag.spec import FI_PCIE_ATOMICS_OUTBOUND as FI_PCIE_ATOMICS_OUTBOUND
from gpudiag.spec import FI_PCIE_COUNT_RX_BYTES as FI_PCIE_COUNT_RX_BYTES
from gpudiag.spec import FI_PCIE_COUNT_TX_BYTES as FI_PCIE_COUNT_TX_BYTES
from gpudiag.spec import FI_PERF_POLICIES as FI_PERF_POLICIES
from gpudiag.spec import FI_POWER_AVERAGE as FI_POWER_AVERAGE
from gpudiag.spec import FI_POWER_INSTANT as FI_POWER_INSTANT
from gpudiag.spec import FI_REMAPPED_COR_INACTIVE as FI_REMAPPED_COR_INACTIVE
from gpudiag.spec import FI_REMAPPED_UNC_INACTIVE as FI_REMAPPED_UNC_INACTIVE
from gpudiag.spec import GPM_METRICS as GPM_METRICS
from gpudiag.spec import GRID_LICENSE_FEATURE_VGPU as GRID_LICENSE_FEATURE_VGPU
from gpudiag.spec import MIB as MIB
from gpudiag.spec import NO_INSTANCE as NO_INSTANCE
from gpudiag.spec import NVLINK_REMOTE_TYPES as NVLINK_REMOTE_TYPES
from gpudiag.spec import P2P_ABBREVIATIONS as P2P_ABBREVIATIONS
from gpudiag.spec import P2P_ATOMICS as P2P_ATOMICS
from gpudiag.spec import P2P_NVLINK as P2P_NVLINK
from gpudiag.spec import P2P_PROP as P2P_PROP
from gpudiag.spec import P2P_READ as P2P_READ
from gpudiag.spec import P2P_STATUS as P2P_STATUS
from gpudiag.spec import P2P_WRITE as P2P_WRITE
from gpudiag.spec import RECOVERY_ACTION_NAMES as RECOVERY_ACTION_NAMES
from gpudiag.spec import TEXT as TEXT
from gpudiag.spec import TOPOLOGY_LEVELS as TOPOLOGY_LEVELS
from gpudiag.spec import VGPU_LICENSE as VGPU_LICENSE
from gpudiag.spec import Spec as Spec
from gpudiag.spec import clock_event_bits as clock_event_bits
from gpudiag.spec import integer as integer
from gpudiag.spec import text as text
from gpudiag.spec import truth as truth
from gpudiag.values import Bar1, ComputeMode, FactGroup, Reading, Reason, RemappedRows, Utilization, not_recorded

if TYPE_CHECKING:  # loaded only where details are read or shown (see gpudiag.serialize)
    from gpudiag.details import GpuDetails


# --- the readings' fields ------------------------------------------------------------


class GpuState(str, enum.Enum):
    OK = "ok"
    LOST = "lost"  # fell off the bus (XID 79) or needs a reset
    ERROR = "error"  # the handle could not be obtained for another reason


class ProcessKind(str, enum.Enum):
    COMPUTE = "C"
    GRAPHICS = "G"
    COMPUTE_GRAPHICS = "C+G"


class HostState(str, enum.Enum):
    """What the host process table says about a PID that NVML reported."""

    FOUND = "found"
    VANISHED = "vanished"  # exited between the NVML query and the lookup
    NO_PERMISSION = "no_permission"
    OTHER_NAMESPACE = "other_pid_namespace"  # a host PID seen from inside a container


# --- GPU facts -----------------------------------------------------------------------


class Memory(msgspec.Struct, frozen=True):
    total_bytes: int
    used_bytes: int
    free_bytes: int
    reserved_bytes: Reading[int] = msgspec.field(default_factory=lambda: Reading.missing(Reason.NOT_SUPPORTED))


class PcieLink(msgspec.Struct, frozen=True):
    gen_current: Reading[int]
    gen_max: Reading[int]  # the link's max: the lower of GPU and slot
    gen_gpu_max: Reading[int]  # what the GPU itself supports
    width_current: Reading[int]
    width_max: Reading[int]


class EccCounts(msgspec.Struct, frozen=True):
    volatile_corrected: Reading[int]
    volatile_uncorrected: Reading[int]
    aggregate_corrected: Reading[int]
    aggregate_uncorrected: Reading[int]


class RetiredPages(msgspec.Struct, frozen=True):
    single_bit: int
    double_bit: int
    pending: bool


class Violations(msgspec.Struct, frozen=True):
    """Time (ns) each performance policy has held the clocks down since the driver loaded (NVML's
    perf-policy counters, which DCGM exports as its ``*_VIOLATION`` fields)."""

    power_ns: Reading[int] = msgspec.field(default_factory=not_recorded)
    thermal_ns: Reading[int] = msgspec.field(default_factory=not_recorded)
    sync_boost_ns: Reading[int] = msgspec.field(default_factory=not_recorded)
    board_limit_ns: Reading[int] = msgspec.field(default_factory=not_recorded)
    low_utilization_ns: Reading[int] = msgspec.field(default_factory=not_recorded)
    reliability_ns: Reading[int] = msgspec.field(default_factory=not_recorded)


class Profiling(msgspec.Struct, frozen=True):
    """What the GPU's units did over one window, from NVML's GPU performance monitoring (GPM,
    Hopper and newer): each activity in percent of the window (GPM's unit), traffic in bytes per
    second. Each metric may be missing on its own (NVLink on a GPU without links)."""

    window_s: float  # between the two samples the figures come from
    graphics_active_percent: Reading[float]  # any graphics or compute engine busy
    sm_active_percent: Reading[float]  # SMs with at least one warp
    sm_occupancy_percent: Reading[float]  # warps resident against the SMs' maximum
    tensor_active_percent: Reading[float]  # any tensor pipe busy
    fp64_active_percent: Reading[float]
    fp32_active_percent: Reading[float]
    fp16_active_percent: Reading[float]
    dram_active_percent: Reading[float]  # device memory bandwidth used against its peak
    pcie_tx_bytes_per_s: Reading[float]
    pcie_rx_bytes_per_s: Reading[float]
    nvlink_tx_bytes_per_s: Reading[float]
    nvlink_rx_bytes_per_s: Reading[float]


class HostProcess(msgspec.Struct, frozen=True):
    state: HostState
    user: Reading[str]
    name: Reading[str]
    command: Reading[str]


class GpuProcess(msgspec.Struct, frozen=True):
    pid: int
    kind: ProcessKind
    used_memory_bytes: Reading[int]
    host: HostProcess
    gpu_instance_id: int | None = None  # set on MIG-enabled GPUs
    compute_instance_id: int | None = None


class MigAttributes(msgspec.Struct, frozen=True):
    """What a MIG device is given of the GPU (nvmlDeviceGetAttributes on its handle)."""

    multiprocessors: int
    copy_engines: int  # shared with the other compute instances of its GPU instance, as the rest
    decoders: int
    encoders: int
    jpeg_decoders: int
    ofas: int
    gpu_instance_slices: int
    compute_instance_slices: int
    memory_mib: int


class MigDevice(msgspec.Struct, frozen=True):
    index: int  # position under its parent GPU
    uuid: Reading[str]
    gpu_instance_id: Reading[int]
    compute_instance_id: Reading[int]
    name: Reading[str]
    memory: Reading[Memory]
    # Read with the details (`list -q`, snapshot); nvitop reads BAR1 of every MIG device.
    bar1: Reading[Bar1] = msgspec.field(default_factory=not_recorded)
    attributes: Reading[MigAttributes] = msgspec.field(default_factory=not_recorded)


class MigProfile(msgspec.Struct, frozen=True):
    """A GPU instance profile (nvmlDeviceGetGpuInstanceProfileInfoV) and how many more fit now
    (nvmlDeviceGetGpuInstanceRemainingCapacity): a line of `nvidia-smi mig -lgip`."""

    index: int  # the NVML_GPU_INSTANCE_PROFILE_* it answers (0 is 1_SLICE)
    id: int  # NVML's profile id (A100: 19 is 1g.5gb, 0 is 7g.40gb)
    name: str  # "MIG 1g.5gb"
    slices: int
    instances: int  # how many of it the GPU holds at most
    remaining: Reading[int]  # how many more can be created now
    memory_mib: int
    p2p: bool
    sms: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int


class MigComputeInstance(msgspec.Struct, frozen=True):
    """A compute instance inside a GPU instance (nvmlComputeInstanceGetInfo): a line of `mig -lci`."""

    id: int
    profile_id: int
    name: str  # its profile's name: "MIG 1g.5gb", or "MIG 1c.3g.20gb" for a share of a larger instance
    placement_start: int
    placement_size: int


class MigGpuInstance(msgspec.Struct, frozen=True):
    """A GPU instance (nvmlGpuInstanceGetInfo) and its compute instances: a line of `mig -lgi`."""

    id: int
    profile_id: int
    placement_start: int
    placement_size: int
    compute_instances: tuple[MigComputeInstance, ...]


class Gpu(msgspec.Struct, frozen=True):
    index: int  # NVML index (nvidia-smi's order), not the CUDA ordinal
    state: GpuState
    state_detail: str
    uuid: Reading[str]
    pci_bus_id: Reading[str]
    name: Reading[str]
    minor_number: Reading[int]
    memory: Reading[Memory]
    utilization: Reading[Utilization]
    temperature_c: Reading[int]
    temperature_slowdown_c: Reading[int]
    temperature_shutdown_c: Reading[int]
    fan_percent: Reading[int]
    power_draw_w: Reading[float]
    power_limit_w: Reading[float]
    pstate: Reading[int]
    persistence_mode: Reading[bool]
    compute_mode: Reading[ComputeMode]
    compute_capability: Reading[tuple[int, int]]
    pcie: PcieLink
    numa_node: Reading[int]
    ecc_mode_current: Reading[bool]
    ecc_mode_pending: Reading[bool]
    ecc_errors: EccCounts
    retired_pages: Reading[RetiredPages]
    remapped_rows: Reading[RemappedRows]
    clock_event_reasons: Reading[int]  # NVML bitmask, see readings.CLOCK_EVENTS
    inforom_valid: Reading[bool]
    recovery_action: Reading[int]  # NVML_GPU_RECOVERY_ACTION_*; 0 means none needed
    mig_mode_current: Reading[bool]
    mig_mode_pending: Reading[bool]
    mig_devices: tuple[MigDevice, ...]
    processes: Reading[tuple[GpuProcess, ...]]
    # Read for the exporter; snapshots taken before these existed load them as not recorded.
    clock_sm_mhz: Reading[int] = msgspec.field(default_factory=not_recorded)
    clock_memory_mhz: Reading[int] = msgspec.field(default_factory=not_recorded)
    clock_graphics_mhz: Reading[int] = msgspec.field(default_factory=not_recorded)
    energy_mj: Reading[int] = msgspec.field(default_factory=not_recorded)  # since the driver loaded
    pcie_replays: Reading[int] = msgspec.field(default_factory=not_recorded)  # link-level retries
    # dcgm-exporter's default fields that NVML answers, read for the exporter.
    memory_temperature_c: Reading[int] = msgspec.field(default_factory=not_recorded)  # HBM
    encoder_percent: Reading[int] = msgspec.field(default_factory=not_recorded)
    decoder_percent: Reading[int] = msgspec.field(default_factory=not_recorded)
    violations: Violations = msgspec.field(default_factory=Violations)
    nvlink_data_rx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)  # all links, since load
    nvlink_data_tx_kib: Reading[int] = msgspec.field(default_factory=not_recorded)
    pcie_data_tx_bytes: Reading[int] = msgspec.field(default_factory=not_recorded)  # may wrap (NVML says)
    pcie_data_rx_bytes: Reading[int] = msgspec.field(default_factory=not_recorded)
    vgpu_license_status: Reading[int] = msgspec.field(default_factory=not_recorded)  # 1 licensed, 0 not (or n/a)
    profiling: Reading[Profiling] = msgspec.field(default_factory=not_recorded)  # NVML GPM over one window
    # MIG's layout (`gpudiag mig`): the GPU instance profiles and the instances created.
    mig_profiles: Reading[tuple[MigProfile, ...]] = msgspec.field(default_factory=not_recorded)
    mig_instances: Reading[tuple[MigGpuInstance, ...]] = msgspec.field(default_factory=not_recorded)
    # What `nvidia-smi -q` adds (clocks, NVLink, topology, ...); only commands that show it read it.
    details: Reading[GpuDetails] = msgspec.field(default_factory=lambda: Reading.missing(Reason.NOT_READ))

    @property
    def label(self) -> str:
        return f"GPU {self.index}"


# --- their rows ------------------------------------------------------------------------

_G = FactGroup

# The per-GPU readings, in the order the probe asks NVML (by fact group, as FactGroup declares them).
GPU_READINGS: tuple[Spec, ...] = (
    # Identity: read on every read, first (the UUID is the cheap call that finds a GPU lost since the last).
    Spec(key="uuid", call="nvmlDeviceGetUUID", codec=TEXT, whole_gpu=False),
    Spec(
        key="pci_bus_id",
        call="nvmlDeviceGetPciInfo",
        pick="busId",
        codec=TEXT,
        fixed=True,
        whole_gpu=False,
    ),
    Spec(key="name", call="nvmlDeviceGetName", codec=TEXT, fixed=True, whole_gpu=False),
    Spec(key="minor_number", call="nvmlDeviceGetMinorNumber", fixed=True, whole_gpu=False),
    Spec(
        key="memory",
        call="nvmlDeviceGetMemoryInfo",  # v2 (reserved memory apart), v1 before R510
        custom=True,
        group=_G.MEMORY,
    ),
    Spec(
        key="utilization",
        call="nvmlDeviceGetUtilizationRates",
        codec=UTILIZATION,
        group=_G.UTILIZATION,
        unit="%",
    ),
    Spec(
        key="temperature_c",
        call="nvmlDeviceGetTemperature",
        args=("NVML_TEMPERATURE_GPU",),
        group=_G.THERMAL,
        unit="C",
    ),
    Spec(
        key="temperature_slowdown_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",),
        fixed=True,
        group=_G.THERMAL,
        unit="C",
    ),
    Spec(
        key="temperature_shutdown_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",),
        fixed=True,
        group=_G.THERMAL,
        unit="C",
    ),
    Spec(
        key="fan_percent",
        call="nvmlDeviceGetFanSpeed",
        group=_G.THERMAL,
        unit="%",
    ),
    Spec(
        key="power_draw_w",
        call="nvmlDeviceGetPowerUsage",
        codec=MILLIWATTS,
        group=_G.POWER,
        unit="W",
    ),
    Spec(
        key="power_limit_w",
        call="nvmlDeviceGetEnforcedPowerLimit",
        codec=MILLIWATTS,
        group=_G.POWER,
        unit="W",
    ),
    Spec(
        key="pstate",
        call="nvmlDeviceGetPerformanceState",
        group=_G.PERFORMANCE,
    ),
    Spec(
        key="clock_event_reasons",
        call="nvmlDeviceGetCurrentClocksEventReasons",
        fallback="nvmlDeviceGetCurrentClocksThrottleReasons",  # drivers before R535; the same bits
        group=_G.CLOCK_EVENTS,
    ),
    Spec(
        key="persistence_mode",
        call="nvmlDeviceGetPersistenceMode",
        codec=BOOL,
        group=_G.MODES,
    ),
    Spec(
        key="compute_mode",
        call="nvmlDeviceGetComputeMode",
        codec=COMPUTE_MODE,
        group=_G.MODES,
    ),
    Spec(
        key="compute_capability",
        call="nvmlDeviceGetCudaComputeCapability",
        codec=CAPABILITY,
        group=_G.CAPABILITY,
        whole_gpu=False,
    ),
    Spec(
        key="pcie.gen_current",
        call="nvmlDeviceGetCurrPcieLinkGeneration",
        group=_G.PCIE,
    ),
    Spec(
        key="pcie.gen_max",
        call="nvmlDeviceGetMaxPcieLinkGeneration",
        fixed=True,
        group=_G.PCIE,
    ),
    Spec(
        key="pcie.gen_gpu_max",
        call="nvmlDeviceGetGpuMaxPcieLinkGeneration",
        fixed=True,
        group=_G.PCIE,
    ),
    Spec(
        key="pcie.width_current",
        call="nvmlDeviceGetCurrPcieLinkWidth",
        group=_G.PCIE,
    ),
    Spec(
        key="pcie.width_max",
        call="nvmlDeviceGetMaxPcieLinkWidth",
        fixed=True,
        group=_G.PCIE,
    ),
    Spec(key="numa_node", call="nvmlDeviceGetNumaNodeId", group=_G.NUMA),  # -q: with the topology
    Spec(
        key="ecc_mode_current",
        call="nvmlDeviceGetEccMode",
        pick=0,
        codec=BOOL,
        group=_G.ECC,
    ),
    Spec(
        key="ecc_mode_pending",
        call="nvmlDeviceGetEccMode",
        pick=1,
        codec=BOOL,
        group=_G.ECC,
    ),
    *(
        Spec(
            key=f"ecc_errors.{counter}_{kind}",
            call="nvmlDeviceGetTotalEccErrors",
            args=(f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", f"NVML_{counter.upper()}_ECC"),
            group=_G.ECC,
        )
        for counter, kind in (
            ("volatile", "corrected"),
            ("volatile", "uncorrected"),
            ("aggregate", "corrected"),
            ("aggregate", "uncorrected"),
        )
    ),
    Spec(
        key="retired_pages",
        call="nvmlDeviceGetRetiredPages",  # the count of each cause's pages, and the pending status
        custom=True,
        group=_G.MEMORY_HEALTH,
    ),
    Spec(
        key="remapped_rows",
        call="nvmlDeviceGetRemappedRows",
        codec=REMAPPED_ROWS,
        group=_G.MEMORY_HEALTH,
    ),
    Spec(
        key="inforom_valid",
        call="nvmlDeviceValidateInforom",  # no answer but an error: CORRUPTED_INFOROM is False
        custom=True,
        group=_G.INFOROM,
    ),
    Spec(
        key="recovery_action",
        field=FI_GPU_RECOVERY_ACTION,
        group=_G.RECOVERY,
    ),
    Spec(
        key="mig_mode_current",
        call="nvmlDeviceGetMigMode",
        pick=0,
        codec=MIG_ENABLED,
        group=_G.MIG,
    ),
    Spec(
        key="mig_mode_pending",
        call="nvmlDeviceGetMigMode",
        pick=1,
        codec=MIG_ENABLED,
        group=_G.MIG,
    ),
    Spec(key="mig_devices", call="nvmlDeviceGetMigDeviceHandleByIndex", custom=True, group=_G.MIG),
    Spec(key="processes", call="nvmlDeviceGetComputeRunningProcesses", custom=True, group=_G.PROCESSES),
    # Read for the exporter (its cheap groups); `-q` shows the details' own readings of the same calls.
    Spec(
        key="clock_sm_mhz",
        call="nvmlDeviceGetClockInfo",
        args=("NVML_CLOCK_SM",),
        group=_G.CLOCKS,
        whole_gpu=False,
    ),
    Spec(
        key="clock_memory_mhz",
        call="nvmlDeviceGetClockInfo",
        args=("NVML_CLOCK_MEM",),
        group=_G.CLOCKS,
        whole_gpu=False,
    ),
    Spec(
        key="clock_graphics_mhz",
        call="nvmlDeviceGetClockInfo",
        args=("NVML_CLOCK_GRAPHICS",),
        group=_G.CLOCKS,
        whole_gpu=False,
    ),
    Spec(
        key="energy_mj",
        field=FI_TOTAL_ENERGY_CONSUMPTION,
        value_type=3,
        group=_G.ENERGY,
        whole_gpu=False,
    ),
    Spec(
        key="pcie_replays",
        field=FI_PCIE_REPLAY_COUNTER,
        group=_G.PCIE_REPLAYS,
        whole_gpu=False,
    ),
    # dcgm-exporter's default fields that NVML answers, read for the exporter; `-q` shows the
    # details' own readings of the same calls (memory temperature, codec utilization).
    Spec(
        key="memory_temperature_c",
        field=FI_MEMORY_TEMP,
        group=_G.MEMORY_TEMPERATURE,
        unit="C",
    ),
    *(
        Spec(
            key=f"{name}_percent",
            call=f"nvmlDeviceGet{name.title()}Utilization",
            pick=0,  # (percent, sampling period in µs)
            group=_G.CODECS,
            unit="%",
        )
        for name in ("encoder", "decoder")
    ),
    *(
        Spec(
            key=f"violations.{policy}_ns",
            field=field,
            value_type=3,
            group=_G.VIOLATIONS,
        )
        for policy, field in FI_PERF_POLICIES
    ),
    *(
        Spec(
            key=f"nvlink_data_{direction}_kib",
            field=field,
            scope=ALL_LINKS,
            value_type=3,
            group=_G.NVLINK_TRAFFIC,
        )
        for direction, field in (("rx", FI_NVLINK_THROUGHPUT_DATA_RX), ("tx", FI_NVLINK_THROUGHPUT_DATA_TX))
    ),
    *(
        Spec(
            key=f"pcie_data_{direction}_bytes",
            field=field,
            value_type=3,
            group=_G.PCIE_TRAFFIC,
        )
        for direction, field in (("tx", FI_PCIE_COUNT_TX_BYTES), ("rx", FI_PCIE_COUNT_RX_BYTES))
    ),
    Spec(
        key="vgpu_license_status",
        call="nvmlDeviceGetGridLicensableFeatures",
        codec=VGPU_LICENSE,
        group=_G.VGPU,
    ),
    Spec(
        key="profiling",  # NVML GPM: support asked once, two samples a window apart, their metrics (GPM_METRICS)
        call="nvmlGpmMetricsGet",
        custom=True,
        group=_G.PROFILING,
    ),
    # MIG's layout, for `gpudiag mig` (nvidia-smi mig -lgip/-lgi/-lci): read by hand (probe/mig.py), and
    # only on a GPU whose MIG mode is on (a GPU without MIG costs no call).
    Spec(key="mig_profiles", call="nvmlDeviceGetGpuInstanceProfileInfoV", custom=True, group=_G.MIG_LAYOUT),
    Spec(key="mig_instances", call="nvmlDeviceGetGpuInstances", custom=True, group=_G.MIG_LAYOUT),
)


@functools.cache
def group_readings(group: FactGroup | None) -> tuple[Spec, ...]:
    """The per-GPU readings ``group`` reads (None: identity), in the order NVML is asked."""
    return tuple(spec for spec in GPU_READINGS if spec.group is group)


def groups_of(keys: Iterable[str]) -> frozenset[FactGroup]:
    """The fact groups to read for these readings (rows' keys; a detail's is DETAILS): how a
    consumer that names the readings it uses knows what to ask for. Identity is always read; a key
    no row declares is a KeyError, where the consumer is declared."""
    rows = {spec.key: spec.group for spec in GPU_READINGS}
    found = (FactGroup.DETAILS if key.startswith("details.") else rows[key] for key in keys)
    return frozenset(group for group in found if group is not None)


def pick(raw: Any, part: int | str | None) -> Any:
    """The part of NVML's answer a row reads: all of it, one item of a list, one attribute of a struct."""
    if part is None:
        return raw
    if isinstance(part, int):
        return raw[part]
    return getattr(raw, part)


def field_key(spec: Spec) -> int | tuple[int, int]:
    """A field row's id as nvmlDeviceGetFieldValues is asked: the id, or (id, scope) for a scoped one."""
    return (spec.field, spec.scope) if spec.scope else spec.field


def reading_at(gpu: Any, key: str) -> Reading[Any]:
    """The reading at ``key`` (a row's dotted path) of a GPU; a missing reading on the way (the
    details, a struct) is passed on, so the answer says why. ``name[item]`` is the item's reading
    in a tuple of (name, reading) pairs."""
    node: Any = gpu
    for name, item in _path(key):
        if isinstance(node, Reading):
            if node.value is None:
                return Reading.missing_like(node)
            node = node.value
        node = getattr(node, name)
        if item:
            node = dict(node)[item]
    return node if isinstance(node, Reading) else Reading(value=node)


@functools.cache
def _path(key: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, item.rstrip("]")) for name, _, item in (part.partition("[") for part in key.split(".")))


def fields_from(cls: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the Struct ``cls`` that ``values`` (readings by their rows' keys, dotted from
    ``cls``) give: a nested Struct is built from its own keys, a tuple of (name, reading) pairs
    from ``field[name]`` keys in their rows' order."""
    return builder(cls, tuple(values))(values)


@functools.cache
def builder(cls: Any, keys: tuple[str, ...]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """:func:`fields_from` for values with these keys, worked out once (a watch or an exporter
    reads the same keys again and again)."""
    flat: list[str] = []
    pairs: dict[str, list[tuple[str, str]]] = {}
    nested: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        head, dot, rest = key.partition(".")
        if dot:
            nested.setdefault(head, []).append((rest, key))
        elif head.endswith("]"):
            name, _, item = head[:-1].partition("[")
            pairs.setdefault(name, []).append((item, key))
        else:
            flat.append(key)
    inner = {
        head: (field_types(cls)[head], builder(field_types(cls)[head], tuple(r for r, _ in parts)), parts)
        for head, parts in nested.items()
    }

    def build(values: Mapping[str, Any]) -> dict[str, Any]:
        out = {key: values[key] for key in flat}
        for name, items in pairs.items():
            out[name] = tuple((item, values[key]) for item, key in items)
        for head, (kind, make, parts) in inner.items():
            out[head] = kind(**make({rest: values[key] for rest, key in parts}))
        return out

    return build


@functools.cache
def field_types(cls: Any) -> dict[str, Any]:
    """A model Struct's field types, resolved once, as ``typing.get_type_hints`` resolves the model's
    plain annotations (tests/test_readings.py holds it for every model Struct). GpuDetails is named
    only under TYPE_CHECKING in the model (gpudiag.details loads where details are read): a stand-in
    resolves the GPU's field."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):  # as typing.get_type_hints: a subclass's annotation wins
        for name, annotation in inspect.get_annotations(base).items():
            hints[name] = _evaluated(base.__module__, annotation)
    return hints


# Each distinct annotation evaluated once per module: a GPU's ~50 fields spell ~20 types, and
# typing.get_type_hints would compile every one of them (~1 ms of a `list --query`'s start).
_STAND_INS = {"GpuDetails": object}


@functools.cache
def _evaluated(module: str, annotation: Any) -> Any:
    if annotation is None:
        return type(None)
    kind = eval(annotation, vars(sys.modules[module]), _STAND_INS) if isinstance(annotation, str) else annotation
    return kind.__origin__ if typing.get_origin(kind) is typing.Annotated else kind  # as get_type_hints: no extras
