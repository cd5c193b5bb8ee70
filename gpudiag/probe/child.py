"""Run one of gpudiag's child programs (:mod:`gpudiag.children`) with a deadline and read its lines.

torch is imported and CUDA initialised only in children: a torch that fails to import,
hangs in CUDA init or crashes the interpreter is reported as exactly that, and the
parent never initialises CUDA (which would make later forks unsafe and pin the
environment that CUDA read). A child can be started first and read later
(:func:`start` then :meth:`Running.finish`): its lines wait in a queue while the parent
does other work, such as reading NVML while torch imports.
"""

from __future__ import annotations

import contextlib
import enum
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from gpudiag import edge
from gpudiag.children import protocol

CHILDREN = Path(__file__).resolve().parent.parent / "children"


def script(name: str) -> Path:
    """The path of a child program, e.g. ``script("torch_probe")``: run by path with any interpreter."""
    return CHILDREN / f"{name}.py"


class ChildOutcome(str, enum.Enum):
    OK = "ok"
    TIMEOUT = "timeout"  # hung (e.g. in CUDA init)
    CRASHED = "crashed"  # killed by a signal (segfault, abort)
    FAILED = "failed"  # exited non-zero, e.g. ImportError
    NO_RESULT = "no_result"  # exited 0 without printing a result
    NOT_STARTED = "not_started"  # the interpreter could not be run


class ChildResult(msgspec.Struct, frozen=True):
    outcome: ChildOutcome
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    detail: str = ""  # one line for users: the error, the signal, the timeout
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.outcome is ChildOutcome.OK


def hung_detail(seconds: float) -> str:
    return f"no answer within {seconds:g} s (hung, e.g. in CUDA initialisation)"


# The deadline a reader gives: (monotonic time, what to say if it passes).
Deadline = Callable[[], tuple[float, str]]


class Running:
    """A started child. Its stdout lines queue up until :meth:`finish` reads them."""

    def __init__(self, proc: subprocess.Popen[str] | None, start: float, not_started: str = "") -> None:
        self.proc, self.start, self.not_started = proc, start, not_started
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        if proc is not None:
            assert proc.stdout is not None and proc.stderr is not None
            out, err = proc.stdout, proc.stderr
            threading.Thread(target=self._pump, args=(out,), daemon=True).start()
            self._drain = threading.Thread(target=self._read_stderr, args=(err,), daemon=True)
            self._drain.start()

    def send(self, line: str) -> None:
        """Answer a child that asks (started with ``ask=True``): one line, then its stdin closes."""
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(line.rstrip("\n") + "\n")
            self.proc.stdin.close()
        except OSError:  # it has already gone; finish() says how
            pass

    def kill(self) -> None:
        """End a child whose answer is no longer wanted (the parent is giving up), and its group."""
        if self.proc is not None and self.proc.returncode is None:  # not reaped: its pid is still its own
            _kill_group(self.proc)
        self._reap()

    def _reap(self) -> None:
        if self.proc is not None:
            self.proc.wait()
            edge.untrack_group(self.proc.pid)

    def _pump(self, stream: Any) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):  # the pipe closed under us
                for line in stream:
                    self._lines.put(line.rstrip("\n"))
        finally:  # whatever happens, the reader learns that no more lines come
            self._lines.put(None)

    def _read_stderr(self, stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us
            self._err.append(stream.read())

    def finish(self, on_line: Callable[[str], None] | None, deadline: Deadline) -> ChildResult:
        """Read every line (``on_line`` sees each, in this thread) until the child ends or
        ``deadline()`` passes (then its whole process group is killed)."""
        if self.proc is None:
            return ChildResult(ChildOutcome.NOT_STARTED, detail=self.not_started)
        try:
            return self._read(on_line, deadline)
        except BaseException:  # a signal (or a bug in on_line): the child must not outlive the reader
            self.kill()
            raise

    def _read(self, on_line: Callable[[str], None] | None, deadline: Deadline) -> ChildResult:
        assert self.proc is not None
        last: dict[str, Any] | None = None
        while True:
            when, why = deadline()
            remaining = when - time.monotonic()
            if remaining <= 0:
                self.kill()
                self._drain.join(timeout=5)
                return ChildResult(ChildOutcome.TIMEOUT, detail=why, seconds=time.monotonic() - self.start)
            try:
                line = self._lines.get(timeout=min(remaining, 0.25))
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith(protocol.RESULT):
                last = protocol.payload(line, protocol.RESULT)
            elif on_line is not None:
                on_line(line)
        self._reap()
        self._drain.join(timeout=5)
        return self._ended(last)

    def _ended(self, data: dict[str, Any] | None) -> ChildResult:
        assert self.proc is not None
        seconds = time.monotonic() - self.start
        code = self.proc.returncode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return ChildResult(ChildOutcome.CRASHED, data or {}, f"crashed with {name}", seconds)
        if code != 0:
            err = "".join(self._err)
            return ChildResult(ChildOutcome.FAILED, data or {}, _last_error_line(err, code), seconds)
        if data is None:
            return ChildResult(ChildOutcome.NO_RESULT, detail="the child printed no result", seconds=seconds)
        return ChildResult(ChildOutcome.OK, data, "", seconds)


def start(
    args: Sequence[str], *, python: str | None = None, env: Mapping[str, str] | None = None, ask: bool = False
) -> Running:
    """Start ``python ARGS`` (gpudiag's own interpreter unless another is named) in its own session.

    ``ask``: the child's stdin is a pipe for one answer (:meth:`Running.send`); else it is empty.
    """
    interpreter = python or sys.executable
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONFAULTHANDLER", "1")  # a segfault leaves a Python stack on stderr
    begun = time.monotonic()
    try:
        proc = subprocess.Popen(
            [interpreter, *args],
            stdin=subprocess.PIPE if ask else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            encoding="utf-8",
            errors="replace",  # a child's stray bytes are shown as U+FFFD, never a decoding error
            start_new_session=True,  # so a timeout can kill the child's whole group
        )
    except OSError as exc:
        return Running(None, begun, f"cannot run {interpreter}: {exc.strerror or exc}")
    edge.track_group(proc.pid)  # its own session: the process group is the child's pid
    return Running(proc, begun)


def run_child(
    args: Sequence[str],
    *,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    on_line: Callable[[str], None] | None = None,
) -> ChildResult:
    """Run ``python ARGS`` to its end (or ``timeout``) and return the result it emitted.

    ``on_line`` sees each other stdout line as it arrives: a child under load can say so, and
    the parent reads NVML while the GPU is busy.
    """
    running = start(args, python=python, env=env)
    limit = running.start + timeout
    return running.finish(on_line, lambda: (limit, hung_detail(timeout)))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _last_error_line(stderr: str, code: int) -> str:
    for line in reversed(stderr.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("File ", "^", "~")):
            return line
    return f"exited with status {code}"
