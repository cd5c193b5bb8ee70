"""Publish PyTorch's allocator figures so `gpudiag memory` can explain NVML's number.

In training code::

    import gpudiag.track; gpudiag.track.start()

or without touching it: ``python -m gpudiag.track train.py --epochs 3``.

A daemon thread writes, every ``interval`` seconds, one small JSON file per process into a
per-user runtime directory (mode 0700, file 0600, written atomically). It reads
``torch.cuda.memory_stats`` only: no synchronisation, no allocation, nothing that touches
the training loop. It never raises into the caller, never imports torch itself (it waits
until the program has), and removes its file at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "gpudiag.track/1"
STALE_AFTER_S = 30.0  # an entry not refreshed for this long is ignored (its writer is stuck or gone)

_lock = threading.Lock()
_thread: threading.Thread | None = None
_stop = threading.Event()


def runtime_dir() -> Path:
    """$XDG_RUNTIME_DIR/gpudiag (per-user tmpfs), else a per-uid directory under the temp dir."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return Path(base) / "gpudiag"
    return Path(tempfile.gettempdir()) / f"gpudiag-{os.getuid()}"


def _ensure_private_dir(path: Path) -> bool:
    """Create the directory 0700, and refuse one that someone else owns or others can write."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


def _device_stats(torch: Any) -> list[dict[str, Any]]:
    if not torch.cuda.is_initialized():
        return []  # never initialise CUDA on the program's behalf
    devices = []
    for index in range(torch.cuda.device_count()):
        stats = torch.cuda.memory_stats(index)
        props = torch.cuda.get_device_properties(index)
        devices.append(
            {
                "torch_index": index,
                "uuid": str(getattr(props, "uuid", "")),
                "name": props.name,
                "allocated_bytes": int(stats.get("allocated_bytes.all.current", 0)),
                "reserved_bytes": int(stats.get("reserved_bytes.all.current", 0)),
                "peak_allocated_bytes": int(stats.get("allocated_bytes.all.peak", 0)),
                "peak_reserved_bytes": int(stats.get("reserved_bytes.all.peak", 0)),
                "alloc_retries": int(stats.get("num_alloc_retries", 0)),
                "ooms": int(stats.get("num_ooms", 0)),
            }
        )
    return devices


def snapshot(torch: Any | None = None) -> dict[str, Any]:
    """This process's entry (what the file holds)."""
    if torch is None:
        torch = sys.modules.get("torch")
    devices = _device_stats(torch) if torch is not None else []
    return {
        "schema": SCHEMA,
        "pid": os.getpid(),
        "command": " ".join(sys.argv) or sys.executable,
        "updated_at": time.time(),
        "devices": devices,
    }


def _write(path: Path, entry: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:  # mkstemp creates it 0600
            json.dump(entry, f)
        os.replace(tmp, path)  # atomic: readers see the old or the new file, never half
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _loop(interval: float, directory: Path) -> None:
    path = directory / f"{os.getpid()}.json"
    while not _stop.is_set():
        # A reporter must never disturb the program it reports on: any failure is swallowed.
        with contextlib.suppress(Exception):
            _write(path, snapshot())
        _stop.wait(interval)
    with contextlib.suppress(OSError):
        path.unlink()


def start(interval: float = 2.0) -> bool:
    """Start publishing (idempotent). Returns False if it could not (no private directory)."""
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return True
        directory = runtime_dir()
        if not _ensure_private_dir(directory):
            return False
        _stop.clear()
        _thread = threading.Thread(
            target=_loop, args=(max(interval, 0.2), directory), name="gpudiag-track", daemon=True
        )
        _thread.start()
        atexit.register(stop)
        return True


def stop() -> None:
    """Stop publishing and remove this process's entry."""
    global _thread
    with _lock:
        thread, _thread = _thread, None
    if thread is not None:
        _stop.set()
        thread.join(timeout=5)
    with contextlib.suppress(OSError):
        (runtime_dir() / f"{os.getpid()}.json").unlink()


# --- reading (the CLI side) ----------------------------------------------------------


@dataclass(frozen=True)
class TrackedDevice:
    torch_index: int
    uuid: str
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    alloc_retries: int
    ooms: int


@dataclass(frozen=True)
class TrackedProcess:
    pid: int
    command: str
    updated_at: float
    devices: tuple[TrackedDevice, ...]


def read_entries(directory: Path | None = None, now: float | None = None) -> dict[int, TrackedProcess]:
    """Fresh, well-formed entries of live processes owned by this user, by PID."""
    directory = directory or runtime_dir()
    now = time.time() if now is None else now
    found: dict[int, TrackedProcess] = {}
    try:
        st = directory.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return {}  # not our private directory: trust nothing in it
        paths = list(directory.glob("*.json"))
    except OSError:
        return {}
    for path in paths:
        try:
            if path.stat().st_uid != os.getuid():
                continue
            data = json.loads(path.read_text())
            entry = _parse(data)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if entry is None or now - entry.updated_at > STALE_AFTER_S or not _alive(entry.pid):
            continue
        found[entry.pid] = entry
    return found


def _parse(data: Any) -> TrackedProcess | None:
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
        )
        for d in data["devices"]
    )
    return TrackedProcess(int(data["pid"]), str(data["command"]), float(data["updated_at"]), devices)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
