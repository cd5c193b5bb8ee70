"""Where the GPU memory went: NVML's figures joined with PyTorch's allocator view.

Pure functions over a Machine and the tracker's entries; the watch state keeps history,
peaks, which processes appeared or exited between samples, and which GPUs were lost.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import msgspec

from gpudiag.model import FactGroup, Gpu, GpuProcess, GpuState, HostState, Machine, MigDevice, ProcessKind
from gpudiag.selection import normalize_bus_id

if TYPE_CHECKING:  # the tracker's module (and tempfile) load only where entries are read
    from gpudiag.track import TrackedDevice, TrackedProcess

# What the memory views, JSON, logs and metrics use; the memory command reads nothing else.
GROUPS = frozenset({FactGroup.MEMORY, FactGroup.UTILIZATION, FactGroup.MIG, FactGroup.PROCESSES})


class Breakdown(msgspec.Struct, frozen=True):
    """NVML's per-process figure split by what PyTorch knows."""

    allocated_bytes: int  # live tensors
    cached_free_bytes: int  # reserved by the caching allocator but free: what empty_cache() can return
    other_bytes: int | None  # the rest of NVML's figure: CUDA context, cuBLAS/cuDNN workspaces, NCCL, other
    # libraries; None when NVML gives no per-process figure
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


# --- matching tracker entries to NVML's processes ------------------------------------


def _uuid_core(uuid: str) -> str:
    return uuid.strip().removeprefix("GPU-").removeprefix("MIG-").lower()


def _mig_of(gpu: Gpu, proc: GpuProcess) -> MigDevice | None:
    if proc.gpu_instance_id is None:
        return None
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id.value == proc.gpu_instance_id and (
            proc.compute_instance_id is None
            or mig.compute_instance_id.value is None
            or mig.compute_instance_id.value == proc.compute_instance_id
        ):
            return mig
    return None


def is_device(gpu: Gpu, mig: MigDevice | None, dev: TrackedDevice) -> bool:
    """Whether the tracker's device is this GPU (or this MIG instance): by UUID, else by PCI bus id."""
    uuid = (mig.uuid if mig is not None else gpu.uuid).value
    if dev.uuid:
        return bool(uuid) and _uuid_core(dev.uuid) == _uuid_core(uuid or "")
    bus = gpu.pci_bus_id.value
    # A MIG instance shares its parent's bus id: only a UUID can name it.
    return (
        mig is None and bool(bus and dev.pci_bus_id) and normalize_bus_id(dev.pci_bus_id) == normalize_bus_id(bus or "")
    )


def tracked_device(gpu: Gpu, mig: MigDevice | None, entry: TrackedProcess | None) -> TrackedDevice | None:
    """The entry's device that is this GPU (or MIG instance), if any."""
    if entry is None:
        return None
    return next((dev for dev in entry.devices if is_device(gpu, mig, dev)), None)


