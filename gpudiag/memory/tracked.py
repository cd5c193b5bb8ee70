"""Whose tracker entries a memory view joins: this host's live ones, or those recorded with a replay."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpudiag.memory.build import build
from gpudiag.memory.view import MemoryView
from gpudiag.model import Machine

if TYPE_CHECKING:
    from gpudiag.replay.recording import Recording
    from gpudiag.track.entries import TrackedProcess

# gpudiag.track.entries.DIR_ENV, spelled here: reading it must not load the tracker (a replay mostly has none)
TRACK_DIR_ENV = "GPUDIAG_TRACK_DIR"


def tracked_entries(replayed: bool) -> dict[int, TrackedProcess]:
    """Tracker entries. A replayed machine's PIDs are not this host's: only entries recorded
    with it (in GPUDIAG_TRACK_DIR) apply, and the host is not asked whether those PIDs live."""
    if replayed and not os.environ.get(TRACK_DIR_ENV):
        return {}
    from gpudiag.track.entries import read_entries

    return read_entries(live=not replayed)


def recording_for(replay: str | None) -> Recording | None:
    """The training run recorded beside a replayed example, if it has one."""
    if replay is None:
        return None
    from gpudiag.replay.recording import Recording, path_for

    path = path_for(replay)
    return Recording(path) if path is not None else None


def one_sample(
    machine: Machine, wanted: set[int] | None, replayed: bool, recording: Recording | None = None
) -> MemoryView:
    """One view of the machine with the tracker's entries (a recording's, on a recorded replay)."""
    if recording is not None:
        return build(recording.apply(machine), recording.entries(), wanted)
    return build(machine, tracked_entries(replayed), wanted)


SEGMENTS_EVERY_S = 30.0  # how old a tracked process's largest-free-block figure may get in a live watch


def ask_for_segments(tracked: dict[int, TrackedProcess], now: float) -> None:
    """Ask tracked processes whose segment walk is missing or old for a new one: their counters say
    how much is split, only the walk gives the largest free block (the tracker honours one request
    in 5 s)."""
    wanted = [
        pid
        for pid, entry in tracked.items()
        if any(
            d.inactive_split_bytes and (d.segments_at is None or now - d.segments_at > SEGMENTS_EVERY_S)
            for d in entry.devices
        )
    ]
    if wanted:
        from gpudiag.track.entries import request_segments

        request_segments(wanted)
