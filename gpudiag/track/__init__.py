"""Publish PyTorch's allocator figures so `gpudiag memory` can explain NVML's number.

In training code::

    import gpudiag.track; gpudiag.track.start()

or without touching it: ``python -m gpudiag.track train.py --epochs 3``.

A daemon thread writes, every ``interval`` seconds, one small JSON file per process into a
per-user runtime directory (mode 0700, file 0600, written atomically). It reads
``torch.cuda.memory_stats`` only: no synchronisation, no allocation, nothing that touches
the training loop. It never raises into the caller, never imports torch itself (it waits
until the program has), never initialises CUDA, and removes its file at exit.

Where entries live, what one holds and how `gpudiag memory` reads them back: :mod:`gpudiag.track.entries`.

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
from pathlib import Path
from typing import Any

from gpudiag.track import allocator
from gpudiag.track.entries import (
    DEFAULT_INTERVAL_S,
    SCHEMA,
    pid_namespace,
    private,
    read_entries,
    runtime_dirs,
    segments_request,
    start_ticks,
)
from gpudiag.track.oom import Recorder
from gpudiag.track.steps import StepLog

MIN_INTERVAL_S = 1.0  # a watch refreshes at 1 Hz: publishing faster only costs the program
RECENT = 32  # publications kept per device: the entry's and a post-mortem's recent history
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


def _ensure_private_dir(path: Path) -> bool:
    """Create the directory 0700, and refuse one that someone else owns or others can use."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return private(path)


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
        "start_ticks": start_ticks("self"),
        "pid_namespace": pid_namespace(),
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


def _walk_segments(torch: Any, directory: Path, devices: list[dict[str, Any]]) -> None:
    """Take the allocator's segments when asked, or when the counters say fragmentation matters
    (each at most once per its interval: the walk holds the allocator's lock and the GIL)."""
    request = segments_request(directory, os.getpid())
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
    _recorder.complete(lambda: _machine_view(entry))


def _machine_view(own: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole machine as `gpudiag memory --json` shows it, for a post-mortem (gpudiag's NVML reading).

    ``own`` is this process's entry taken just now: its allocator's figures and NVML's are then of one
    moment, where the file on disk is the previous publication's (seconds older: a leak's gigabytes)."""
    from gpudiag.memory.postmortem import machine_document

    return machine_document(own)


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
            segments_request(directory, os.getpid()).unlink()


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

    return make(sys.modules[__name__], per_step_peaks)


def hf_callback(per_step_peaks: bool = False) -> Any:
    """A Hugging Face Trainer callback: ``Trainer(..., callbacks=[gpudiag.track.hf_callback()])``."""
    from gpudiag.track.callbacks import hf_callback as make

    return make(sys.modules[__name__], per_step_peaks)


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
            finisher = threading.Thread(
                target=_recorder.complete, args=(lambda: _machine_view(snapshot()),), daemon=True
            )
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
