"""The process's edge, in one place: signals, standard streams and the exit codes they give.

- **Signals.** SIGINT, SIGTERM and SIGHUP end every command with 128+N (130, 143, 129), never 0:
  ``gpudiag memory --until-free 20GiB && python train.py`` must not start the job when the wait
  was cut short. Before a command runs (imports, option parsing) nothing needs cleaning up, so a
  signal ends the process at once; while a command runs (:class:`CommandSignals`) it raises
  :class:`Interrupted`, so that watches restore the terminal, children are stopped and files
  half-written are removed on the way out. A second signal during that clean-up ends the process
  at once (after killing children and removing temporary files). A signal ignored when gpudiag
  started (``nohup``, a background job of a non-interactive shell) stays ignored. Once the answer
  is out (:func:`answered`), a signal takes its default action: the process dies by it.
- **A signal Python cannot pass on still decides the exit code.** The exception can land where
  Python only reports it: a weakref callback of the import system ("Exception ignored in …"), a
  ``__del__``. Such an interruption ends the process at once, as a second signal does. Where
  Python wraps it (``__set_name__`` in 3.11 raises a RuntimeError from it) or a library swallows
  it, the signal is still on record (:func:`received`) and the command ends with 128+N.
- **Children** run in sessions of their own (a timeout kills the whole group), so the terminal's
  Ctrl-C does not reach them: every running child's process group is registered here and killed
  whenever gpudiag ends early.
- **Standard output** that cannot be written (disk full, I/O error) is one line and exit 74; a
  reader that went away (``| head``) is not an error. **Standard error** that cannot be written
  never changes the exit code: it is a diagnostic, the exit code is the answer.

Imported by :mod:`gpudiag.entry` before typer and rich: the standard library's cheapest only.
"""

from __future__ import annotations

import errno
import os
import sys

try:  # the C module `signal` wraps: `signal` imports enum first, 2-9 ms before the handlers are set
    import _signal  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - an interpreter without it
    import signal as _signal

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: typing is not loaded yet, and need not be
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

# The codes this module gives; gpudiag.exitcodes.ExitCode has the same numbers (a test keeps them equal).
USAGE = 2
OUTPUT_ERROR = 74
SIGNAL_BASE = 128  # a signal N ends gpudiag with 128 + N, as a shell reports a process the signal killed
SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)

# Errors of writing output that are the machine's, not gpudiag's nor the user's: disk full, quota,
# file too big (RLIMIT_FSIZE), I/O error. Other errors of a named file (no such directory, permission
# denied) are the user's: a usage error.
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})

SHOW_CURSOR = b"\x1b[?25h"

_groups: set[int] = set()  # process groups of running children (each child leads its own)
_temporaries: set[str] = set()  # files being written, to remove if gpudiag ends first
_cursor_hidden = False  # a live view hid the terminal's cursor
_received: int | None = None  # the terminating signal that arrived while the command ran


class Interrupted(KeyboardInterrupt):
    """A terminating signal arrived while a command ran. A KeyboardInterrupt, so that every
    clean-up written for Ctrl-C (``finally``, ``except KeyboardInterrupt``) also runs for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal's number; a bare KeyboardInterrupt is Python's SIGINT."""
    return SIGNAL_BASE + int(getattr(interrupt, "signum", _signal.SIGINT))


# --- children, temporary files, the cursor: what an early end must not leave behind -----------


def track_group(pgid: int) -> None:
    if pgid != os.getpgrp():  # never our own group (a test runner's, a shell's)
        _groups.add(pgid)


def untrack_group(pgid: int) -> None:
    _groups.discard(pgid)


def track_temporary(path: str) -> None:
    _temporaries.add(path)


def untrack_temporary(path: str) -> None:
    _temporaries.discard(path)


def cursor_hidden(hidden: bool) -> None:
    """A live view says it hid (or showed again) the cursor, for an exit that skips its clean-up."""
    global _cursor_hidden
    _cursor_hidden = hidden


def clean_up() -> None:
    """Kill every child's process group and remove every temporary file; safe to call twice."""
    for pgid in list(_groups):
        _no_matter(os.killpg, pgid, _signal.SIGKILL)  # gone already: fine
        _groups.discard(pgid)
    for path in list(_temporaries):
        _no_matter(os.unlink, path)
        _temporaries.discard(path)


def _no_matter(call: Any, *args: Any) -> None:
    """``call(*args)``, an OSError ignored. (Not contextlib.suppress: contextlib is not loaded yet.)"""
    try:
        call(*args)
    except OSError:
        return


def _exit_now(signum: int, _frame: FrameType | None) -> None:
    """A signal outside a command, or a second one during clean-up: end at once, leaving nothing."""
    clean_up()
    if _cursor_hidden:
        _no_matter(os.write, 1, SHOW_CURSOR)
    os._exit(SIGNAL_BASE + signum)


