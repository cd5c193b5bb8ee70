"""Where the GPU memory went: NVML's figures joined with PyTorch's allocator view.

Pure functions over a Machine and the tracker's entries; the watch state keeps history,
peaks, and which processes appeared or exited between samples.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpudiag.model import Gpu, GpuProcess, GpuState, HostState, Machine
from gpudiag.track import TrackedDevice, TrackedProcess


@dataclass(frozen=True)
class Breakdown:
    """NVML's per-process figure split by what PyTorch knows."""

    allocated_bytes: int  # live tensors
    cached_free_bytes: int  # reserved by the caching allocator but free: what empty_cache() can return
    other_bytes: int  # the rest of NVML's figure: CUDA context, cuBLAS/cuDNN workspaces, other libraries
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    alloc_retries: int
    ooms: int


@dataclass(frozen=True)
class ProcessRow:
    gpu_index: int
    process: GpuProcess
    share_percent: float | None  # of the GPU's total memory
    breakdown: Breakdown | None
    status: str = ""  # "new" / "" in watch mode


@dataclass(frozen=True)
class GpuRow:
    gpu: Gpu
    used_percent: float | None


@dataclass(frozen=True)
class MemoryView:
    machine: Machine
    gpus: tuple[GpuRow, ...]
    processes: tuple[ProcessRow, ...]
    total_used_bytes: int
    total_bytes: int
    exited: tuple[tuple[int, int, str], ...] = ()  # (gpu, pid, command) seen last sample, gone now


def _uuid_core(uuid: str) -> str:
    return uuid.removeprefix("GPU-").removeprefix("MIG-").lower()


def breakdown(nvml_used: int | None, device: TrackedDevice) -> Breakdown:
    other = max(0, nvml_used - device.reserved_bytes) if nvml_used is not None else 0
    return Breakdown(
        allocated_bytes=device.allocated_bytes,
        cached_free_bytes=max(0, device.reserved_bytes - device.allocated_bytes),
        other_bytes=other,
        peak_allocated_bytes=device.peak_allocated_bytes,
        peak_reserved_bytes=device.peak_reserved_bytes,
        alloc_retries=device.alloc_retries,
        ooms=device.ooms,
    )


def _tracked_device(gpu: Gpu, entry: TrackedProcess | None) -> TrackedDevice | None:
    if entry is None or gpu.uuid.value is None:
        return None
    for dev in entry.devices:
        if dev.uuid and _uuid_core(dev.uuid) == _uuid_core(gpu.uuid.value):
            return dev
    return None


def build(machine: Machine, tracked: dict[int, TrackedProcess], ids: set[int] | None = None) -> MemoryView:
    """The memory picture of the machine; ``ids`` limits it to these NVML indices."""
    gpu_rows: list[GpuRow] = []
    proc_rows: list[ProcessRow] = []
    total_used = total = 0
    for gpu in machine.gpus:
        if ids is not None and gpu.index not in ids:
            continue
        mem = gpu.memory.value
        used_percent = 100.0 * mem.used_bytes / mem.total_bytes if mem and mem.total_bytes else None
        if mem is not None:
            total_used += mem.used_bytes
            total += mem.total_bytes
        gpu_rows.append(GpuRow(gpu, used_percent))
        for proc in sorted(gpu.processes.get(()), key=lambda p: -p.used_memory_bytes.get(0)):
            used = proc.used_memory_bytes.value
            share = 100.0 * used / mem.total_bytes if used is not None and mem and mem.total_bytes else None
            device = _tracked_device(gpu, tracked.get(proc.pid))
            proc_rows.append(ProcessRow(gpu.index, proc, share, breakdown(used, device) if device else None))
    return MemoryView(machine, tuple(gpu_rows), tuple(proc_rows), total_used, total)


def empty_cache_line(row: ProcessRow) -> str:
    """One line on what torch.cuda.empty_cache() would give back to other processes."""
    from gpudiag.units import human_bytes

    b = row.breakdown
    if b is None:
        return ""
    return (
        f"PID {row.process.pid} on GPU {row.gpu_index}: torch.cuda.empty_cache() would return up to "
        f"{human_bytes(b.cached_free_bytes)} (cached but unused); {human_bytes(b.allocated_bytes)} is live tensors "
        f"and {human_bytes(b.other_bytes)} is the CUDA context and libraries, which it cannot free"
    )


HISTORY = 60  # samples kept for sparklines


@dataclass
class WatchState:
    """What the watch remembers between samples."""

    history: dict[int, deque[float]] = field(default_factory=dict)  # used % per GPU
    util_history: dict[int, deque[float]] = field(default_factory=dict)
    peak_used: dict[int, int] = field(default_factory=dict)
    seen: dict[tuple[int, int], str] = field(default_factory=dict)  # (gpu, pid) -> command
    samples: int = 0

    def update(self, view: MemoryView) -> MemoryView:
        """Record a sample; mark new processes and list the ones that exited."""
        self.samples += 1
        for row in view.gpus:
            gpu, mem = row.gpu, row.gpu.memory.value
            if row.used_percent is not None:
                self.history.setdefault(gpu.index, deque(maxlen=HISTORY)).append(row.used_percent)
            util = gpu.utilization.value
            if util is not None:
                self.util_history.setdefault(gpu.index, deque(maxlen=HISTORY)).append(float(util.gpu_percent))
            if mem is not None:
                self.peak_used[gpu.index] = max(self.peak_used.get(gpu.index, 0), mem.used_bytes)
        now: dict[tuple[int, int], str] = {}
        rows = []
        for prow in view.processes:
            key = (prow.gpu_index, prow.process.pid)
            now[key] = prow.process.host.command.get("") or prow.process.host.name.get("")
            is_new = self.samples > 1 and key not in self.seen
            rows.append(
                ProcessRow(prow.gpu_index, prow.process, prow.share_percent, prow.breakdown, "new" if is_new else "")
            )
        exited = tuple((g, p, cmd) for (g, p), cmd in self.seen.items() if (g, p) not in now)
        self.seen = now
        return MemoryView(view.machine, view.gpus, tuple(rows), view.total_used_bytes, view.total_bytes, exited)


def min_free(view: MemoryView) -> int | None:
    """The least free memory among usable GPUs (for --alert-free-below)."""
    frees = [r.gpu.memory.value.free_bytes for r in view.gpus if r.gpu.memory.value is not None]
    return min(frees) if frees else None


def max_free(view: MemoryView) -> tuple[int, int] | None:
    """(GPU index, free bytes) of the GPU with the most free memory (for --until-free)."""
    best = None
    for r in view.gpus:
        mem = r.gpu.memory.value
        if r.gpu.state is GpuState.OK and mem is not None and (best is None or mem.free_bytes > best[1]):
            best = (r.gpu.index, mem.free_bytes)
    return best


def foreign_count(view: MemoryView) -> int:
    return sum(1 for r in view.processes if r.process.host.state is HostState.OTHER_NAMESPACE)
