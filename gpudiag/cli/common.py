"""What every command shares: settings from the global options, consoles, the error edge."""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, TypeVar

import msgspec
import typer

from gpudiag import edge
from gpudiag.cli import terminal_env
from gpudiag.errors import DEBUG_ENV, GpudiagError
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import Gpu, GpuState, NvmlInfo, NvmlStatus
from gpudiag.probe.collect import REPLAY_ENV

F = TypeVar("F", bound=Callable[..., Any])


class Settings(msgspec.Struct, frozen=True):
    replay: str | None  # example name or snapshot path, from --replay or GPUDIAG_REPLAY
    debug: bool
    color: str  # auto | always | never


def settings(ctx: typer.Context) -> Settings:
    root = ctx.find_root()
    obj = root.obj
    if isinstance(obj, Settings):
        return obj
    return Settings(replay=os.environ.get(REPLAY_ENV) or None, debug=bool(os.environ.get(DEBUG_ENV)), color="auto")


R = TypeVar("R", bound=msgspec.Struct)


def request_of(kind: type[R], arguments: Mapping[str, Any]) -> R:
    """A command's options as its request: ``kind`` (a Struct with a field per option, named as the
    command's parameter) from the command's ``locals()``. The one way options reach the layers
    below, which check them and parse them once into what they mean (``checks.request.prepare``)."""
    return kind(**{name: arguments[name] for name in kind.__struct_fields__})


# Width of output that goes to a pipe or file with no COLUMNS set: wide enough for every column.
UNLIMITED_WIDTH = 1000


def make_console(s: Settings | None = None, *, stderr: bool = False, file: IO[str] | None = None) -> Any:
    """A rich Console for this invocation.

    Colour: ``--color always|never`` wins; with ``auto``, rich colours a terminal unless NO_COLOR is
    set. Width: the terminal's, or COLUMNS when set (clamped: cli.terminal_env); output to a pipe or
    file without COLUMNS gets every column (as nvidia-smi prints its full table into a file), not
    rich's 80-column default, and no padding at the ends of its lines. Every character it writes
    passes render.printable's guard.
    """
    from rich.console import Console

    color = s.color if s else "auto"
    # markup/emoji off: data like "[N/A]" or a bus id ":AB:" must print as written.
    kwargs: dict[str, Any] = {"highlight": False, "soft_wrap": False, "markup": False, "emoji": False}
    if color == "never":
        kwargs["no_color"] = True
        kwargs["color_system"] = None
    elif color == "always":
        kwargs["force_terminal"] = True
        kwargs["no_color"] = False  # an explicit choice outranks NO_COLOR
    if file is not None:
        kwargs["file"] = file

    from rich.segment import Segment

    from gpudiag.render.printable import guard, strip_trailing_blanks

    class _Console(Console):
        piped = False

        def on_broken_pipe(self) -> None:
            # rich exits 1 here; a reader that went away (`| head`) is the error edge's to end, quietly.
            self.quiet = True
            raise BrokenPipeError

        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            """Where everything this console prints becomes text: outside text that a renderer did
            not escape (render.printable) cannot reach the terminal as a control here either."""
            safe = (
                seg
                if seg.control or seg.text.isprintable() or seg.text == "\n"
                else Segment(guard(seg.text), seg.style)
                for seg in buffer
            )
            rendered = super()._render_buffer(safe)
            return strip_trailing_blanks(rendered) if self.piped else rendered

    terminal_env.sanitize(os.environ)  # rich reads COLUMNS and LINES as they are
    console = _Console(stderr=stderr, **kwargs)
    console.piped = not _is_tty(console.file)
    if console.piped and "COLUMNS" not in os.environ:
        console.width = UNLIMITED_WIDTH  # forced colour into a pipe too: the pipe has no width
    return console


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def echo(text: str, *, err: bool = False, nl: bool = True, one_line: bool = False) -> None:
    """Plain text out (CSV, `-q` details, messages): outside text in it cannot reach the terminal
    as a control (render.printable's guard; with ``one_line``, a line break in it is escaped too).
    JSON from ``json.dumps`` is ASCII by construction and may skip it."""
    from gpudiag.render.printable import guard, printable

    typer.echo(printable(text) if one_line else guard(text), err=err, nl=nl)


def fail(message: str, code: ExitCode) -> None:
    """Print one line on stderr and exit with ``code``."""
    from gpudiag.render.printable import printable

    edge.say(printable(message))
    raise typer.Exit(int(code))


def require_nvml(info: NvmlInfo) -> None:
    """The rule for NVML that did not start, in every command that needs it: its detail in one
    line, and nvidia-smi's exit code for it (see gpudiag.exitcodes.NVML_EXIT)."""
    if info.status is not NvmlStatus.OK:
        raise GpudiagError(info.detail, NVML_EXIT[info.status])


def exit_if_lost(gpus: Iterable[Gpu]) -> None:
    """The rule for a lost GPU in every command that shows GPUs: the data is already on stdout,
    one line on stderr names the lost GPU(s), exit 15. (`check` reports it as a failing check.)"""
    lost = [g for g in gpus if g.state is GpuState.LOST]
    if not lost:
        return
    said = "; ".join(f"GPU {g.index}: {g.state_detail or 'GPU is lost'}" for g in lost)
    fail(f"{said} (the other GPUs are shown)", ExitCode.GPU_LOST)


def handle_errors(fn: F) -> F:
    """Turn expected faults into one line + exit code, signals into 128+N, bugs into a short report."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with edge.CommandSignals():
                return _run(*args, **kwargs)
        finally:  # after the handlers are back: a signal from here on ends the process at once
            _end_if_signalled()

    def _run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BaseException as exc:
            if edge.received() is not None:
                return None  # what the signal caused is no finding: the wrapper ends with 128+N
            _report(exc)
        return None

    return wrapper  # type: ignore[return-value]


def _end_if_signalled() -> None:
    """A signal that arrived while the command ran decides the exit code, whatever the command made
    of its exception: Python 3.11 wraps it in a RuntimeError when it lands in a class body's
    ``__set_name__``, and a library may swallow it. A signal is never success."""
    signum = edge.received()
    if signum is not None:
        edge.clean_up()
        raise typer.Exit(edge.SIGNAL_BASE + signum) from None


def _report(exc: BaseException) -> None:
    """An exception out of a command with no signal behind it: one line and its exit code."""
    if isinstance(exc, GpudiagError):
        fail(exc.message, exc.code)
    if isinstance(exc, KeyboardInterrupt):  # Python's own SIGINT (handlers not ours: not the main thread)
        edge.clean_up()
        raise typer.Exit(edge.exit_code(exc)) from None
    if isinstance(exc, BrokenPipeError):
        # Reader went away (`| head`): silence the rest, exit cleanly.
        edge.stdout_to_devnull()
        raise typer.Exit(int(ExitCode.OK)) from None
    if isinstance(exc, OSError) and exc.errno in edge.WRITE_ERRORS:
        # disk full, I/O error: the machine's fault, not a bug
        edge.stdout_to_devnull()
        fail(edge.write_error(exc), ExitCode.OUTPUT_ERROR)
    if not isinstance(exc, Exception):  # GeneratorExit and the like: not ours to report
        raise exc
    _internal(exc)


def _internal(exc: BaseException) -> None:
    """A bug: one line, exit 70; the traceback only with --debug."""
    debug = bool(os.environ.get(DEBUG_ENV))
    if debug:
        traceback.print_exception(exc)
    hint = "" if debug else " (run with --debug for the traceback)"
    fail(f"internal error: {type(exc).__name__}: {exc}{hint}", ExitCode.INTERNAL)