def received() -> int | None:
    """The terminating signal that arrived while the current command ran, if one did: whatever
    the command made of the exception, the process ends with 128 + it."""
    return _received


def _raise(signum: int, _frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum
    for each in SIGNALS:  # the clean-up this starts must not be cut short by a repeat
        if _signal.getsignal(each) is _raise:
            _signal.signal(each, _exit_now)
    raise Interrupted(signum)


def install() -> None:
    """From the first line of gpudiag until a command runs: every signal ends the process at once.
    An interruption that Python can only report as "Exception ignored" ends it at once too."""
    _set_all(_exit_now)
    sys.unraisablehook = _unraisable


def answered() -> None:
    """The answer is out and its exit code decided: from here a signal takes its default action, and
    the shell reports the process killed by it (128+N). The interpreter's shutdown that follows is no
    place for our handler (modules are being torn down), and Python drops a signal still pending
    when it clears its handlers, which would leave the answer's exit code.

    The signals are blocked while the handlers change: Python runs pending handlers, then installs
    the new one, and a signal between the two would be flagged for a handler no longer there, and
    dropped. Blocked, it waits in the kernel and takes its default action once unblocked."""
    try:
        mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, OSError):  # pragma: no cover - no POSIX threads' signal masks
        _set_all(_signal.SIG_DFL)
        return
    try:
        _set_all(_signal.SIG_DFL)
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)


def _unraisable(unraisable: Any) -> None:
    """Python's hook for an exception it cannot raise (weakref callbacks, ``__del__``): an
    :class:`Interrupted` there would be lost and the command run on to exit 0; end now instead."""
    exc = unraisable.exc_value
    if isinstance(exc, Interrupted):
        _exit_now(exc.signum, None)
    sys.__unraisablehook__(unraisable)


def _set_all(handler: Any) -> dict[int, Any]:
    """Point every terminating signal not ignored at ``handler``; the previous handlers by signal."""
    previous: dict[int, Any] = {}
    for signum in SIGNALS:
        current = _signal.getsignal(signum)
        if current == _signal.SIG_IGN:  # nohup, `cmd &` in a script: the caller's choice stands
            continue
        try:
            previous[signum] = _signal.signal(signum, handler)
        except ValueError:  # not the main thread (embedded use): leave signals alone
            return previous
    return previous


class CommandSignals:
    """While a command runs, signals raise :class:`Interrupted`; afterwards, the handlers before."""

    def __enter__(self) -> None:
        global _received
        _received = None
        self._previous = _set_all(_raise)

    def __exit__(self, *_: object) -> None:
        for signum, handler in self._previous.items():
            _signal.signal(signum, handler)


# --- standard streams ------------------------------------------------------------------------


def stdout_usable() -> bool:
    """False when the caller closed standard output (`>&-`): Python then has no sys.stdout."""
    if sys.stdout is None:
        return False
    try:
        os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return True


def write_error(exc: OSError) -> str:
    """The one line for output that cannot be written."""
    return f"cannot write {exc.filename or 'standard output'}: {exc.strerror or exc}"


def say(line: str) -> None:
    """One line on standard error, prefixed ``gpudiag:``; a stderr that cannot take it is no error."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(f"gpudiag: {line}\n")
        stream.flush()
    except (OSError, ValueError):
        _to_devnull(2)


def cannot_write(exc: OSError) -> None:
    """Say why output could not be written, drop what is still buffered, exit 74."""
    stdout_to_devnull()
    say(write_error(exc))
    raise SystemExit(OUTPUT_ERROR)


def stdout_to_devnull() -> None:
    """Point standard output at /dev/null: what is still buffered cannot be written anyway."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return
    _to_devnull(fd)


def _to_devnull(fd: int) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


def flush_stdout() -> None:
    """Flush stdout now, so that a reader that went away (`| head`) cannot make the interpreter
    print "Exception ignored … BrokenPipeError" at exit, and a full disk is exit 74, not 120."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, AttributeError):
        stdout_to_devnull()
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        cannot_write(exc)


class ForgivingStream:
    """Standard error that cannot fail: a write that does not go through (``2>/dev/full``, a closed
    pipe) is dropped, and so is the rest, so that no diagnostic changes the exit code."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except (OSError, ValueError):
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self._drop()

    def _drop(self) -> None:
        try:
            _to_devnull(self._stream.fileno())
            self._stream.flush()  # what was buffered now goes to /dev/null: the exit flush succeeds
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def forgive_stderr() -> None:
    if sys.stderr is not None and not isinstance(sys.stderr, ForgivingStream):
        sys.stderr = ForgivingStream(sys.stderr)