def breakdown(nvml_used: int | None, device: TrackedDevice) -> Breakdown:
    """Split NVML's figure for one process on one device.

    NVML's figure is everything the driver gave the process: the allocator's reserved
    segments (live tensors + cached free blocks) plus the CUDA context, kernels and other
    libraries' own allocations. The tracker samples every few seconds, so the remainder is
    clamped at 0 when its reserved figure is newer than NVML's.
    """
    return Breakdown(
        allocated_bytes=device.allocated_bytes,
        cached_free_bytes=max(0, device.reserved_bytes - device.allocated_bytes),
        other_bytes=max(0, nvml_used - device.reserved_bytes) if nvml_used is not None else None,
        peak_allocated_bytes=device.peak_allocated_bytes,
        peak_reserved_bytes=device.peak_reserved_bytes,
        alloc_retries=device.alloc_retries,
        ooms=device.ooms,
        torch_index=device.torch_index,
        inactive_split_bytes=device.inactive_split_bytes,
        active_bytes=device.active_bytes,
        segments=device.segments,
        largest_free_block_bytes=device.largest_free_block_bytes,
        expandable_segments=device.expandable_segments,
    )


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
        for proc in sorted(gpu.processes.get(()), key=lambda p: (-p.used_memory_bytes.get(0), p.pid)):
            mig = _mig_of(gpu, proc)
            capacity = (mig.memory.value if mig is not None else mem) or None
            used = proc.used_memory_bytes.value
            share = (
                100.0 * used / capacity.total_bytes if used is not None and capacity and capacity.total_bytes else None
            )
            entry = tracked.get(proc.pid)
            device = tracked_device(gpu, mig, entry)
            row = ProcessRow(gpu.index, proc, share, breakdown(used, device) if device else None, mig=mig)
            if entry is not None and device is not None:
                row = _training(row, entry, device.torch_index)
            proc_rows.append(row)
    view = MemoryView(
        machine,
        tuple(gpu_rows),
        tuple(proc_rows),
        total_used,
        total,
        unmatched=_unmatched(gpu_rows, proc_rows, tracked),
    )
    if any(r.steps is not None for r in proc_rows):
        from gpudiag.memory_forecast import step_forecasts

        view = msgspec.structs.replace(view, forecasts=step_forecasts(view))
    return view


def _training(row: ProcessRow, entry: TrackedProcess, torch_index: int) -> ProcessRow:
    """The row with what the tracker knows of the training: rank, steps, post-mortems."""
    rank = None
    if entry.rank is not None or entry.world_size is not None:
        rank = Rank(entry.rank, entry.local_rank, entry.world_size, entry.job)
    steps = None
    if entry.steps is not None:
        from gpudiag.memory_forecast import step_stats

        steps = step_stats(entry.steps, torch_index, entry.updated_at)
    return msgspec.structs.replace(row, rank=rank, steps=steps, oom_reports=entry.oom_reports)


def _unmatched(
    gpu_rows: list[GpuRow], proc_rows: list[ProcessRow], tracked: dict[int, TrackedProcess]
) -> tuple[Unmatched, ...]:
    matched = {(r.process.pid, r.breakdown.torch_index) for r in proc_rows if r.breakdown is not None}
    out = []
    for entry in tracked.values():
        for dev in entry.devices:
            if (entry.pid, dev.torch_index) in matched or dev.reserved_bytes == 0:
                continue  # shown in its row, or a device the program never allocated on
            for row in gpu_rows:
                if any(is_device(row.gpu, mig, dev) for mig in (None, *row.gpu.mig_devices)):
                    out.append(Unmatched(entry.pid, entry.command, row.gpu.index, breakdown(None, dev)))
                    break
    return tuple(out)


def empty_cache_line(row: ProcessRow) -> str:
    """One line on what torch.cuda.empty_cache() would give back to other processes."""
    from gpudiag.units import human_bytes

    b = row.breakdown
    if b is None or (b.reserved_bytes == 0 and b.inactive_split_bytes is not None):
        return ""  # (a newer tracker's) device with nothing reserved: a context, said by memory_ranks
    kept = f"; {human_bytes(b.allocated_bytes)} is tensors"
    if b.other_bytes is not None:
        kept += f", {human_bytes(b.other_bytes)} context and libraries"
    returned = human_bytes(b.cached_free_bytes)
    if b.releasable_bytes is not None and b.inactive_split_bytes:
        returned = (
            f"{human_bytes(b.releasable_bytes)} ({human_bytes(b.inactive_split_bytes)} more is free but split "
            "inside segments in use)"
        )
    return (
        f"PID {row.process.pid} on GPU {row.gpu_index} (cuda:{b.torch_index}): empty_cache() would return "
        f"{returned}{kept}"
    )


