"""A training run recorded beside an example machine: what NVML and the tracker showed, sample by sample.

``gpudiag/machines/recordings/<example>.jsonl``: a header line (``gpudiag.recording/1``, when the
run started), then one frame per sample: seconds since the start, per-GPU used memory and
utilization, per-process used memory, and the tracker entries (``gpudiag.track/1``) published by
then. A replayed ``memory`` shows the first frame; a replayed ``memory --watch`` takes one frame
per sample, stamps samples with the recording's time, so a forecast means the same at any
``--interval``, and ends with the last frame (exit 0), as the run it recorded did.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.model import Machine, Memory, Reading, Utilization
from gpudiag.replay.fixtures import EXAMPLES_DIR, FixtureError, read_file

if TYPE_CHECKING:
    from gpudiag.track.entries import TrackedProcess

SCHEMA = "gpudiag.recording/1"
RECORDINGS_DIR = Path(EXAMPLES_DIR, "recordings")


class GpuFrame(msgspec.Struct, frozen=True):
    index: int
    used_bytes: int
    utilization_percent: int | None = None


class ProcessFrame(msgspec.Struct, frozen=True):
    gpu_index: int
    pid: int
    used_bytes: int


class Frame(msgspec.Struct, frozen=True):
    at: float  # seconds since the run started
    gpus: tuple[GpuFrame, ...] = ()
    processes: tuple[ProcessFrame, ...] = ()
    track: tuple[dict[str, Any], ...] = ()  # tracker entries as the tracker wrote them


class Header(msgspec.Struct, frozen=True):
    schema: str
    started_at: float
    description: str = ""


def path_for(spec: str) -> Path | None:
    """The recording of a shipped example (``NAME``) or of a snapshot file (``FILE.recording.jsonl``)."""
    candidate = Path(spec)
    if candidate.suffix == ".json" or "/" in spec:
        path = candidate.with_suffix(".recording.jsonl")
    else:
        path = RECORDINGS_DIR / f"{spec}.jsonl"
    return path if path.is_file() else None


class Recording:
    def __init__(self, path: Path) -> None:
        # As a replay file is read (a link to /proc/kmsg here blocked and consumed the kernel's messages).
        lines = [line for line in read_file(path).splitlines() if line.strip()]
        try:
            self.header = msgspec.json.decode(lines[0], type=Header)
            self.frames = [msgspec.json.decode(line, type=Frame) for line in lines[1:]]
        except (IndexError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise FixtureError(f"{path}: not a recording: {exc}") from None
        if self.header.schema != SCHEMA or not self.frames:
            raise FixtureError(f"{path}: schema {self.header.schema!r} with {len(self.frames)} frame(s); want {SCHEMA}")
        self.position = 0

    @property
    def frame(self) -> Frame:
        return self.frames[min(self.position, len(self.frames) - 1)]

    @property
    def finished(self) -> bool:
        """Whether the frame shown is the last one."""
        return self.position >= len(self.frames) - 1

    def advance(self) -> None:
        self.position += 1

    def wall(self) -> float:
        return self.header.started_at + self.frame.at

    def apply(self, machine: Machine) -> Machine:
        """The machine with this frame's memory, utilization and per-process figures."""
        frame = self.frame
        gpus = list(machine.gpus)
        by_index = {g.index: n for n, g in enumerate(gpus)}
        for f in frame.gpus:
            n = by_index.get(f.index)
            mem = gpus[n].memory.value if n is not None else None
            if n is None or mem is None:
                continue
            reserved = mem.reserved_bytes.value or 0
            free = max(0, mem.total_bytes - reserved - f.used_bytes)
            changes: dict[str, Any] = {
                "memory": Reading.of(Memory(mem.total_bytes, f.used_bytes, free, mem.reserved_bytes))
            }
            util = gpus[n].utilization.value
            if f.utilization_percent is not None and util is not None:
                changes["utilization"] = Reading.of(Utilization(f.utilization_percent, util.memory_percent))
            gpus[n] = msgspec.structs.replace(gpus[n], **changes)
        used = {(p.gpu_index, p.pid): p.used_bytes for p in frame.processes}
        for n, gpu in enumerate(gpus):
            procs = gpu.processes.value
            if procs is None or not any((gpu.index, p.pid) in used for p in procs):
                continue
            changed = tuple(
                msgspec.structs.replace(p, used_memory_bytes=Reading.of(used[(gpu.index, p.pid)]))
                if (gpu.index, p.pid) in used
                else p
                for p in procs
            )
            gpus[n] = msgspec.structs.replace(gpu, processes=Reading.of(changed))
        return msgspec.structs.replace(machine, gpus=tuple(gpus))

    def entries(self) -> dict[int, TrackedProcess]:
        from gpudiag.track.entries import parse_entry

        out = {}
        for data in self.frame.track:
            entry = parse_entry(data)
            if entry is not None:
                out[entry.pid] = entry
        return out
