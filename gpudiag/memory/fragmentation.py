"""Fragmentation of PyTorch's caching allocator, and what to do about it, for tracked processes.

The allocator keeps freed blocks reserved. Free blocks that fill a whole segment can go back to
the driver (``empty_cache()``); free blocks *split* inside a segment that still holds a tensor
cannot (``inactive_split_bytes``, "non-releasable memory" in ``torch.cuda.memory_summary()``), and
a request larger than the largest free block needs a new segment even with gigabytes free: the OOM
whose message ends "If reserved but unallocated memory is large try setting
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation".
"""

from __future__ import annotations

from gpudiag.memory.view import MemoryView, ProcessRow
from gpudiag.trend import size_text

EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
MIN_SPLIT_BYTES = 1024**3  # below a GiB, fragmentation is not worth a line
MIN_SPLIT_PERCENT = 20.0
EMPTY_CACHE_MIN_BYTES = 1024**3
LOW_FREE_PERCENT = 10.0  # a GPU this full has someone who would use what empty_cache() returns


def fragmented(row: ProcessRow) -> bool:
    b = row.breakdown
    if b is None or b.inactive_split_bytes is None:
        return False
    percent = b.fragmentation_percent or 0.0
    return b.inactive_split_bytes >= MIN_SPLIT_BYTES and percent >= MIN_SPLIT_PERCENT


def fragmentation_line(row: ProcessRow) -> str:
    """Why a fragmented process's free memory is not usable, and the setting that helps."""
    b = row.breakdown
    assert b is not None and b.inactive_split_bytes is not None
    largest = (
        f"; the largest free block is {size_text(b.largest_free_block_bytes)}"
        if b.largest_free_block_bytes is not None
        else ""
    )
    retries = (
        f", and the allocator retried {b.alloc_retries} time(s) after flushing its cache" if b.alloc_retries else ""
    )
    head = (
        f"PID {row.process.pid} on GPU {row.gpu_index} (cuda:{b.torch_index}): {size_text(b.inactive_split_bytes)} "
        f"({b.fragmentation_percent:.0f}% of reserved) is free but split inside segments that hold tensors{largest}"
        f"{retries}: fragmentation, which empty_cache() cannot return"
    )
    if b.expandable_segments:
        return head + "; segments are already expandable: tensor sizes vary from step to step (pad or bucket them)"
    return head + f"; {EXPANDABLE} grows segments in place instead of splitting them"


def empty_cache_advice(row: ProcessRow, view: MemoryView) -> str:
    """Where empty_cache() would help: a large releasable cache on a GPU others are short of."""
    b = row.breakdown
    if b is None or b.releasable_bytes is None or b.releasable_bytes < EMPTY_CACHE_MIN_BYTES:
        return ""
    gpu = next((r for r in view.gpus if r.gpu.index == row.gpu_index), None)
    others = [r for r in view.processes if r.gpu_index == row.gpu_index and r.process.pid != row.process.pid]
    if gpu is None or gpu.used_percent is None or not others or 100 - gpu.used_percent > LOW_FREE_PERCENT:
        return ""
    return (
        f"GPU {row.gpu_index} is {gpu.used_percent:.0f}% full and {len(others)} other process(es) use it: "
        f"torch.cuda.empty_cache() in PID {row.process.pid} would give them {size_text(b.releasable_bytes)} (once, "
        "after a phase that peaked, such as evaluation; in the training loop it only slows the allocator)"
    )


def lines(view: MemoryView) -> list[str]:
    out = []
    for row in view.processes:
        if fragmented(row):
            out.append(fragmentation_line(row))
        advice = empty_cache_advice(row, view)
        if advice:
            out.append(advice)
    return out