def unmatched_line(u: Unmatched) -> str:
    from gpudiag.units import human_bytes

    b = u.breakdown
    return (
        f"Tracked PID {u.pid} ({u.command}) uses GPU {u.gpu_index} (cuda:{b.torch_index}) but NVML lists no such PID "
        f"there (in a container NVML gives host PIDs): {human_bytes(b.allocated_bytes)} tensors, "
        f"{human_bytes(b.cached_free_bytes)} cached that empty_cache() would return"
    )


def peaks_line(row: ProcessRow) -> str:
    """The allocator's trouble signs and peaks (a retry is a cache flush to satisfy a request)."""
    b = row.breakdown
    if b is None:
        return ""
    from gpudiag.units import human_bytes

    return (
        f"PID {row.process.pid} on GPU {row.gpu_index}: {b.ooms} out-of-memory error(s), {b.alloc_retries} "
        f"allocator retries; peaks: {human_bytes(b.peak_allocated_bytes)} allocated, "
        f"{human_bytes(b.peak_reserved_bytes)} reserved"
    )


# --- watching ------------------------------------------------------------------------

HISTORY = 60  # samples kept for sparklines
FORECAST_WINDOW = 120  # samples a forecast looks back over (2 minutes at the default interval)
MARK_SAMPLES = 5  # a new process keeps its mark, an exit its line, for this many samples
EVENTS = 8  # events kept for the live view


