"""Publish PyTorch's allocator figures so `gpudiag memory` can explain NVML's number.

In training code::

    import gpudiag.track; gpudiag.track.start()

or without touching it: ``python -m gpudiag.track train.py --epochs 3``.

A daemon thread writes, every ``interval`` seconds, one small JSON file per process into a
per-user runtime directory (mode 0700, file 0600, written atomically). It reads
``torch.cuda.memory_stats`` only: no synchronisation, no allocation, nothing that touches
the training loop. It never raises into the caller, never imports torch itself (it waits
until the program has), never initialises CUDA, and removes its file at exit.

The reading side (:func:`read_entries`) trusts only fresh entries, in a private directory,
of live processes of this user in this PID namespace; an entry whose PID now names another
process (same PID, different start time) is ignored.

This module is imported into the user's process: it imports the standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag.track import allocator
from gpudiag.track.oom import Recorder
from gpudiag.track.steps import StepLog

SCHEMA = "gpudiag.track/1"
DIR_ENV = "GPUDIAG_TRACK_DIR"  # overrides the directory on both sides (writer and reader)
DEFAULT_INTERVAL_S = 2.0
MIN_INTERVAL_S = 1.0  # a watch refreshes at 1 Hz: publishing faster only costs the program
STALE_AFTER_S = 30.0  # an entry older than max(this, 5 intervals) is ignored: its writer is stuck or gone
RECENT = 32  # publications kept per device: the entry's and a post-mortem's recent history
SEGMENTS_REQUEST = ".segments"  # "<pid>.segments" beside an entry: a reader asks for the segment walk
SEGMENTS_ON_REQUEST_S = 5.0  # a reader's request is honoured at most this often
SEGMENTS_AUTO_S = 60.0  # unasked, when the counters show fragmentation, at most this often

_lock = threading.Lock()
_thread: threading.Thread | None = None
_stop = threading.Event()
_atexit_registered = False
_started_once = False  # step() starts the tracker once, not again after the program stopped it
_directory: Path | None = None  # where this process's entry is
_steps = StepLog()
_recent: deque[tuple[float, int, int, int, int]] = deque(maxlen=RECENT * 8)  # (at, cuda index, alloc, reserved, peak)
_segments: dict[int, dict[str, Any]] = {}  # the last segment walk per cuda index, with its time
_ooms_seen: dict[int, int] = {}


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


def runtime_dir() -> Path:
    """The directory a writer prefers (it falls back to the next if this one is not private)."""
    return runtime_dirs()[0]


def _private(path: Path) -> bool:
    """True for a directory this user owns that nobody else can read or write."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def _ensure_private_dir(path: Path) -> bool:
    """Create the directory 0700, and refuse one that someone else owns or others can use."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return _private(path)


# --- process identity (Linux /proc; None elsewhere) ----------------------------------


def _start_ticks(pid: int | str) -> int | None:
    """The process's start time in clock ticks since boot: with the PID, it names one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22; comm may hold spaces
    except (OSError, ValueError, IndexError):
        return None


def _pid_namespace(pid: int | str = "self") -> str | None:
    """'pid:[4026531836]': PIDs mean the same thing only within one namespace."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


# --- writing (inside the user's process) ---------------------------------------------


def _bus_id(props: Any) -> str:
    """NVML's spelling of the device's PCI address, when this torch exposes it."""
    try:
        return f"{int(props.pci_domain_id):08X}:{int(props.pci_bus_id):02X}:{int(props.pci_device_id):02X}.0"
    except (AttributeError, TypeError, ValueError):
        return ""


def _device_stats(torch: Any) -> list[dict[str, Any]]:
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return []  # never initialise CUDA on the program's behalf
    devices = []
    for index in range(cuda.device_count()):
        try:  # one odd device (a pluggable allocator without stats) must not hide the others
            stats = cuda.memory_stats(index)
            props = cuda.get_device_properties(index)
            device: dict[str, Any] = {
                "torch_index": index,
                "uuid": str(getattr(props, "uuid", "") or ""),
                "pci_bus_id": _bus_id(props),
                "name": str(props.name),
                **allocator.device_figures(stats),
            }
            found = _segments.get(index)
            if found is not None:
                device.update(
                    largest_free_block_bytes=found["largest_free_block_bytes"],
                    free_blocks=found["free_blocks"],
                    expandable_segments=found["expandable"],
                    segments_at=found["at"],
                )
            devices.append(device)
        except Exception:
            continue
    return devices


def snapshot(torch: Any | None = None, interval: float = DEFAULT_INTERVAL_S) -> dict[str, Any]:
    """This process's entry (what the file holds). Uses torch only if the program imported it."""
    if torch is None:
        torch = sys.modules.get("torch")
    devices = _device_stats(torch) if torch is not None else []
    return {
        "schema": SCHEMA,
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "start_ticks": _start_ticks("self"),
        "pid_namespace": _pid_namespace(),
        "command": " ".join(sys.argv) or sys.executable,
        "torch_version": str(getattr(torch, "__version__", "")) or None,
        "interval_s": interval,
        "updated_at": time.time(),
        "devices": devices,
        **allocator.rank_info(os.environ, torch),
        "alloc_conf": allocator.alloc_conf(os.environ),
        "steps": _steps.published(),
        "recent": [list(r) for r in _recent],
        "oom_reports": list(_recorder.reports),
        "oom_observer": _recorder.observer_attached,
    }


