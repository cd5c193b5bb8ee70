"""What an OOM post-mortem says, in a headline and three lines: the largest holders, fragmentation, the trend.

Shared by the tracker (printed on stderr at the OOM) and ``gpudiag memory --postmortem``;
standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudiag.trend import size_text, sustained_growth

EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def oom_device(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The failing device's figures in the report (the first device when the count was the trigger)."""
    devices = doc.get("devices") or []
    index = (doc.get("oom") or {}).get("torch_index")
    found = next((d for d in devices if d.get("torch_index") == index), None)
    return dict(found or (devices[0] if devices else {}))


def headline(doc: Mapping[str, Any]) -> str:
    oom = doc.get("oom") or {}
    dev = oom_device(doc)
    where = f"cuda:{dev.get('torch_index', oom.get('torch_index', '?'))}"
    who = f"PID {doc.get('pid')}" + (f" (rank {doc['rank']})" if doc.get("rank") is not None else "")
    if oom.get("requested_bytes") is not None:
        asked = f"asked for {size_text(oom['requested_bytes'])}"
        if oom.get("device_free_bytes") is not None and oom.get("device_total_bytes"):
            asked += f" with {size_text(oom['device_free_bytes'])} free of {size_text(oom['device_total_bytes'])}"
        return f"CUDA out of memory in {who} on {where}: {asked}"
    return f"CUDA out of memory in {who} on {where} (seen by the allocator's OOM count; the size asked is not known)"


def _uuid_core(uuid: str) -> str:
    return uuid.strip().removeprefix("GPU-").removeprefix("MIG-").lower()


def _machine_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The processes on the failing GPU, from the machine's view (NVML), biggest first."""
    machine = doc.get("machine")
    if not isinstance(machine, dict) or "gpus" not in machine:
        return None
    uuid = _uuid_core(str(oom_device(doc).get("uuid") or ""))
    gpu = next((g for g in machine["gpus"] if uuid and _uuid_core(str(g.get("uuid") or "")) == uuid), None)
    if gpu is None:
        return None
    rows = [p for p in machine.get("processes", []) if p.get("gpu_index") == gpu["index"]]
    return sorted(rows, key=lambda p: -(p["used_bytes"] if isinstance(p.get("used_bytes"), int) else 0))


MAX_GAP_S = 10.0  # NVML read later than this after the OOM is no figure "at the OOM" to pair with the allocator's


def _nvml_gap(doc: Mapping[str, Any]) -> float | None:
    """Seconds from the OOM to the machine's NVML reading (None when either time is missing)."""
    machine = doc.get("machine") or {}
    try:
        return float(machine["timestamp"]) - float(doc["at"])
    except (KeyError, TypeError, ValueError):
        return None


def holders(doc: Mapping[str, Any]) -> str:
    """The largest holders on the failing GPU, each figure from one moment, and which: the used memory
    by NVML at the machine's reading (just after the OOM), this process's split by its allocator at the
    OOM; the context is their difference only when NVML was read close enough to the OOM."""
    rows = _machine_rows(doc)
    if rows:
        gap = _nvml_gap(doc)
        own = oom_device(doc)
        parts = []
        for p in rows[:3]:
            used = p["used_bytes"] if isinstance(p.get("used_bytes"), int) else None
            text = f"PID {p['pid']}" + (" (this process)" if p["pid"] == doc.get("pid") else "")
            text += f" {size_text(used)}" if used is not None else " (size not known)"
            if p["pid"] == doc.get("pid") and isinstance(own.get("reserved_bytes"), int):
                reserved, allocated = int(own["reserved_bytes"]), int(own.get("allocated_bytes") or 0)
                text += (
                    f" (its allocator at the OOM: {size_text(allocated)} tensors, "
                    f"{size_text(max(0, reserved - allocated))} cached free"
                )
                if used is not None and gap is not None and 0 <= gap <= MAX_GAP_S and used >= reserved:
                    text += f"; {size_text(used - reserved)} context and other"
                text += ")"
            elif isinstance(p.get("command"), str):
                text += f" {p['command'][:40]}"
            parts.append(text)
        more = f"; {len(rows) - 3} more" if len(rows) > 3 else ""
        when = f"{gap:.1f} s after the OOM" if gap is not None and gap >= 0 else "at an unknown time"
        return f"Largest holders on that GPU (NVML {when}): " + "; ".join(parts) + more
    dev = oom_device(doc)
    reserved, allocated = dev.get("reserved_bytes", 0), dev.get("allocated_bytes", 0)
    text = (
        f"Largest holders: this process held {size_text(reserved)} reserved ({size_text(allocated)} tensors, "
        f"{size_text(max(0, reserved - allocated))} cached free)"
    )
    peers = sorted(doc.get("peers") or [], key=lambda p: -int(p.get("reserved_bytes", 0)))
    if peers:
        text += "; other tracked processes on it: " + ", ".join(
            f"PID {p['pid']} {size_text(p.get('reserved_bytes', 0))}" for p in peers[:3]
        )
    return text + " (no NVML view of the other processes was recorded)" if doc.get("machine") is not None else text


