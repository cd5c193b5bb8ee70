"""What the memory figures mean, in lines: what empty_cache() returns, the allocator's trouble signs,
DataParallel's heavy first GPU, ranks, fragmentation, forecasts, a GPU that waits instead of computing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudiag.memory.ranks import IMBALANCE_MIN_BYTES, IMBALANCE_RATIO
from gpudiag.memory.view import MemoryView, ProcessRow, Unmatched
from gpudiag.model import HostState, ProcessKind

if TYPE_CHECKING:
    from gpudiag.memory.state import WatchState


def empty_cache_line(row: ProcessRow) -> str:
    """One line on what torch.cuda.empty_cache() would give back to other processes."""
    from gpudiag.units import human_bytes

    b = row.breakdown
    if b is None or (b.reserved_bytes == 0 and b.inactive_split_bytes is not None):
        return ""  # (a newer tracker's) device with nothing reserved: a context, said by memory.ranks
    kept = f"; {human_bytes(b.allocated_bytes)} is tensors"
    if b.other_bytes is not None:
        kept += f", {human_bytes(b.other_bytes)} context and libraries"
    elif b.published_at is not None and row.process.used_memory_bytes.value is not None:
        kept += " (context and libraries not split off while its reserved memory grows between the tracker's figures)"
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


LOW_UTIL_PERCENT = 30.0
LOW_UTIL_SAMPLES = 10  # judge utilization over this many samples, never one


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
        # Replicas on the other GPUs: a context's worth there is a rank that touched cuda:0 (memory.ranks).
        replicas = typical > 1024**3
        if top > IMBALANCE_RATIO * typical and top - typical >= IMBALANCE_MIN_BYTES and replicas:
            lines.append(
                f"PID {pid} holds {human_bytes(top)} on GPU {rows[0].gpu_index} but about {human_bytes(typical)} on "
                f"its other {len(rest)} GPU(s), as under DataParallel, which keeps the module and gathers outputs on "
                "device_ids[0] (output_device); DistributedDataParallel spreads it evenly"
            )
    if any(r.rank is not None for r in view.processes) or len(by_pid) < len(view.processes):
        from gpudiag.memory import ranks

        lines += ranks.insights(view)
    if any(r.breakdown is not None and r.breakdown.inactive_split_bytes is not None for r in view.processes):
        from gpudiag.memory import fragmentation

        lines += fragmentation.lines(view)
    if view.forecasts:
        from gpudiag.memory.forecast import forecast_line

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