def write_entry(path: Path, entry: dict[str, Any]) -> None:
    """Write ``entry`` to ``path`` atomically, mode 0600: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")  # created 0600
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _entry_path(directory: Path) -> Path:
    return directory / f"{os.getpid()}.json"


def _segments_request(directory: Path, pid: int) -> Path:
    return directory / f"{pid}{SEGMENTS_REQUEST}"


def request_segments(pids: Iterable[int], directories: Iterable[Path] | None = None) -> None:
    """Ask tracked processes to walk their allocator's segments (largest free block) at their next
    publication: an empty file beside their entry, which they remove. Never raises."""
    for directory in runtime_dirs() if directories is None else directories:
        if not _private(directory):
            continue
        for pid in pids:
            if (directory / f"{pid}.json").exists():
                with contextlib.suppress(OSError):
                    os.close(os.open(_segments_request(directory, pid), os.O_WRONLY | os.O_CREAT, 0o600))


def _walk_segments(torch: Any, directory: Path, devices: list[dict[str, Any]]) -> None:
    """Take the allocator's segments when asked, or when the counters say fragmentation matters
    (each at most once per its interval: the walk holds the allocator's lock and the GIL)."""
    request = _segments_request(directory, os.getpid())
    asked = request.exists()
    now = time.time()
    last = max((s["at"] for s in _segments.values()), default=0.0)
    wanted = (asked and now - last >= SEGMENTS_ON_REQUEST_S) or (
        now - last >= SEGMENTS_AUTO_S and any(allocator.fragmentation_worth_a_look(d) for d in devices)
    )
    if asked:
        with contextlib.suppress(OSError):
            request.unlink()
    if not wanted:
        return
    for index, found in allocator.segment_summary(allocator.take_segments(torch)).items():
        _segments[index] = {**found, "at": now}


def _publish(path: Path, interval: float) -> None:
    torch = sys.modules.get("torch")
    entry = snapshot(torch, interval=interval)
    if torch is not None and entry["devices"]:
        _after_sample(torch, path.parent, entry)
    try:
        write_entry(path, entry)
    except FileNotFoundError:
        # The directory went away (a /tmp cleaner; the runtime directory of a user who logged
        # out while training went on): make it again, privately, and carry on.
        if _ensure_private_dir(path.parent):
            write_entry(path, entry)


def _after_sample(torch: Any, directory: Path, entry: dict[str, Any]) -> None:
    """What a publication does beside writing: remember it, watch for OOMs, walk segments if asked."""
    devices = entry["devices"]
    _steps.devices = tuple(d["torch_index"] for d in devices if d["reserved_bytes"])
    for d in devices:
        _recent.append(
            (
                entry["updated_at"],
                d["torch_index"],
                d["allocated_bytes"],
                d["reserved_bytes"],
                d["peak_allocated_bytes"],
            )
        )
    with contextlib.suppress(Exception):
        _recorder.attach(torch)
    for d in devices:
        before = _ooms_seen.get(d["torch_index"])
        _ooms_seen[d["torch_index"]] = d["ooms"]
        if before is not None and d["ooms"] > before and not _recorder.observer_attached:
            _recorder.record("oom_count", {"torch_index": d["torch_index"], "requested_bytes": None}, torch)
    with contextlib.suppress(Exception):
        _walk_segments(torch, directory, devices)
    _recorder.complete(_machine_view)


def _machine_view() -> dict[str, Any]:
    """The whole machine as `gpudiag memory --json` shows it, for a post-mortem (gpudiag's NVML reading)."""
    from gpudiag.memory_postmortem import machine_document

    return machine_document()


def _report_context() -> dict[str, Any]:
    """What a post-mortem adds to the entry: recent publications, step records, tracked peers."""
    peers = []
    own = os.getpid()
    with contextlib.suppress(Exception):
        for pid, entry in read_entries().items():
            if pid != own:
                for dev in entry.devices:
                    peers.append(
                        {
                            "pid": pid,
                            "command": entry.command,
                            "rank": entry.rank,
                            "uuid": dev.uuid,
                            "torch_index": dev.torch_index,
                            "allocated_bytes": dev.allocated_bytes,
                            "reserved_bytes": dev.reserved_bytes,
                        }
                    )
    return {"recent": [list(r) for r in _recent], "steps": _steps.published(), "peers": peers}


def _loop(interval: float, directory: Path) -> None:
    path = _entry_path(directory)
    try:
        while not _stop.is_set():
            with contextlib.suppress(Exception):  # a reporter must never disturb the program
                _publish(path, interval)
            _stop.wait(interval)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            _segments_request(directory, os.getpid()).unlink()


_recorder = Recorder(
    entry=lambda: snapshot(),
    context=lambda: _report_context(),
    fallback_dir=lambda: _directory,
)


def step(number: int | None = None) -> None:
    """Mark the end of a training step (call it once per step; never raises).

    The watch and the log then show memory per step: the peak, the growth from one step to the
    next (a leak), the step rate. ``number`` is the trainer's own step count, if it has one.
    The first call starts the tracker if the program has not.
    """
    try:
        if not _started_once:
            start()
        _steps.step(sys.modules.get("torch"), number)
    except Exception:
        pass


def lightning_callback(per_step_peaks: bool = False) -> Any:
    """A PyTorch Lightning callback: ``Trainer(callbacks=[gpudiag.track.lightning_callback()])``."""
    from gpudiag.track.callbacks import lightning_callback as make

    return make(per_step_peaks)


def hf_callback(per_step_peaks: bool = False) -> Any:
    """A Hugging Face Trainer callback: ``Trainer(..., callbacks=[gpudiag.track.hf_callback()])``."""
    from gpudiag.track.callbacks import hf_callback as make

    return make(per_step_peaks)


def per_step_peaks(enabled: bool = True) -> None:
    """Reset the allocator's peak after each step's reading, so that each step's peak is its own.

    This changes what the program's own ``torch.cuda.max_memory_allocated()`` returns (the peak
    since the last step instead of since the start), which is why it is off unless asked for.
    """
    _steps.reset_peak = bool(enabled)


def _checked_interval(interval: Any) -> float:
    try:
        value = float(interval)
    except (TypeError, ValueError):
        return DEFAULT_INTERVAL_S
    if not math.isfinite(value) or value <= 0:
        return DEFAULT_INTERVAL_S
    return max(value, MIN_INTERVAL_S)


def start(interval: float = DEFAULT_INTERVAL_S) -> bool:
    """Start publishing every ``interval`` seconds (idempotent; never raises).

    Returns False if it could not: no private runtime directory, or no thread could start.
    """
    global _thread, _atexit_registered, _directory, _started_once
    try:
        with _lock:
            _started_once = True
            if _thread is not None and _thread.is_alive():
                return True
            directory = next((d for d in runtime_dirs() if _ensure_private_dir(d)), None)
            if directory is None:
                return False
            _stop.clear()
            thread = threading.Thread(
                target=_loop, args=(_checked_interval(interval), directory), name="gpudiag-track", daemon=True
            )
            thread.start()
            _thread, _directory = thread, directory
            if not _atexit_registered:
                atexit.register(stop)
                _atexit_registered = True
            return True
    except Exception:
        return False


def stop() -> None:
    """Stop publishing and remove this process's entry (never raises)."""
    global _thread
    try:
        with _lock:
            thread, _thread = _thread, None
        if thread is not None:
            _stop.set()
            thread.join(timeout=2)
        if _recorder.pending:  # an OOM just before the end: add the machine's view now
            finisher = threading.Thread(target=_recorder.complete, args=(_machine_view,), daemon=True)
            finisher.start()
            finisher.join(timeout=10)
        if _directory is not None:
            with contextlib.suppress(OSError):
                _entry_path(_directory).unlink()
    except Exception:
        pass


def running() -> bool:
    """Whether this process is publishing."""
    thread = _thread
    return thread is not None and thread.is_alive()


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
    own_namespace = _pid_namespace() if live else None
    found: dict[int, TrackedProcess] = {}
    for directory in dirs:
        for entry in _read_directory(directory):
            if live and (entry.stale(now) or not _same_process(entry, own_namespace)):
                continue
            if entry.pid not in found or entry.updated_at > found[entry.pid].updated_at:
                found[entry.pid] = entry
    return found


def _read_directory(directory: Path) -> list[TrackedProcess]:
    if not _private(directory):
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
        ticks = _start_ticks(entry.pid)
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