def fragmentation(doc: Mapping[str, Any]) -> str:
    dev = oom_device(doc)
    oom = doc.get("oom") or {}
    reserved = int(dev.get("reserved_bytes", 0))
    used = int(dev.get("active_bytes") or dev.get("allocated_bytes", 0))
    free = max(0, reserved - used)
    split = dev.get("inactive_split_bytes")
    largest = dev.get("largest_free_block_bytes")
    asked = oom.get("requested_bytes")
    device_free = oom.get("device_free_bytes")
    conf = doc.get("alloc_conf") or ""
    expandable = "expandable_segments:true" in conf.replace(" ", "").lower() or dev.get("expandable_segments")
    cached = f"{size_text(free)} reserved but free"
    if split is not None:
        cached += f" ({size_text(split)} of it split inside segments in use)"
    if largest is not None:
        cached += f", largest free block {size_text(largest)}"
    if asked is not None and largest is not None and largest < asked <= free:
        advice = "" if expandable else f": {EXPANDABLE} lets the allocator map it as one piece"
        return f"Fragmentation caused it: {cached}, smaller than the {size_text(asked)} asked{advice}"
    if asked is not None and device_free is not None and asked > free + device_free:
        return (
            f"Not fragmentation: {cached}, and the GPU had {size_text(device_free)} free; the "
            f"{size_text(asked)} asked was more than both: the program needs less memory (batch size, "
            "activation checkpointing, a smaller model or precision) or another process must give some back"
        )
    share = f" ({100 * free / reserved:.0f}% of reserved)" if reserved else ""
    advice = (
        f"; if this share stays high, {EXPANDABLE} reduces it"
        if not expandable and reserved and free * 4 >= reserved and free >= 256 * 1024**2
        else ""
    )
    return f"Fragmentation: {cached}{share}{advice}"


def _step_points(doc: Mapping[str, Any], index: int) -> list[tuple[float, float, float, float]]:
    """(step, allocated at the step's end, peak, time) of the failing device's step records."""
    steps = doc.get("steps") or {}
    return [(float(r[0]), float(r[3]), float(r[5]), float(r[1])) for r in steps.get("records", []) if r[2] == index]


def trend(doc: Mapping[str, Any]) -> str:
    dev = oom_device(doc)
    index = dev.get("torch_index", 0)
    records = _step_points(doc, index)
    if records:
        growth = sustained_growth([(s, a) for s, a, _, _ in records])
        first, last = int(records[0][0]), int(records[-1][0])
        if growth is not None:
            return (
                f"Trend: allocated at the end of each step grew {size_text(growth.per_x)} per step over steps "
                f"{first}-{last}: memory kept from one step to the next (a leak: a loss or output kept with its "
                "graph, a growing list or cache)"
            )
        return (
            f"Trend: allocated at the end of each step was flat over steps {first}-{last} "
            f"(about {size_text(records[-1][1])}): one step's peak ran out, not a leak"
        )
    recent = [(float(r[0]), float(r[2])) for r in (doc.get("recent") or []) if r[1] == index]
    growth = sustained_growth(recent)
    if growth is not None:
        return (
            f"Trend: allocated grew {size_text(growth.per_x * 60)} per minute over the last "
            f"{recent[-1][0] - recent[0][0]:.0f} s (call gpudiag.track.step() each step to see it per step)"
        )
    if recent:
        return f"Trend: no steady growth over the last {len(recent)} publications"
    return "Trend: no history was recorded before the OOM"


def summary_lines(doc: Mapping[str, Any]) -> list[str]:
    """The headline, then the largest holders, fragmentation and the trend."""
    return [headline(doc), holders(doc), fragmentation(doc), trend(doc)]
