"""Run Python code in a child process with a timeout and read back one JSON object.

torch is imported and CUDA initialised only in children: a torch that fails to import,
hangs in CUDA init or crashes the interpreter is reported as exactly that, and the
parent never initialises CUDA (which would make later forks unsafe and pin the
environment that CUDA read).
"""

from __future__ import annotations

import enum
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

RESULT_MARKER = "@@GPUDIAG_RESULT@@"


class ChildOutcome(str, enum.Enum):
    OK = "ok"
    TIMEOUT = "timeout"  # hung (e.g. in CUDA init)
    CRASHED = "crashed"  # killed by a signal (segfault, abort)
    FAILED = "failed"  # exited non-zero, e.g. ImportError
    NO_RESULT = "no_result"  # exited 0 without printing a result
    NOT_STARTED = "not_started"  # the interpreter could not be run


@dataclass(frozen=True)
class ChildResult:
    outcome: ChildOutcome
    data: dict[str, Any] = field(default_factory=dict)
    detail: str = ""  # one line for users: the error, the signal, the timeout
    seconds: float = 0.0
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is ChildOutcome.OK


def emit_line() -> str:
    """Code a child script ends with: ``emit(obj)`` prints the result the parent reads."""
    return (
        "def emit(obj):\n"
        "    import json, sys\n"
        f"    sys.stdout.write({RESULT_MARKER!r} + json.dumps(obj) + '\\n')\n"
        "    sys.stdout.flush()\n"
    )


def run_python(
    code: str,
    *,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    on_line: Callable[[str], None] | None = None,
) -> ChildResult:
    """Run ``code`` (which calls ``emit(dict)``) under ``python`` and return what it emitted.

    ``on_line`` sees each stdout line as it arrives: a child under load can say so, and the
    parent reads NVML while the GPU is busy.
    """
    interpreter = python or sys.executable
    script = emit_line() + code
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONFAULTHANDLER", "1")  # a segfault leaves a Python stack on stderr
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            [interpreter, "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            text=True,
            start_new_session=True,  # so a timeout can kill the child's whole group
        )
    except OSError as exc:
        return ChildResult(ChildOutcome.NOT_STARTED, detail=f"cannot run {interpreter}: {exc.strerror or exc}")
    try:
        if on_line is None:
            out, err = proc.communicate(timeout=timeout)
        else:
            out, err = _stream(proc, timeout, on_line)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return ChildResult(
            ChildOutcome.TIMEOUT,
            detail=f"no answer within {timeout:g} s (hung, e.g. in CUDA initialisation)",
            seconds=time.monotonic() - start,
            stderr_tail=_tail(err),
        )
    seconds = time.monotonic() - start
    data = _result(out)
    if proc.returncode < 0:
        sig = -proc.returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return ChildResult(ChildOutcome.CRASHED, data or {}, f"crashed with {name}", seconds, _tail(err))
    if proc.returncode != 0:
        return ChildResult(ChildOutcome.FAILED, data or {}, _last_error_line(err, proc.returncode), seconds, _tail(err))
    if data is None:
        return ChildResult(
            ChildOutcome.NO_RESULT, detail="the child printed no result", seconds=seconds, stderr_tail=_tail(err)
        )
    return ChildResult(ChildOutcome.OK, data, "", seconds, _tail(err))


def _stream(proc: subprocess.Popen[str], timeout: float, on_line: Callable[[str], None]) -> tuple[str, str]:
    """Read stdout line by line, calling ``on_line``; stderr is drained by a thread."""
    assert proc.stdout is not None and proc.stderr is not None
    err_chunks: list[str] = []
    stderr = proc.stderr
    drain = threading.Thread(target=lambda: err_chunks.append(stderr.read()), daemon=True)
    drain.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, expire)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            on_line(line.rstrip("\n"))
        proc.wait()
    finally:
        timer.cancel()
    drain.join(timeout=5)
    if expired.is_set():
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return "".join(lines), "".join(err_chunks)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _result(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                value = json.loads(line[len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _last_error_line(stderr: str, code: int) -> str:
    for line in reversed(stderr.strip().splitlines()):
        line = line.strip()
        if line and not line.startswith(("File ", "^", "~")):
            return line
    return f"exited with status {code}"
