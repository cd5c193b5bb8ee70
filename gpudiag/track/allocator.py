"""PyTorch's CUDA caching allocator as the training process sees it (standard library only).

Everything here takes the program's own ``torch`` module and only reads: ``memory_stats``
(counters, no synchronisation) every publication, and ``memory_snapshot`` (every segment and
block; costs more, so only on request or when the counters show fragmentation) for the largest
free block. Key names and shapes are PyTorch's (``torch/cuda/memory.py``: ``memory_stats``,
``_snapshot``'s ``Segment`` and ``Block``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

# Entry key -> torch.cuda.memory_stats key. The first six were published from the start (0 when
# absent); the others are None when this torch or allocator backend does not report them.
BASE_STATS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "peak_allocated_bytes": "allocated_bytes.all.peak",
    "peak_reserved_bytes": "reserved_bytes.all.peak",
    "alloc_retries": "num_alloc_retries",
    "ooms": "num_ooms",
}
FRAGMENTATION_STATS = {
    "active_bytes": "active_bytes.all.current",  # allocated + freed blocks still in use by a stream
    "inactive_split_bytes": "inactive_split_bytes.all.current",  # free, but inside a segment in use
    "inactive_split_blocks": "inactive_split.all.current",
    "segments": "segment.all.current",  # cudaMalloc'd segments
}
ALLOC_CONF_ENVS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")  # the second: torch >= 2.9's generic name


def device_figures(stats: Mapping[str, Any]) -> dict[str, int | None]:
    """The entry's figures for one device from ``torch.cuda.memory_stats(device)``."""
    out: dict[str, int | None] = {key: int(stats.get(name, 0)) for key, name in BASE_STATS.items()}
    for key, name in FRAGMENTATION_STATS.items():
        value = stats.get(name)
        out[key] = int(value) if value is not None else None
    return out


def segment_summary(segments: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per device: the largest free block a new large request could be given without cudaMalloc.

    Only free (``inactive``) blocks of large segments in the default pool count: the small
    pool serves requests under 1 MiB, and a private pool (CUDA graphs, ``MemPool``) serves only
    its owner. A block serves only its own stream; the largest over every stream is reported.
    """
    out: dict[int, dict[str, Any]] = {}
    for seg in segments:
        device = int(seg.get("device", 0))
        summary = out.setdefault(
            device,
            {"largest_free_block_bytes": 0, "free_blocks": 0, "free_in_large_segments_bytes": 0, "expandable": None},
        )
        if "is_expandable" in seg:
            summary["expandable"] = bool(summary["expandable"]) or bool(seg["is_expandable"])
        pool = tuple(seg.get("segment_pool_id") or (0, 0))
        if seg.get("segment_type") != "large" or pool != (0, 0):
            continue
        for block in seg.get("blocks", ()):
            if block.get("state") != "inactive":
                continue
            size = int(block.get("size", 0))
            summary["free_blocks"] += 1
            summary["free_in_large_segments_bytes"] += size
            summary["largest_free_block_bytes"] = max(summary["largest_free_block_bytes"], size)
    return out


def take_segments(torch: Any) -> list[Any]:
    """``torch.cuda.memory_snapshot()`` without the allocation history (torch >= 2.10 can leave it out)."""
    try:
        return list(torch.cuda.memory_snapshot(include_traces=False))
    except TypeError:  # an older torch: no include_traces
        return list(torch.cuda.memory_snapshot())


def fragmentation_worth_a_look(figures: Mapping[str, int | None]) -> bool:
    """Counters that make the segment walk worth its cost: a quarter of the reserved memory free
    but split inside segments in use (at least 256 MiB), or the allocator had to retry."""
    split = figures.get("inactive_split_bytes") or 0
    reserved = figures.get("reserved_bytes") or 0
    return bool(figures.get("alloc_retries")) or (split >= 256 * 1024**2 and split * 4 >= reserved)


def alloc_conf(environ: Mapping[str, str] = os.environ) -> str | None:
    """The allocator's settings as the program was started with them (expandable_segments, …)."""
    values = [environ[name] for name in ALLOC_CONF_ENVS if environ.get(name)]
    return ",".join(values) if values else None


def _int_env(environ: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def rank_info(environ: Mapping[str, str] = os.environ, torch: Any = None) -> dict[str, Any]:
    """The process's place in a distributed job: torchrun, accelerate, DeepSpeed and Lightning set
    RANK / LOCAL_RANK / WORLD_SIZE; an initialised ``torch.distributed`` group says it too.

    The job is named by torchrun's run id, else the rendezvous address, else the Slurm job: ranks
    that share it are one job.
    """
    rank = _int_env(environ, "RANK")
    world = _int_env(environ, "WORLD_SIZE")
    if rank is None and torch is not None:
        dist = getattr(torch, "distributed", None)
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                rank, world = int(dist.get_rank()), int(dist.get_world_size())
        except Exception:
            pass
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        job = f"torchrun:{run_id}"
    elif environ.get("MASTER_ADDR") and environ.get("MASTER_PORT"):
        job = f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}"
    elif environ.get("SLURM_JOB_ID"):
        job = f"slurm:{environ['SLURM_JOB_ID']}"
    else:
        job = None
    return {"rank": rank, "local_rank": _int_env(environ, "LOCAL_RANK"), "world_size": world, "job": job}
