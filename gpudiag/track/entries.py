"""The tracker's files: where they live, what one holds, and reading them back (the CLI side).

Each tracked process writes one JSON entry (``gpudiag.track/1``) into a per-user runtime directory
(:mod:`gpudiag.track` is the writer). :func:`read_entries` trusts only fresh entries, in a private
directory, of live processes of this user in this PID namespace; an entry whose PID now names another
process (same PID, different start time) is ignored.

Both sides import this module, the writer inside the user's process: the standard library only.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "gpudiag.track/1"
DIR_ENV = "GPUDIAG_TRACK_DIR"  # overrides the directory on both sides (writer and reader)
DEFAULT_INTERVAL_S = 2.0
STALE_AFTER_S = 30.0  # an entry older than max(this, 5 intervals) is ignored: its writer is stuck or gone
SEGMENTS_REQUEST = ".segments"  # "<pid>.segments" beside an entry: a reader asks for the segment walk


# --- where entries live --------------------------------------------------------------


def runtime_dirs() -> list[Path]:
    """Where entries may be, the writer's choice first.

    ``$GPUDIAG_TRACK_DIR`` if set; else ``$XDG_RUNTIME_DIR/gpudiag`` (per-user tmpfs) and
    ``<tmp>/gpudiag-<uid>``. The reader looks in both, because a training job started from
    a login shell and a monitor started from `su`, cron or a bare ssh command may not agree
    on ``XDG_RUNTIME_DIR``.
    """
    override = os.environ.get(DIR_ENV)
    if override:
        return [Path(override)]
    dirs = []
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        dirs.append(Path(base) / "gpudiag")
    dirs.append(Path(tempfile.gettempdir()) / f"gpudiag-{os.getuid()}")
    return dirs


def private(path: Path) -> bool:
    """True for a directory this user owns that nobody else can read or write."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


# --- process identity (Linux /proc; None elsewhere) ----------------------------------


def start_ticks(pid: int | str) -> int | None:
    """The process's start time in clock ticks since boot: with the PID, it names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22; comm may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def pid_namespace(pid: int | str = "self") -> str | None:
    """'pid:[4026531836]': PIDs mean the same thing only within one namespace."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def segments_request(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{SEGMENTS_REQUEST}"


def request_segments(pids: Iterable[int], directories: Iterable[Path] | None = None) -> None:
    """Ask tracked processes to walk their allocator's segments (largest free block) at their next
    publication: an empty file beside their entry, which they remove. Never raises."""
    for directory in runtime_dirs() if directories is None else directories:
        if not private(directory):
            continue
        for pid in pids:
            if (directory / f"{pid}.json").exists():
                with contextlib.suppress(OSError):
                    os.close(os.open(segments_request(directory, pid), os.O_WRONLY | os.O_CREAT, 0o600))


# --- reading (the CLI side) ----------------------------------------------------------


@dataclass(frozen=True)
class TrackedDevice:
    torch_index: int
    uuid: str  # as torch prints it: without the GPU-/MIG- prefix; "" if this torch lacks it
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    alloc_retries: int
    ooms: int
    pci_bus_id: str = ""  # NVML's spelling, a fallback when uuid is ""
    # Published by trackers since the fragmentation figures (None: an older tracker, or not reported).
    active_bytes: int | None = None  # allocated + blocks freed but still in use by a stream
    inactive_split_bytes: int | None = None  # free, inside segments that hold tensors: empty_cache() keeps it
    inactive_split_blocks: int | None = None
    segments: int | None = None
    largest_free_block_bytes: int | None = None  # from the last segment walk (at segments_at)
    free_blocks: int | None = None
    expandable_segments: bool | None = None
    segments_at: float | None = None


@dataclass(frozen=True)
class StepRecord:
    step: int
    at: float  # wall time
    torch_index: int
    allocated_bytes: int  # at the step's end
    reserved_bytes: int
    peak_allocated_bytes: int  # since the previous record (per_record peaks) or since the start


@dataclass(frozen=True)
class Steps:
    count: int
    first_at: float
    peaks_per_record: bool
    records: tuple[StepRecord, ...]


@dataclass(frozen=True)
class TrackedProcess:
    pid: int
    command: str
    updated_at: float
    devices: tuple[TrackedDevice, ...]
    interval_s: float = DEFAULT_INTERVAL_S
    start_ticks: int | None = None
    pid_namespace: str | None = None
    torch_version: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    job: str | None = None
    alloc_conf: str | None = None
    steps: Steps | None = None
    recent: tuple[tuple[float, int, int, int, int], ...] = ()  # (at, cuda index, allocated, reserved, peak)
    oom_reports: tuple[str, ...] = ()
    ppid: int | None = None

    def stale(self, now: float) -> bool:
        return now - self.updated_at > max(STALE_AFTER_S, 5 * self.interval_s)


