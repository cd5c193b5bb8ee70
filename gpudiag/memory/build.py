"""The memory picture of a machine: NVML's per-process figures matched with the tracker's entries.

Pure: a Machine and the entries in, a :class:`~gpudiag.memory.view.MemoryView` out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from gpudiag.memory.view import Breakdown, GpuRow, MemoryView, ProcessRow, Rank, Unmatched
from gpudiag.model import Gpu, GpuProcess, Machine, MigDevice
from gpudiag.selection import normalize_bus_id

if TYPE_CHECKING:
    from gpudiag.track.entries import TrackedDevice, TrackedProcess

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


def reserved_steady(entry: TrackedProcess | None, device: TrackedDevice) -> bool:
    """Whether the allocator's reserved memory held still over the tracker's last interval: its previous
    publication (``recent``) had the same figure, or, before there was one, its last two step records
    did. Only then is NVML's figure, read at another moment than the publication, to be split by it.
    True when neither can tell."""
    if entry is None:
        return True
    before = [r for r in entry.recent if r[1] == device.torch_index and r[0] < entry.updated_at]
    if before:
        return before[-1][3] == device.reserved_bytes
    records = [r for r in entry.steps.records if r.torch_index == device.torch_index] if entry.steps else []
    return len(records) < 2 or records[-1].reserved_bytes == records[-2].reserved_bytes


def breakdown(
    nvml_used: int | None, device: TrackedDevice, *, steady: bool = True, published_at: float | None = None
) -> Breakdown:
    """Split NVML's figure for one process on one device.

    NVML's figure is everything the driver gave the process: the allocator's reserved
    segments (live tensors + cached free blocks) plus the CUDA context, kernels and other
    libraries' own allocations. The tracker publishes every few seconds, NVML is read now: the
    remainder is a figure only when the reserved memory was not moving (``steady``), else those two
    are of different moments (a leak of 8 GiB/s made 0.6 GiB of context look like 16.6 GiB); it is
    clamped at 0 when the reserved figure is newer than NVML's.
    """
    return Breakdown(
        allocated_bytes=device.allocated_bytes,
        cached_free_bytes=max(0, device.reserved_bytes - device.allocated_bytes),
        other_bytes=max(0, nvml_used - device.reserved_bytes) if nvml_used is not None and steady else None,
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
        published_at=published_at,
    )


def build(
    machine: Machine,
    tracked: dict[int, TrackedProcess],
    ids: set[int] | None = None,
    same_moment: frozenset[int] = frozenset(),
) -> MemoryView:
    """The memory picture of the machine; ``ids`` limits it to these NVML indices. ``same_moment``: PIDs
    whose entries were taken when NVML was read (a post-mortem's own process), so their split always holds."""
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
            split = None
            if device is not None and entry is not None:
                steady = proc.pid in same_moment or reserved_steady(entry, device)
                split = breakdown(used, device, steady=steady, published_at=entry.updated_at)
            row = ProcessRow(gpu.index, proc, share, split, mig=mig)
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
        from gpudiag.memory.forecast import step_forecasts

        view = msgspec.structs.replace(view, forecasts=step_forecasts(view))
    return view


def _training(row: ProcessRow, entry: TrackedProcess, torch_index: int) -> ProcessRow:
    """The row with what the tracker knows of the training: rank, steps, post-mortems."""
    rank = None
    if entry.rank is not None or entry.world_size is not None:
        rank = Rank(entry.rank, entry.local_rank, entry.world_size, entry.job)
    steps = None
    if entry.steps is not None:
        from gpudiag.memory.forecast import step_stats

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
