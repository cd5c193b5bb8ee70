"""Distributed jobs on the machine: tracked processes grouped by job and rank, and the imbalances
whose cause is recognisable.

- A rank that also holds a few hundred MiB on another GPU (a CUDA context, no tensors): it touched
  that GPU (usually cuda:0) before ``torch.cuda.set_device(local_rank)``, as every rank does when a
  tensor is created on ``"cuda"`` or a collective starts before the device is set.
- One rank holding much more than the others: with the tracker, whether the extra is tensors (a
  rank keeping buffers: gathered outputs or metrics, a consolidated state_dict, evaluation) or
  cache left by a one-off peak.
DataParallel (one process on several GPUs, the first one heavier) is :func:`gpudiag.memory.insights.insights`'.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from gpudiag.memory.view import MemoryView, ProcessRow
from gpudiag.trend import median, size_text

# One GPU holding this much more than the others (and at least this much) is worth a line:
# here between the ranks of a job, in memory.insights between the GPUs of one process.
IMBALANCE_RATIO = 1.2
IMBALANCE_MIN_BYTES = 512 * 1024 * 1024

CONTEXT_MAX_BYTES = 1024**3  # what a CUDA context with no tensors takes, at most (300-600 MiB typically)


class Job(msgspec.Struct, frozen=True):
    name: str  # torchrun's run id, the rendezvous address, the Slurm job; "" for ranks with none
    world_size: int | None
    rows: tuple[ProcessRow, ...]  # each rank's row on its main GPU, by rank


def _main_rows(view: MemoryView) -> dict[int, ProcessRow]:
    """Each tracked PID's row on the GPU where it holds the most."""
    best: dict[int, ProcessRow] = {}
    for row in view.processes:
        if row.rank is None:
            continue
        pid = row.process.pid
        if pid not in best or row.process.used_memory_bytes.get(0) > best[pid].process.used_memory_bytes.get(0):
            best[pid] = row
    return best


def jobs(view: MemoryView) -> list[Job]:
    """Tracked processes that know their rank, by job, ranks in order."""
    groups: dict[str, list[ProcessRow]] = {}
    for row in _main_rows(view).values():
        assert row.rank is not None
        groups.setdefault(row.rank.job or "", []).append(row)
    out = []
    for name, rows in sorted(groups.items()):
        rows.sort(key=lambda r: (r.rank.rank if r.rank and r.rank.rank is not None else 1 << 30, r.process.pid))
        world = next((r.rank.world_size for r in rows if r.rank and r.rank.world_size), None)
        out.append(Job(name, world, tuple(rows)))
    return out


def context_only_rows(view: MemoryView) -> list[ProcessRow]:
    """Rows of a process that holds far more on another GPU and only a context's worth here."""
    by_pid: dict[int, list[ProcessRow]] = {}
    for row in view.processes:
        if row.process.used_memory_bytes.ok and row.mig is None:
            by_pid.setdefault(row.process.pid, []).append(row)
    out = []
    for rows in by_pid.values():
        if len(rows) != 2:
            continue
        small, big = sorted(rows, key=lambda r: r.process.used_memory_bytes.get(0))
        low, high = small.process.used_memory_bytes.get(0), big.process.used_memory_bytes.get(0)
        context_only = low <= CONTEXT_MAX_BYTES < high
        if context_only and (small.breakdown is None or small.breakdown.reserved_bytes == 0):
            out.append(small)
    return out


def _ranks_text(rows: Iterable[ProcessRow]) -> str:
    parts = []
    for r in rows:
        rank = f"rank {r.rank.rank} " if r.rank is not None and r.rank.rank is not None else ""
        parts.append(f"{rank}PID {r.process.pid}")
    return ", ".join(parts)


def insights(view: MemoryView) -> list[str]:
    lines = []
    stray = context_only_rows(view)
    by_gpu: dict[int, list[ProcessRow]] = {}
    for row in stray:
        by_gpu.setdefault(row.gpu_index, []).append(row)
    for gpu, rows in sorted(by_gpu.items()):
        typical = median(r.process.used_memory_bytes.get(0) for r in rows)
        tracked = {r.process.pid: r for r in view.processes if r.rank is not None}
        named = [tracked.get(r.process.pid, r) for r in rows]
        lines.append(
            f"GPU {gpu} holds a CUDA context (about {size_text(typical)}, no tensors) for each of {len(rows)} "
            f"process(es) whose work is on another GPU ({_ranks_text(named)}): they touched cuda:{gpu} before "
            "torch.cuda.set_device(local_rank) (a tensor made on 'cuda', a collective before the device was set); "
            "set the device first"
        )
    for job in jobs(view):
        lines += _job_imbalance(job)
    return lines


def _job_imbalance(job: Job) -> list[str]:
    if len(job.rows) < 2:
        return []
    used = [r.process.used_memory_bytes.get(0) for r in job.rows]
    typical = median(used)
    heavy = max(job.rows, key=lambda r: r.process.used_memory_bytes.get(0))
    top = heavy.process.used_memory_bytes.get(0)
    if not (top > IMBALANCE_RATIO * typical and top - typical >= IMBALANCE_MIN_BYTES):
        return []
    rank = heavy.rank.rank if heavy.rank is not None else None
    who = f"Rank {rank} (PID {heavy.process.pid}, GPU {heavy.gpu_index})"
    name = f"job {job.name}" if job.name else "its job"
    head = f"{who} holds {size_text(top)}, {size_text(top - typical)} more than the median rank of {name}"
    b = heavy.breakdown
    others = [r.breakdown for r in job.rows if r is not heavy and r.breakdown is not None]
    if b is None or not others:
        return [head + ": one rank keeping extra buffers; the others wait for it at each collective"]
    extra_tensors = b.allocated_bytes - median(o.allocated_bytes for o in others)
    extra_cache = b.cached_free_bytes - median(o.cached_free_bytes for o in others)
    if extra_tensors >= extra_cache:
        return [
            head + f": {size_text(max(0, extra_tensors))} of it is tensors, so this rank keeps buffers the others "
            "do not (outputs or metrics gathered to it, a full state_dict consolidated for a checkpoint, evaluation "
            "run on it alone); move that work off the training path or spread it"
        ]
    return [
        head + f": {size_text(max(0, extra_cache))} of it is cache (reserved, free), left by a peak only this rank "
        "had (evaluation, checkpointing, a longer batch); torch.cuda.empty_cache() after that phase returns it"
    ]
