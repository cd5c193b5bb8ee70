"""The memory picture's types: one GPU row and one process row each, NVML's figures with PyTorch's
split beside them, and what a watch adds (exits, lost GPUs, forecasts). Data only: :mod:`.build` makes it."""

from __future__ import annotations

import msgspec

from gpudiag.model import Gpu, GpuProcess, GpuState, Machine, MigDevice
from gpudiag.readings import groups_of

# What the memory views, JSON, logs and metrics use; the memory command reads nothing else.
READS = ("memory", "utilization", "mig_devices", "processes")
GROUPS = groups_of(READS)


class Breakdown(msgspec.Struct, frozen=True):
    """NVML's per-process figure split by what PyTorch knows."""

    allocated_bytes: int  # live tensors
    cached_free_bytes: int  # reserved by the caching allocator but free: what empty_cache() can return
    other_bytes: int | None  # the rest of NVML's figure: CUDA context, cuBLAS/cuDNN workspaces, NCCL, other
    # libraries; None when NVML gives no per-process figure, or when the allocator's reserved memory was
    # changing at its publication (then NVML's figure now and the published one are not of one moment)
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    alloc_retries: int
    ooms: int
    torch_index: int  # the device as the program calls it: cuda:N
    # From trackers that publish the fragmentation figures (None: not known).
    inactive_split_bytes: int | None = None  # free but inside segments that hold tensors
    active_bytes: int | None = None
    segments: int | None = None
    largest_free_block_bytes: int | None = None  # the last segment walk's
    expandable_segments: bool | None = None
    published_at: float | None = None  # when the tracker read these allocator figures (wall time)

    @property
    def reserved_bytes(self) -> int:
        return self.allocated_bytes + self.cached_free_bytes

    @property
    def releasable_bytes(self) -> int | None:
        """What empty_cache() can give back: free blocks that are whole segments (not split ones)."""
        if self.inactive_split_bytes is None:
            return None
        used = max(self.active_bytes or 0, self.allocated_bytes)
        return max(0, self.reserved_bytes - used - self.inactive_split_bytes)

    @property
    def fragmentation_percent(self) -> float | None:
        """The share of reserved memory that is free yet split inside segments in use."""
        if self.inactive_split_bytes is None or not self.reserved_bytes:
            return None
        return 100.0 * self.inactive_split_bytes / self.reserved_bytes


class Rank(msgspec.Struct, frozen=True):
    """A tracked process's place in a distributed job (RANK / LOCAL_RANK / WORLD_SIZE)."""

    rank: int | None
    local_rank: int | None
    world_size: int | None
    job: str | None


class StepStats(msgspec.Struct, frozen=True):
    """Memory per training step on one device, from gpudiag.track.step()'s records."""

    count: int  # steps so far
    rate_per_s: float | None
    peak_bytes: int | None  # the latest record's peak allocated
    peaks_per_step: bool  # the peak is the last steps' own (per_step_peaks), not the run's
    allocated_bytes: int | None  # at the latest record's step end
    growth_bytes_per_step: float | None  # sustained growth of allocated at step end (a leak); None if flat
    first_step: int | None = None  # the records the growth is measured over
    last_step: int | None = None
    last_step_at: float | None = None  # wall time the tracker recorded last_step at: the moment of these figures


class Forecast(msgspec.Struct, frozen=True):
    """When a GPU (or a process's reach on it) fills up at the current sustained growth."""

    gpu_index: int
    pid: int | None  # None: the whole GPU
    full_in_s: float
    growth_bytes_per_s: float
    level_bytes: int  # now
    limit_bytes: int  # full
    window_s: float  # the history the growth is measured over
    basis: str  # "samples" (NVML used between samples) or "steps" (allocated at step end)
    growth_bytes_per_step: float | None = None
    steps_to_full: float | None = None


class ProcessRow(msgspec.Struct, frozen=True):
    gpu_index: int
    process: GpuProcess
    share_percent: float | None  # of the GPU's (or its MIG instance's) total memory
    breakdown: Breakdown | None
    status: str = ""  # "new" on the first sample a process is seen after the first (watch)
    mig: MigDevice | None = None  # the MIG instance it runs in
    rank: Rank | None = None  # tracked processes in a distributed job
    steps: StepStats | None = None  # tracked processes that call gpudiag.track.step()
    oom_reports: tuple[str, ...] = ()  # post-mortems the tracker wrote

    @property
    def key(self) -> tuple[int, int]:
        return (self.gpu_index, self.process.pid)

    @property
    def command(self) -> str:
        host = self.process.host
        return host.command.get("") or host.name.get("")


class GpuRow(msgspec.Struct, frozen=True):
    gpu: Gpu
    used_percent: float | None


class Exit(msgspec.Struct, frozen=True):
    gpu_index: int
    pid: int
    command: str


class Unmatched(msgspec.Struct, frozen=True):
    """A tracked process using a shown GPU that NVML does not list there: in a container NVML
    gives host PIDs while the tracker knows its own, and no safe rule can pair them."""

    pid: int
    command: str
    gpu_index: int
    breakdown: Breakdown  # other_bytes is None: NVML's figure for it is unknown


class MemoryView(msgspec.Struct, frozen=True):
    machine: Machine
    gpus: tuple[GpuRow, ...]
    processes: tuple[ProcessRow, ...]
    total_used_bytes: int
    total_bytes: int
    exited: tuple[Exit, ...] = ()  # seen last sample, gone now (watch)
    lost: tuple[int, ...] = ()  # GPUs lost since the last sample (watch)
    unmatched: tuple[Unmatched, ...] = ()  # tracked processes NVML does not list on their GPU
    forecasts: tuple[Forecast, ...] = ()  # GPUs and processes forecast to fill up (soonest first)

    @property
    def processes_used_bytes(self) -> int:
        """What NVML attributes to the listed processes (those with a per-process figure)."""
        return sum(r.process.used_memory_bytes.get(0) for r in self.processes)

    @property
    def lost_gpus(self) -> tuple[int, ...]:
        return tuple(r.gpu.index for r in self.gpus if r.gpu.state is GpuState.LOST)
