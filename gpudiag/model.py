"""The machine model: frozen, typed facts about a GPU node, free of gpudiag's other layers.

The classes are msgspec Structs rather than dataclasses: a frozen dataclass compiles its methods
with ``exec`` at every start-up (~1 ms each, ~18 ms for this module), a Struct is built in C in
microseconds. Copy with changes through ``msgspec.structs.replace``.

A GPU's readings (:class:`Gpu` and the Structs it holds) are declared in :mod:`gpudiag.readings`, each
field beside the row that says how NVML answers it, and re-exported here: the machine is this module's.

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
from typing import Any

import msgspec

from gpudiag.readings import EccCounts as EccCounts
from gpudiag.readings import Gpu as Gpu
from gpudiag.readings import GpuProcess as GpuProcess
from gpudiag.readings import GpuState as GpuState
from gpudiag.readings import HostProcess as HostProcess
from gpudiag.readings import HostState as HostState
from gpudiag.readings import Memory as Memory
from gpudiag.readings import MigAttributes as MigAttributes
from gpudiag.readings import MigComputeInstance as MigComputeInstance
from gpudiag.readings import MigDevice as MigDevice
from gpudiag.readings import MigGpuInstance as MigGpuInstance
from gpudiag.readings import MigProfile as MigProfile
from gpudiag.readings import PcieLink as PcieLink
from gpudiag.readings import ProcessKind as ProcessKind
from gpudiag.readings import Profiling as Profiling
from gpudiag.readings import RetiredPages as RetiredPages
from gpudiag.readings import Violations as Violations
from gpudiag.readings import field_types
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