def read_entries(
    directories: Path | Iterable[Path] | None = None,
    now: float | None = None,
    *,
    live: bool = True,
) -> dict[int, TrackedProcess]:
    """Well-formed entries by PID, from private directories of this user.

    For the live machine an entry must also be fresh and name a live process (same PID,
    same start time) in this PID namespace. Entries recorded with a replayed machine
    (``live=False``) are a recording: their PIDs are not this host's, their age is moot.
    """
    if directories is None:
        dirs = runtime_dirs()
    elif isinstance(directories, Path):
        dirs = [directories]
    else:
        dirs = list(directories)
    now = time.time() if now is None else now
    own_namespace = pid_namespace() if live else None
    found: dict[int, TrackedProcess] = {}
    for directory in dirs:
        for entry in _read_directory(directory):
            if live and (entry.stale(now) or not _same_process(entry, own_namespace)):
                continue
            if entry.pid not in found or entry.updated_at > found[entry.pid].updated_at:
                found[entry.pid] = entry
    return found


def _read_directory(directory: Path) -> list[TrackedProcess]:
    if not private(directory):
        return []  # missing, or not our private directory: trust nothing in it
    try:
        paths = list(directory.glob("*.json"))
    except OSError:
        return []
    entries = []
    uid = os.getuid()
    for path in paths:
        try:
            st = path.lstat()
            if st.st_uid != uid or not path.is_file() or path.is_symlink():
                continue
            entry = parse_entry(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if entry is not None and path.name == f"{entry.pid}.json":  # a renamed or copied file is foreign
            entries.append(entry)
    return entries


def _same_process(entry: TrackedProcess, own_namespace: str | None) -> bool:
    if entry.pid_namespace and own_namespace and entry.pid_namespace != own_namespace:
        return False  # written in another container: its PID is not the one NVML or we see
    if not _alive(entry.pid):
        return False
    if entry.start_ticks is not None:
        ticks = start_ticks(entry.pid)
        if ticks is not None and ticks != entry.start_ticks:
            return False  # the PID was reused by another process
    return True


def parse_entry(data: Any) -> TrackedProcess | None:
    """An entry from its JSON, or None if it is not one of ours (raises on a malformed one)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None
    devices = tuple(
        TrackedDevice(
            torch_index=int(d["torch_index"]),
            uuid=str(d["uuid"]),
            allocated_bytes=int(d["allocated_bytes"]),
            reserved_bytes=int(d["reserved_bytes"]),
            peak_allocated_bytes=int(d["peak_allocated_bytes"]),
            peak_reserved_bytes=int(d["peak_reserved_bytes"]),
            alloc_retries=int(d["alloc_retries"]),
            ooms=int(d["ooms"]),
            pci_bus_id=str(d.get("pci_bus_id") or ""),
            active_bytes=_opt_int(d.get("active_bytes")),
            inactive_split_bytes=_opt_int(d.get("inactive_split_bytes")),
            inactive_split_blocks=_opt_int(d.get("inactive_split_blocks")),
            segments=_opt_int(d.get("segments")),
            largest_free_block_bytes=_opt_int(d.get("largest_free_block_bytes")),
            free_blocks=_opt_int(d.get("free_blocks")),
            expandable_segments=bool(d["expandable_segments"]) if d.get("expandable_segments") is not None else None,
            segments_at=float(d["segments_at"]) if d.get("segments_at") is not None else None,
        )
        for d in data["devices"]
    )
    updated_at = float(data["updated_at"])
    interval = float(data.get("interval_s", DEFAULT_INTERVAL_S))
    if not math.isfinite(updated_at) or not math.isfinite(interval):
        return None
    start_ticks = data.get("start_ticks")
    return TrackedProcess(
        pid=int(data["pid"]),
        command=str(data["command"]),
        updated_at=updated_at,
        devices=devices,
        interval_s=interval,
        start_ticks=int(start_ticks) if start_ticks is not None else None,
        pid_namespace=str(data["pid_namespace"]) if data.get("pid_namespace") else None,
        torch_version=str(data["torch_version"]) if data.get("torch_version") else None,
        rank=_opt_int(data.get("rank")),
        local_rank=_opt_int(data.get("local_rank")),
        world_size=_opt_int(data.get("world_size")),
        job=str(data["job"]) if data.get("job") else None,
        alloc_conf=str(data["alloc_conf"]) if data.get("alloc_conf") else None,
        steps=_parse_steps(data.get("steps")),
        recent=tuple(
            (float(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in data.get("recent") or () if len(r) >= 5
        ),
        oom_reports=tuple(str(p) for p in data.get("oom_reports") or ()),
        ppid=_opt_int(data.get("ppid")),
    )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _parse_steps(data: Any) -> Steps | None:
    if not isinstance(data, dict):
        return None
    records = tuple(
        StepRecord(int(r[0]), float(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]))
        for r in data.get("records") or ()
        if len(r) >= 6
    )
    return Steps(int(data["count"]), float(data["first_at"]), data.get("peaks") == "per_record", records)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
