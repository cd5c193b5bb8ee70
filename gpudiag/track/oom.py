"""The out-of-memory post-mortem, written by the tracker inside the training process.

At the moment of an OOM, through the allocator's out-of-memory observer where this torch has one
(``torch._C._cuda_attach_out_of_memory_observer``: CUDA builds; called with the device, the size
asked, the device's total or allowed memory, and what the driver still had free; see
``c10/cuda/CUDACachingAllocator.h``), else when the publisher sees the OOM count rise, one file
(``gpudiag.oom/1``, JSON, mode 0600) records what is known: this process's allocator on every
device with the largest free block, the last publications and step records, the other tracked
processes on that GPU, and, if the program enabled ``torch.cuda.memory._record_memory_history``,
PyTorch's own snapshot. The publisher then adds the whole machine as ``gpudiag memory --json``
would show it (per-GPU memory, every process, their allocator split), when gpudiag's NVML
reading works here.

Standard library only, like the rest of the tracker; nothing here raises into the program.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudiag.track import allocator

SCHEMA = "gpudiag.oom/1"
DIR_ENV = "GPUDIAG_OOM_DIR"
MAX_REPORTS = 3  # per process: a loop that catches OOMs and retries smaller must not fill the disk


def report_dir(environ: Any = os.environ) -> Path:
    """Where post-mortems go: ``$GPUDIAG_OOM_DIR``, else the program's working directory (where a
    core file or PyTorch's ``oom_snapshot.pickle`` recipe would be)."""
    return Path(environ.get(DIR_ENV) or os.getcwd())


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, set)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def write_report(doc: dict[str, Any], directory: Path, name: str) -> Path:
    """Write ``doc`` to ``directory/name`` atomically, mode 0600 (it holds command lines and stacks)."""
    path = directory / name
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, default=_jsonable, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def history_snapshot(torch: Any) -> dict[str, Any] | None:
    """PyTorch's memory snapshot when the program records history (its traces or frames are not empty)."""
    memory = getattr(torch.cuda, "memory", None)
    take = getattr(memory, "_snapshot", None)
    if take is None:
        return None
    snap = take()
    traces = any(snap.get("device_traces") or ())
    frames = any(block.get("frames") for seg in snap.get("segments", ()) for block in seg.get("blocks", ()))
    return dict(snap) if traces or frames else None


class Recorder:
    """Writes post-mortems for one process. ``entry`` builds the tracker's entry (fresh figures);
    ``context`` gives the recent publications, step records and peers for the report."""

    def __init__(
        self,
        entry: Callable[[], dict[str, Any]],
        context: Callable[[], dict[str, Any]],
        fallback_dir: Callable[[], Path | None],
        environ: Any = os.environ,
        err: Any = None,
    ) -> None:
        self._entry = entry
        self._context = context
        self._fallback_dir = fallback_dir
        self._environ = environ
        self._err = err
        self.observer_attached = False
        self.reports: list[str] = []
        self.pending: list[Path] = []  # written, the machine view not yet added
        self.enabled = True
        self._torch: Any = None  # the torch whose allocator calls the observer
        self._lock = threading.Lock()

    def attach(self, torch: Any) -> bool:
        """Attach the allocator's OOM observer once CUDA is up (before, the allocator has no devices)."""
        if self.observer_attached:
            return True
        attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return False
        attach(self.observe)
        self._torch = torch
        self.observer_attached = True
        return True

    def observe(self, device: int, alloc: int, device_total: int, device_free: int) -> None:
        """The allocator's callback, in the allocating thread, just before it raises OutOfMemoryError."""
        if not self.enabled:
            return  # stopped: an observer cannot be detached
        with contextlib.suppress(Exception):
            torch = self._torch or sys.modules.get("torch")
            oom = {
                "torch_index": int(device),
                "requested_bytes": int(alloc),
                "device_total_bytes": int(device_total),
                "device_free_bytes": int(device_free),
            }
            self.record("observer", oom, torch)

    def record(self, trigger: str, oom: dict[str, Any], torch: Any) -> Path | None:
        """Write one post-mortem and say where, in four lines on stderr. None past the limit."""
        with self._lock:
            if len(self.reports) >= MAX_REPORTS:
                return None
            at = time.time()
            entry = self._entry()
            doc = {
                "schema": SCHEMA,
                "trigger": trigger,
                "at": at,
                "host": socket.gethostname(),
                **{k: entry.get(k) for k in ("pid", "command", "torch_version", "alloc_conf", "rank", "local_rank")},
                **{k: entry.get(k) for k in ("world_size", "job")},
                "oom": oom,
                "devices": entry.get("devices", []),
                **self._context(),
                "torch_snapshot": None,
                "machine": None,
            }
            self._add_segments(doc, torch)
            name = f"gpudiag-oom-{entry.get('pid')}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(at))}"
            name += f"-{len(self.reports) + 1}.json"
            path = self._write(doc, name)
            if path is None:
                return None
            self.reports.append(str(path))
            self.pending.append(path)
        self._tell(doc, path)
        return path

    def _add_segments(self, doc: dict[str, Any], torch: Any) -> None:
        if torch is None:
            return
        with contextlib.suppress(Exception):
            snap = history_snapshot(torch)
            doc["torch_snapshot"] = snap
            segments = snap["segments"] if snap is not None else allocator.take_segments(torch)
            summary = allocator.segment_summary(segments)
            for dev in doc["devices"]:
                found = summary.get(dev["torch_index"])
                if found is not None:
                    dev.update(
                        largest_free_block_bytes=found["largest_free_block_bytes"],
                        free_blocks=found["free_blocks"],
                        expandable_segments=found["expandable"],
                        segments_at=doc["at"],
                    )

    def _write(self, doc: dict[str, Any], name: str) -> Path | None:
        for directory in (report_dir(self._environ), self._fallback_dir()):
            if directory is None:
                continue
            try:
                return write_report(doc, directory, name)
            except OSError:
                continue  # a read-only working directory: the tracker's private one instead
        return None

    def _tell(self, doc: dict[str, Any], path: Path) -> None:
        from gpudiag.track.report import summary_lines

        with contextlib.suppress(Exception):
            err = self._err or sys.stderr
            lines = summary_lines(doc)
            opening = f"open it with `gpudiag memory --postmortem {path}`"
            err.write(f"gpudiag.track: {lines[0]}; post-mortem in {path} ({opening})\n")
            for line in lines[1:]:
                err.write(f"gpudiag.track:   {line}\n")
            err.flush()

    def complete(self, machine: Callable[[], dict[str, Any]]) -> None:
        """Add the machine's view (NVML: every GPU and process) to the reports written since last time."""
        with self._lock:
            pending, self.pending = self.pending, []
        if not pending:
            return
        try:
            view: dict[str, Any] = machine()
        except Exception as exc:  # no NVML in this container, a driver problem: the report stays as it is
            view = {"unavailable": f"{type(exc).__name__}: {exc}"}
        for path in pending:
            with contextlib.suppress(OSError, ValueError):
                doc = json.loads(path.read_text())
                doc["machine"] = view
                write_report(doc, path.parent, path.name)
