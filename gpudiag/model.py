"""The machine model: frozen, typed facts about a GPU node, free of gpudiag's other layers.

The classes are msgspec Structs rather than dataclasses: a frozen dataclass compiles its methods
with ``exec`` at every start-up (~1 ms each, ~18 ms for this module), a Struct is built in C in
microseconds. Copy with changes through ``msgspec.structs.replace``.

Every fact that a source may fail to read is a :class:`Reading` (from :mod:`gpudiag.values`, the
model's base, re-exported here with the rest of its vocabulary): it holds a value
*or* the reason it is missing. A Reading never pretends to be a number, so a missing
value cannot be added, compared or formatted by accident.

One vocabulary says why a value is absent (:class:`Reason`, each with its text): the hardware or
driver does not support it (``not_supported``, ``function_not_found``), the snapshot being
replayed does not hold it (``not_recorded``), the command did not ask for it (``not_read``), or
reading it failed (``no_permission``, ``gpu_lost``, ``not_found``, ``unavailable``,
``unknown_error``, with the error in ``detail``). :meth:`Reading.missing` builds a missing
reading, :meth:`Reading.missing_like` passes one on as another type.
"""

from __future__ import annotations

import enum
import typing
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded only where details are read or shown (see gpudiag.serialize)
    from gpudiag.details import GpuDetails

import msgspec

from gpudiag.values import ALL_GROUPS as ALL_GROUPS
from gpudiag.values import Bar1 as Bar1
from gpudiag.values import ComputeMode as ComputeMode
from gpudiag.values import FactGroup as FactGroup
from gpudiag.values import Reading as Reading
from gpudiag.values import Reason as Reason
from gpudiag.values import RemappedRows as RemappedRows
from gpudiag.values import Utilization as Utilization
from gpudiag.values import not_recorded as not_recorded

# --- enumerations --------------------------------------------------------------------


class NvmlStatus(str, enum.Enum):
    """Outcome of NVML initialisation for the whole machine."""

    OK = "ok"
    LIBRARY_NOT_FOUND = "library_not_found"
    DRIVER_NOT_LOADED = "driver_not_loaded"
    VERSION_MISMATCH = "driver_library_mismatch"
    NO_PERMISSION = "no_permission"
    ERROR = "error"


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


# --- the machine ---------------------------------------------------------------------


class NvmlInfo(msgspec.Struct, frozen=True):
    status: NvmlStatus
    detail: str  # the one-line reason shown to users when status is not OK
    driver_version: Reading[str]
    nvml_version: Reading[str]
    cuda_driver_version: Reading[int]  # NVML encoding: 12080 means CUDA 12.8
    kernel_module_version: Reading[str]  # from /proc/driver/nvidia/version
    process_query_api: str  # e.g. "nvmlDeviceGetComputeRunningProcesses_v3"
    functions_missing: tuple[str, ...]  # NVML calls this driver lacks

    @property
    def cuda_driver_version_text(self) -> Reading[str]:
        return self.cuda_driver_version.map(cuda_version_text)


def cuda_version_text(encoded: int) -> str:
    """12080 -> '12.8', 11040 -> '11.4' (NVML/CUDA's integer encoding)."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


class TorchBuild(msgspec.Struct, frozen=True):
    """What torch's installed files say, read without importing torch."""

    version: str
    cuda: str | None  # None: a CPU-only build
    hip: str | None
    location: str


class TorchDevice(msgspec.Struct, frozen=True):
    name: str
    capability: tuple[int, int]
    total_memory_bytes: int
    uuid: str  # as torch prints it: without the GPU-/MIG- prefix


class TorchRuntime(msgspec.Struct, frozen=True):
    """What an imported torch says about itself and CUDA, learnt in a child process."""

    python: str  # the interpreter that imported it
    version: str
    cuda: str | None
    cuda_available: bool
    cuda_error: str  # why CUDA is unusable ("" when it works)
    device_count: int
    arch_list: tuple[str, ...]  # torch.cuda.get_arch_list(): sm_XY / compute_XY
    cudnn_version: int | None  # runtime, e.g. 90100 = 9.1.0
    cudnn_compiled: tuple[int, int, int] | None
    nccl_version: tuple[int, int, int] | None
    devices: tuple[TorchDevice, ...]
    import_seconds: float
    init_seconds: float


class HostInfo(msgspec.Struct, frozen=True):
    hostname: str
    os: str
    python: str
    in_container: bool
    container_hint: str  # what made us think so, for the user


class Machine(msgspec.Struct, frozen=True):
    schema: str
    source: str  # "live", or the replayed file / example name
    collected_at: float  # unix time
    nvml: NvmlInfo
    gpus: tuple[Gpu, ...]
    host: HostInfo
    env: tuple[tuple[str, str], ...]  # the environment variables that matter and are set
    torch_build: Reading[TorchBuild]
    # Only `check` and `snapshot` ask torch (in a child); other readings leave this unrecorded.
    torch_runtime: Reading[TorchRuntime] = msgspec.field(
        default_factory=lambda: Reading.missing(Reason.UNAVAILABLE, "torch runtime not probed")
    )

    @property
    def env_map(self) -> dict[str, str]:
        return dict(self.env)

    def gpu(self, index: int) -> Gpu:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        raise KeyError(index)


MACHINE_SCHEMA = "gpudiag.machine/1"


_GPU_FIXED = ("index", "state", "state_detail")


def blank_fields(missing: Reading[Any]) -> dict[str, Any]:
    """Every Gpu field but index and state, each ``missing`` (nested link and ECC readings too, no MIG
    devices): found from the Struct, so a new reading field needs no line here."""
    from gpudiag.readings import field_types  # the declarations load where GPUs are read

    values: dict[str, Any] = {}
    kinds = field_types(Gpu)
    for name in Gpu.__struct_fields__:
        if name in _GPU_FIXED:
            continue
        kind = kinds[name]
        if typing.get_origin(kind) is tuple:
            values[name] = ()
        elif isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            values[name] = kind(**{inner: missing for inner in kind.__struct_fields__})
        else:
            values[name] = missing
    return values


def blank_gpu(index: int, state: GpuState, detail: str, missing: Reading[Any]) -> Gpu:
    """A GPU whose every reading is ``missing``."""
    return Gpu(index=index, state=state, state_detail=detail, **blank_fields(missing))


def failed_gpu(index: int, state: GpuState, detail: str) -> Gpu:
    """A GPU row whose handle is unusable (the probe's lost GPU, a replay file's shorthand): every
    reading says why."""
    reason = Reason.GPU_LOST if state is GpuState.LOST else Reason.UNKNOWN_ERROR
    return blank_gpu(index, state, detail, Reading.missing(reason, detail))