class WatchState(msgspec.Struct):
    """What the watch remembers between samples."""

    history: dict[int, deque[float]] = msgspec.field(default_factory=dict)  # used % per GPU
    util_history: dict[int, deque[float]] = msgspec.field(default_factory=dict)
    peak_used: dict[int, int] = msgspec.field(default_factory=dict)  # per GPU, since the watch started
    peak_process: dict[tuple[int, int], int] = msgspec.field(default_factory=dict)  # (gpu, pid) -> NVML used
    seen: dict[tuple[int, int], str] = msgspec.field(default_factory=dict)  # (gpu, pid) -> command
    first_seen: dict[tuple[int, int], int] = msgspec.field(default_factory=dict)  # sample number
    lost: set[int] = msgspec.field(default_factory=set)
    events: deque[tuple[float, str]] = msgspec.field(default_factory=lambda: deque(maxlen=EVENTS))
    used_series: dict[int, deque[tuple[float, int]]] = msgspec.field(default_factory=dict)  # (time, used) per GPU
    process_series: dict[tuple[int, int], deque[tuple[float, int]]] = msgspec.field(default_factory=dict)
    ooms: dict[tuple[int, int], int] = msgspec.field(default_factory=dict)  # (pid, cuda index) -> OOM count
    samples: int = 0
    last_at: float = 0.0  # wall time of the last sample

    def update(self, view: MemoryView, at: float = 0.0) -> MemoryView:
        """Record a sample taken at ``at``: mark new processes, list exits and newly lost GPUs."""
        self.samples += 1
        self.last_at = at
        readable: set[int] = set()  # GPUs whose process list was read this time
        newly_lost: list[int] = []
        for row in view.gpus:
            gpu, mem = row.gpu, row.gpu.memory.value
            if gpu.state is GpuState.LOST:
                if gpu.index not in self.lost:
                    newly_lost.append(gpu.index)
                    self.events.append((at, f"GPU {gpu.index} lost: {gpu.state_detail}"))
                self.lost.add(gpu.index)
            elif gpu.index in self.lost:
                self.lost.discard(gpu.index)
                self.events.append((at, f"GPU {gpu.index} is back"))
            if gpu.processes.ok:
                readable.add(gpu.index)
            if row.used_percent is not None:
                self.history.setdefault(gpu.index, deque(maxlen=HISTORY)).append(row.used_percent)
            util = gpu.utilization.value
            if util is not None:
                self.util_history.setdefault(gpu.index, deque(maxlen=HISTORY)).append(float(util.gpu_percent))
            if mem is not None:
                self.peak_used[gpu.index] = max(self.peak_used.get(gpu.index, 0), mem.used_bytes)
                self.used_series.setdefault(gpu.index, deque(maxlen=FORECAST_WINDOW)).append((at, mem.used_bytes))
        now: dict[tuple[int, int], str] = {}
        rows = []
        for prow in view.processes:
            key = prow.key
            now[key] = prow.command
            used = prow.process.used_memory_bytes.value
            if used is not None:
                self.peak_process[key] = max(self.peak_process.get(key, 0), used)
                self.process_series.setdefault(key, deque(maxlen=FORECAST_WINDOW)).append((at, used))
            self._note_ooms(prow, at)
            is_new = key not in self.seen
            if is_new:
                self.first_seen[key] = self.samples
                if self.samples > 1:
                    self.events.append((at, f"+ PID {key[1]} on GPU {key[0]} {prow.command}".rstrip()))
            rows.append(msgspec.structs.replace(prow, status="new" if is_new and self.samples > 1 else ""))
        exited = []
        for key, command in self.seen.items():
            if key in now:
                continue
            if key[0] not in readable:  # GPU lost or its process list unreadable: not known to have exited
                now[key] = command
                continue
            exited.append(Exit(key[0], key[1], command))
            self.events.append((at, f"- PID {key[1]} on GPU {key[0]} exited {command}".rstrip()))
            self.first_seen.pop(key, None)
            self.peak_process.pop(key, None)
            self.process_series.pop(key, None)
        self.seen = now
        view = msgspec.structs.replace(view, processes=tuple(rows), exited=tuple(exited), lost=tuple(newly_lost))
        return msgspec.structs.replace(view, forecasts=self._forecasts(view))

    def _note_ooms(self, row: ProcessRow, at: float) -> None:
        """An OOM count that rose since the last sample is an event (with the tracker's post-mortem)."""
        b = row.breakdown
        if b is None:
            return
        key = (row.process.pid, b.torch_index)
        before = self.ooms.get(key)
        self.ooms[key] = b.ooms
        if before is not None and b.ooms > before:
            where = f" post-mortem: {row.oom_reports[-1]}" if row.oom_reports else ""
            self.events.append((at, f"! PID {row.process.pid} ran out of memory on GPU {row.gpu_index}{where}"))

    def _forecasts(self, view: MemoryView) -> tuple[Forecast, ...]:
        from gpudiag.memory_forecast import MIN_SAMPLES, merge, series_forecast

        if self.samples < MIN_SAMPLES:
            return view.forecasts
        found = []
        free: dict[int, int] = {}
        for row in view.gpus:
            mem = row.gpu.memory.value
            if row.gpu.state is not GpuState.OK or mem is None:
                continue
            free[row.gpu.index] = mem.free_bytes
            f = series_forecast(list(self.used_series.get(row.gpu.index, ())), mem.total_bytes, row.gpu.index, None)
            if f is not None:
                found.append(f)
        stepped = {(f.gpu_index, f.pid) for f in view.forecasts}
        for prow in view.processes:
            used = prow.process.used_memory_bytes.value
            if prow.key in stepped or used is None or prow.gpu_index not in free:
                continue
            series = list(self.process_series.get(prow.key, ()))
            f = series_forecast(series, used + free[prow.gpu_index], prow.gpu_index, prow.process.pid)
            if f is not None:
                found.append(f)
        return merge(view.forecasts, found)

    def recently_new(self, row: ProcessRow) -> bool:
        """Whether the live view still marks this process as new."""
        first = self.first_seen.get(row.key)
        return first is not None and first > 1 and self.samples - first < MARK_SAMPLES


def min_free(view: MemoryView) -> tuple[int, int] | None:
    """(GPU index, free bytes) of the GPU with the least free memory (for --alert-free-below)."""
    worst: tuple[int, int] | None = None
    for r in view.gpus:
        mem = r.gpu.memory.value
        if r.gpu.state is GpuState.OK and mem is not None and (worst is None or mem.free_bytes < worst[1]):
            worst = (r.gpu.index, mem.free_bytes)
    return worst


