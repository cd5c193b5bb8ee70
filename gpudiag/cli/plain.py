"""What a command needs that does not need typer or rich: its settings, plain text out, and the
rule that turns whatever ends it into one line and an exit code.

Typer's commands (:mod:`gpudiag.cli.common`) and the machine-readable paths that run without the
framework (:mod:`gpudiag.cli.plain_front`) share it, so both print the same bytes and exit alike.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from gpudiag import edge
from gpudiag.errors import DEBUG_ENV, GpudiagError
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import Gpu, GpuState, NvmlInfo, NvmlStatus


class Settings(msgspec.Struct, frozen=True):
    replay: str | None  # example name or snapshot path, from --replay or GPUDIAG_REPLAY
    debug: bool
    color: str  # auto | always | never


def ascii_configured(stream: Any) -> bool:
    """A stream whose encoding is ASCII (or unknown): click re-encodes such a stream as UTF-8 when it
    echoes, so only click's own echo writes the same bytes to it."""
    encoding = (getattr(stream, "encoding", None) or "ascii").lower()
    try:
        import codecs

        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


def write(text: str, *, err: bool = False) -> None:
    """``text`` as ``typer.echo(text, nl=False)`` writes it: escape sequences stripped when the
    stream is not a terminal, then flushed (a reader gone or a full disk raises here)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if ascii_configured(stream):
        import typer

        typer.echo(text, nl=False, err=err)
        return
    if "\x1b" in text and not _isatty(stream):
        import re

        text = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", text)  # click's strip_ansi
    if text:
        stream.write(text)
    stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Plain text that may carry outside text (CSV, -q, -L): through render.printable's guard."""
    from gpudiag.render.printable import guard

    write(guard(text) + ("\n" if nl else ""), err=err)


def require_nvml(info: NvmlInfo) -> None:
    """The rule for NVML that did not start, in every command that needs it: its detail in one
    line, and nvidia-smi's exit code for it (see gpudiag.exitcodes.NVML_EXIT)."""
    if info.status is not NvmlStatus.OK:
        raise GpudiagError(info.detail, NVML_EXIT[info.status])


def lost_line(gpus: Iterable[Gpu]) -> str | None:
    """The one line for lost GPUs, after the data (every command that shows GPUs exits 15 with it)."""
    lost = [g for g in gpus if g.state is GpuState.LOST]
    if not lost:
        return None
    said = "; ".join(f"GPU {g.index}: {g.state_detail or 'GPU is lost'}" for g in lost)
    return f"{said} (the other GPUs are shown)"


def say(message: str) -> None:
    """One line on stderr, outside text in it made printable."""
    from gpudiag.render.printable import printable

    edge.say(printable(message))


def guarded(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    stop: Callable[[int], BaseException],
    passes: tuple[type[BaseException], ...] = (SystemExit,),
) -> Any:
    """Run a command: expected faults become one line and ``stop(code)`` (raised), signals 128+N,
    bugs a short report; ``passes``: the exits the command raises itself."""
    try:
        with edge.CommandSignals():
            try:
                return fn(*args, **kwargs)
            except passes:
                raise
            except BaseException as exc:
                if edge.received() is not None:
                    return None  # what the signal caused is no finding: the exit is 128+N below
                raise stop(report(exc)) from None
    finally:  # after the handlers are back: a signal from here on ends the process at once
        _end_if_signalled(stop)


def _end_if_signalled(stop: Callable[[int], BaseException]) -> None:
    """A signal that arrived while the command ran decides the exit code, whatever the command made
    of its exception: Python 3.11 wraps it in a RuntimeError when it lands in a class body's
    ``__set_name__``, and a library may swallow it. A signal is never success."""
    signum = edge.received()
    if signum is not None:
        edge.clean_up()
        raise stop(edge.SIGNAL_BASE + signum) from None


def report(exc: BaseException) -> int:
    """An exception out of a command with no signal behind it: its line said, its exit code."""
    if isinstance(exc, GpudiagError):
        say(exc.message)
        return int(exc.code)
    if isinstance(exc, KeyboardInterrupt):  # Python's own SIGINT (handlers not ours: not the main thread)
        edge.clean_up()
        return edge.exit_code(exc)
    if isinstance(exc, BrokenPipeError):
        # Reader went away (`| head`): silence the rest, exit cleanly.
        edge.stdout_to_devnull()
        return int(ExitCode.OK)
    if isinstance(exc, OSError) and exc.errno in edge.WRITE_ERRORS:
        # disk full, I/O error: the machine's fault, not a bug
        edge.stdout_to_devnull()
        say(edge.write_error(exc))
        return int(ExitCode.OUTPUT_ERROR)
    if not isinstance(exc, Exception):  # GeneratorExit and the like: not ours to report
        raise exc
    return _internal(exc)


def _internal(exc: BaseException) -> int:
    """A bug: one line, exit 70; the traceback only with --debug."""
    debug = bool(os.environ.get(DEBUG_ENV))
    if debug:
        import traceback  # ~3 ms of start-up: only for the bug it shows

        traceback.print_exception(exc)
    hint = "" if debug else " (run with --debug for the traceback)"
    say(f"internal error: {type(exc).__name__}: {exc}{hint}")
    return int(ExitCode.INTERNAL)
