"""The Xid errors a long-running exporter has seen, per GPU: the last one and a count of each.

NVML reports a GPU's critical Xid errors as events (``probe.xid_watch.XidWatch``, the event set the deep
diagnostics use too); the exporter polls them on every scrape without waiting and keeps them here,
by GPU UUID, so that a GPU keeps its record when NVML is re-opened or the GPUs are counted anew.
DCGM exports the last Xid as ``DCGM_FI_DEV_XID_ERRORS`` (0 until one comes) with its number and
description as the ``err_code`` and ``err_msg`` labels (dcgm-exporter's ``gpu_collector.go``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), the errors a data-centre GPU reports
# most, in its words (dcgm-exporter's err_msg uses the same); another number reads "Xid N".
XID_DESCRIPTIONS = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    109: "Context Switch Timeout Error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    121: "C2C Link Error",
    140: "Unrecovered ECC Error",
    143: "GPU Initialization Failure",
    154: "GPU Recovery Action Changed",
}


def description(xid: int) -> str:
    return XID_DESCRIPTIONS.get(xid, f"Xid {xid}")


@dataclass
class GpuXids:
    """One GPU's record: the last Xid (0: none yet) and how many of each came."""

    last: int = 0
    counts: dict[int, int] = field(default_factory=dict)


@dataclass
class XidTally:
    """The Xids seen since the exporter started, by GPU UUID; ``watched``: the UUIDs whose events
    NVML reports (a GPU it cannot watch has no Xid series, never a 0 that says "none came")."""

    gpus: dict[str, GpuXids] = field(default_factory=dict)
    watched: set[str] = field(default_factory=set)

    def watch(self, uuids: Iterable[str]) -> None:
        for uuid in uuids:
            self.watched.add(uuid)
            self.gpus.setdefault(uuid, GpuXids())

    def add(self, events: Iterable[tuple[int, int]], uuids: Mapping[int, str]) -> list[tuple[str, int]]:
        """Count the (NVML index, Xid) events; returns those of known GPUs as (UUID, Xid)."""
        counted = []
        for index, xid in events:
            uuid = uuids.get(index)
            if uuid is None:
                continue  # a GPU NVML no longer names (the event outran a re-count)
            gpu = self.gpus.setdefault(uuid, GpuXids())
            gpu.last = xid
            gpu.counts[xid] = gpu.counts.get(xid, 0) + 1
            counted.append((uuid, xid))
        return counted

    def of(self, uuid: str) -> GpuXids | None:
        """The GPU's record, where its events are watched (or some came before it stopped being)."""
        found = self.gpus.get(uuid)
        return found if found is not None and (uuid in self.watched or found.counts) else None
