"""Files gpudiag writes, never left half-written.

- **A document** (``snapshot -o``, ``--junit``, a ``--textfile`` .prom file, a tracker entry):
  :func:`write_atomic` writes a temporary file in the same directory, flushes it to disk and renames
  it over the target, so a reader (a CI system, node_exporter's textfile collector, a scheduler)
  sees the old file or the new one, never part of one. A target that is not a regular file
  (``-o /dev/stdout``, a FIFO) is written directly: there is nothing to rename over.
- **A log** (``memory --log``): :class:`AppendLog` appends a record (one sample's lines) at a time;
  a record that cannot be written whole is cut off again, so the file ends with the last whole sample.

Either way, a full disk, a quota or an I/O error is exit 74 (:data:`ExitCode.OUTPUT_ERROR`) and a
path that cannot be written (no such directory, permission denied) a usage error (2), with nothing
partial left behind: not even the temporary file, also when a signal ends gpudiag mid-write
(the temporary file is registered with :mod:`gpudiag.edge`, which removes it on any early exit).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from gpudiag import edge
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from pathlib import Path  # imported where a file is written: a replay reads with read_upto alone

# What a document is: its text or bytes, or a function that writes it into a binary file as it
# goes (a 50,000-node JUnit report is never held whole in memory).
Content = str | bytes | Callable[[BinaryIO], None]


# A file an option names for gpudiag to read (`memory --postmortem`, `--plot`) larger than this is none
# of gpudiag's: a post-mortem with PyTorch's snapshot is megabytes, a day's watch log of 8 GPUs ~100 MB.
MAX_READ = 2**30
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_upto(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of an open file, to its end (one read may return fewer bytes)."""
    chunks = []
    while limit > 0 and (chunk := os.read(fd, limit)):
        chunks.append(chunk)
        limit -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_input(path: Path, option: str, limit: int = MAX_READ) -> bytes:
    """The bytes of a file ``option`` names, or a usage error that says why not: only a regular file,
    opened without blocking (a FIFO would wait for ever, /dev/zero never ends), not empty to ``stat``
    (a kernel file in /proc: reading some blocks or consumes), at most ``limit`` bytes."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read it: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{option} {path}: not a regular file (a FIFO, a device or a directory): not read")
        if info.st_size == 0:
            raise UsageError(f"{option} {path}: empty (or a kernel file in /proc): not read")
        if info.st_size > limit:
            raise UsageError(f"{option} {path}: larger than {limit // 2**20} MiB: not one of gpudiag's files")
        raw = read_upto(fd, info.st_size + 1)  # + 1: notice a file that grew
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise UsageError(f"{option} {path}: grew beyond {limit // 2**20} MiB while it was read")
    return raw


def output_error(path: Path | str, exc: OSError) -> GpudiagError:
    """The one line and the exit code for a file that could not be written: 74 when the machine
    could not take it (disk full, quota, I/O error), 2 when the path cannot be written at all."""
    code = ExitCode.OUTPUT_ERROR if exc.errno in edge.WRITE_ERRORS else ExitCode.USAGE
    return GpudiagError(f"cannot write {path}: {exc.strerror or exc}", code)


def write_atomic(path: Path, data: Content, *, mode: int = 0o666) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8; a callable writes into the file) all at once,
    or leave it as it was.

    ``mode`` is the new file's permissions before the umask (0o600 for private files); an existing
    file keeps its own. Raises :class:`GpudiagError` (see :func:`output_error`).
    """
    from pathlib import Path

    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(os.path.realpath(path))  # through a symlink: the link stays, its file is replaced
    try:
        existing = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise output_error(path, exc) from None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(path, payload)  # a device or a FIFO: nothing to rename over
        return
    temporary = str(target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    edge.track_temporary(temporary)  # before it exists: a signal in between still leaves nothing
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            _write_all(fd, payload)
            os.fsync(fd)  # a full disk may only say so here (delayed allocation, NFS)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException as exc:
        _remove(temporary)
        if isinstance(exc, OSError):
            raise output_error(path, exc) from None
        raise
    finally:
        edge.untrack_temporary(temporary)


def _write_in_place(path: Path, payload: bytes | Callable[[BinaryIO], None]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        try:
            _write_all(fd, payload)
        finally:
            os.close(fd)
    except OSError as exc:
        raise output_error(path, exc) from None


def _write_all(fd: int, payload: bytes | Callable[[BinaryIO], None]) -> None:
    if callable(payload):
        with os.fdopen(fd, "wb", closefd=False) as out:  # buffered; flushed (and errors raised) on exit
            payload(out)
        return
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # never created, or already renamed
        return


class AppendLog:
    """A log file that grows a whole record at a time (see the module's docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        try:
            try:
                self._fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
                self._created = True
            except FileExistsError:
                self._fd = os.open(path, flags)
                self._created = False
            self.empty = os.fstat(self._fd).st_size == 0
        except OSError as exc:
            raise output_error(path, exc) from None

    def append(self, text: str) -> None:
        """Write ``text`` whole, or not at all (a failed or interrupted write is cut off again)."""
        payload = text.encode("utf-8")
        try:
            start = os.lseek(self._fd, 0, os.SEEK_END)
        except OSError as exc:
            raise output_error(self.path, exc) from None
        try:
            _write_all(self._fd, payload)
        except BaseException as exc:
            with contextlib.suppress(OSError):  # the error below is what matters
                os.ftruncate(self._fd, start)
            if isinstance(exc, OSError):
                raise output_error(self.path, exc) from None
            raise
        self.empty = False

    def close(self) -> None:
        """Close the file; one this log created and never wrote a record to is removed again."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        with contextlib.suppress(OSError):
            os.close(fd)
        if self._created and self.empty:
            _remove(str(self.path))