def max_free(view: MemoryView) -> tuple[int, int] | None:
    """(GPU index, free bytes) of the GPU with the most free memory (for --until-free)."""
    best: tuple[int, int] | None = None
    for r in view.gpus:
        mem = r.gpu.memory.value
        if r.gpu.state is GpuState.OK and mem is not None and (best is None or mem.free_bytes > best[1]):
            best = (r.gpu.index, mem.free_bytes)
    return best


LOW_UTIL_PERCENT = 30.0
LOW_UTIL_SAMPLES = 10  # judge utilization over this many samples, never one
IMBALANCE_RATIO = 1.2
IMBALANCE_MIN_BYTES = 512 * 1024 * 1024


def insights(view: MemoryView, state: WatchState | None = None) -> list[str]:
    """What the figures mean, in the terms of the tutorials users learn from."""
    from gpudiag.units import human_bytes

    lines: list[str] = []
    by_pid: dict[int, list[ProcessRow]] = {}
    for row in view.processes:
        if row.process.used_memory_bytes.ok and row.mig is None:
            by_pid.setdefault(row.process.pid, []).append(row)
    for pid, rows in by_pid.items():
        if len(rows) < 2:
            continue
        rows = sorted(rows, key=lambda r: -r.process.used_memory_bytes.get(0))
        top = rows[0].process.used_memory_bytes.get(0)
        rest = sorted(r.process.used_memory_bytes.get(0) for r in rows[1:])
        typical = rest[len(rest) // 2]
        # Replicas on the other GPUs: a context's worth there is a rank that touched cuda:0 (memory_ranks).
        replicas = typical > 1024**3
        if top > IMBALANCE_RATIO * typical and top - typical >= IMBALANCE_MIN_BYTES and replicas:
            lines.append(
                f"PID {pid} holds {human_bytes(top)} on GPU {rows[0].gpu_index} but about {human_bytes(typical)} on "
                f"its other {len(rest)} GPU(s), as under DataParallel, which keeps the module and gathers outputs on "
                "device_ids[0] (output_device); DistributedDataParallel spreads it evenly"
            )
    if any(r.rank is not None for r in view.processes) or len(by_pid) < len(view.processes):
        from gpudiag import memory_ranks

        lines += memory_ranks.insights(view)
    if any(r.breakdown is not None and r.breakdown.inactive_split_bytes is not None for r in view.processes):
        from gpudiag import memory_fragmentation

        lines += memory_fragmentation.lines(view)
    if view.forecasts:
        from gpudiag.memory_forecast import forecast_line

        lines += [forecast_line(f, view) for f in view.forecasts[:3]]
    if state is not None:
        for gpu_row in view.gpus:
            index, used_percent = gpu_row.gpu.index, gpu_row.used_percent
            history = state.util_history.get(index, ())
            busy = any(p.gpu_index == index for p in view.processes)
            if len(history) >= LOW_UTIL_SAMPLES and used_percent is not None and used_percent >= 10 and busy:
                recent = list(history)[-LOW_UTIL_SAMPLES:]
                mean = sum(recent) / len(recent)
                if mean < LOW_UTIL_PERCENT:
                    lines.append(
                        f"GPU {index}: {mean:.0f}% utilization over the last {len(recent)} samples while "
                        f"{used_percent:.0f}% of its memory is held: the GPU is waiting (data loading, CPU "
                        "pre-processing, host-device copies or synchronisation), not computing"
                    )
    return lines


def foreign_count(view: MemoryView) -> int:
    return sum(1 for r in view.processes if r.process.host.state is HostState.OTHER_NAMESPACE)


def untracked_compute(view: MemoryView) -> bool:
    """Compute processes are shown and none is tracked: worth a tip on the tracker."""
    compute = [r for r in view.processes if r.process.kind is not ProcessKind.GRAPHICS]
    return bool(compute) and not any(r.breakdown for r in view.processes)
