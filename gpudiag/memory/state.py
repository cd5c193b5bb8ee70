"""What a memory watch remembers between samples: history for sparklines, peaks, which processes
appeared or exited, which GPUs were lost, events, and the series its forecasts read."""

from __future__ import annotations

from collections import deque

import msgspec

from gpudiag.memory.view import Exit, Forecast, MemoryView, ProcessRow
from gpudiag.model import GpuState

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
            # The growth the forecasts measured ended in this OOM: forecast again only from what follows.
            self.used_series.pop(row.gpu_index, None)
            self.process_series.pop(row.key, None)

    def _forecasts(self, view: MemoryView) -> tuple[Forecast, ...]:
        from gpudiag.memory.forecast import MIN_SAMPLES, merge, series_forecast

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
