"""What every command shares: settings from the global options, consoles, the error edge."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, TypeVar

import msgspec
import typer

from gpudiag import edge
from gpudiag.cli import plain, terminal_env
from gpudiag.cli.plain import Settings as Settings  # re-exported: the commands take both from here
from gpudiag.cli.plain import require_nvml as require_nvml
from gpudiag.errors import DEBUG_ENV
from gpudiag.exitcodes import ExitCode
from gpudiag.model import Gpu
from gpudiag.probe.collect import REPLAY_ENV

F = TypeVar("F", bound=Callable[..., Any])


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


def exit_if_lost(gpus: Iterable[Gpu]) -> None:
    """The rule for a lost GPU in every command that shows GPUs: the data is already on stdout,
    one line on stderr names the lost GPU(s), exit 15. (`check` reports it as a failing check.)"""
    line = plain.lost_line(gpus)
    if line is not None:
        fail(line, ExitCode.GPU_LOST)


def handle_errors(fn: F) -> F:
    """Turn expected faults into one line + exit code, signals into 128+N, bugs into a short report
    (cli.plain's rule, which the commands that run without typer share)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return plain.guarded(fn, args, kwargs, typer.Exit, passes=(typer.Exit, typer.Abort, SystemExit))

    return wrapper  # type: ignore[return-value]
