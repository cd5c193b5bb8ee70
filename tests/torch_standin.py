"""A stand-in for a CUDA build of torch, for the tracker on CPU-only machines.

PyTorch's CPU builds have no CUDA allocator (``torch.cuda.memory_stats()`` is ``{}`` and
``torch._C._cuda_attach_out_of_memory_observer`` does not exist), so the tracker is tested against
this: ``memory_stats`` returns the flat dict a CUDA build returns (every key of
``torch/cuda/memory.py``'s documented list, for each pool and metric), ``memory_snapshot`` /
``memory._snapshot`` return segments and blocks in ``_snapshot``'s documented shape, and ``_C``
has the OOM observer hook, called as the allocator calls it: ``(device, size asked, device total,
device free)`` (``c10/cuda/CUDACachingAllocator.h``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

CORE = ("allocated", "allocated_bytes", "segment", "reserved_bytes", "active", "active_bytes")
CORE += ("inactive_split", "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "large_pool", "small_pool")
METRICS = ("current", "peak", "allocated", "freed")


def memory_stats_from_segments(
    segments: Iterable[Mapping[str, Any]], peaks: Mapping[str, int] | None = None, **counters: int
) -> dict[str, int]:
    """``torch.cuda.memory_stats()``'s flat dict, its current figures computed from the segments."""
    cur: dict[str, int] = {name: 0 for name in CORE}
    for seg in segments:
        cur["segment"] += 1
        cur["reserved_bytes"] += seg["total_size"]
        used = any(b["state"] != "inactive" for b in seg["blocks"])
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                cur["allocated"] += 1
                cur["allocated_bytes"] += b["size"]
                cur["requested_bytes"] += b["requested_size"]
            if b["state"] != "inactive":
                cur["active"] += 1
                cur["active_bytes"] += b["size"]
            elif used:
                cur["inactive_split"] += 1
                cur["inactive_split_bytes"] += b["size"]
    peaks = dict(peaks or {})
    out: dict[str, int] = {}
    for name in CORE:
        for pool in POOLS:
            for metric in METRICS:
                value = 0
                if pool in ("all", "large_pool"):  # every block here is in the large pool
                    value = {"current": cur[name], "peak": max(cur[name], peaks.get(name, 0))}.get(metric, cur[name])
                out[f"{name}.{pool}.{metric}"] = value
    out.update(
        {
            "num_alloc_retries": 0,
            "num_ooms": 0,
            "num_sync_all_streams": 0,
            "num_device_alloc": cur["segment"],
            "num_device_free": 0,
            "num_oom_rejections": 0,
            "max_split_size": -1,
            **{f"oversize_allocations.{m}": 0 for m in METRICS},
            **{f"oversize_segments.{m}": 0 for m in METRICS},
        }
    )
    out.update(counters)
    return dict(sorted(out.items()))


def segment(address: int, blocks: list[tuple[str, int]], device: int = 0, expandable: bool = False) -> dict[str, Any]:
    """One large segment of the default pool, its blocks (state, size) laid out from ``address``."""
    out = []
    at = address
    for state, size in blocks:
        out.append(
            {
                "address": at,
                "size": size,
                "requested_size": size if state != "inactive" else 0,
                "state": state,
                "frames": [],
            }
        )
        at += size
    total = sum(size for _, size in blocks)
    return {
        "device": device,
        "address": address,
        "total_size": total,
        "allocated_size": sum(s for st, s in blocks if st == "active_allocated"),
        "active_size": sum(s for st, s in blocks if st != "inactive"),
        "requested_size": sum(s for st, s in blocks if st == "active_allocated"),
        "stream": 0,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "is_expandable": expandable,
        "frames": [],
        "blocks": out,
    }


@dataclass
class Device:
    name: str
    uuid: str
    bus: int
    stats: dict[str, int] = field(default_factory=dict)
    segments: list[dict[str, Any]] = field(default_factory=list)


class StandInTorch:
    """Enough of ``torch`` for the tracker: ``cuda`` (initialised), ``_C``'s OOM observer hook."""

    def __init__(self, devices: list[Device], version: str = "2.13.0+cu128", observer_hook: bool = True) -> None:
        self.devices = devices
        self.__version__ = version
        self.observers: list[Callable[[int, int, int, int], None]] = []
        self.peak_resets: list[int] = []
        self.traces: list[list[dict[str, Any]]] = [[] for _ in devices]
        self.cuda = SimpleNamespace(
            is_initialized=lambda: True,
            device_count=lambda: len(self.devices),
            current_device=lambda: 0,
            memory_stats=lambda index=0: dict(self.devices[index].stats),
            get_device_properties=self._props,
            memory_snapshot=self._memory_snapshot,
            reset_peak_memory_stats=lambda index=0: self.peak_resets.append(index),
            memory=SimpleNamespace(_snapshot=self._snapshot),
        )
        self._C = SimpleNamespace()
        if observer_hook:
            self._C._cuda_attach_out_of_memory_observer = self.observers.append
        self.distributed = None

    def _props(self, index: int) -> Any:
        d = self.devices[index]
        return SimpleNamespace(name=d.name, uuid=d.uuid, pci_domain_id=0, pci_bus_id=d.bus, pci_device_id=0)

    def _memory_snapshot(self, mempool_id: Any = None, include_traces: bool = True) -> list[dict[str, Any]]:
        return [s for d in self.devices for s in d.segments]

    def _snapshot(self, device: Any = None) -> dict[str, Any]:
        return {"segments": self._memory_snapshot(), "device_traces": self.traces}

    def oom(self, device: int, asked: int, total: int, free: int) -> None:
        """What the allocator does before raising OutOfMemoryError: count it, call the observers."""
        stats = self.devices[device].stats
        stats["num_ooms"] = stats.get("num_ooms", 0) + 1
        for observer in self.observers:
            observer(device, asked, total, free)
