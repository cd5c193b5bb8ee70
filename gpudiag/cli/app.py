"""The Typer application: global options and command registration.

`run` registers only the command being run, and command modules keep heavy imports
(torch, psutil) inside their functions: `gpudiag list` runs at its dependency-import floor.
Command modules do not use `from __future__ import annotations`: Typer reads each option from
the annotations, and string annotations are compiled and evaluated at every start (3-4 ms a
command), where evaluated ones come from the cached bytecode.
"""

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from gpudiag import __version__, argv
from gpudiag.argv import CommandLine
from gpudiag.cli import terminal_env
from gpudiag.cli.common import Settings
from gpudiag.errors import DEBUG_ENV


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpudiag {__version__}")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    replay: Annotated[
        str | None,
        typer.Option(
            "--replay",
            envvar="GPUDIAG_REPLAY",
            help="Read a recorded snapshot file or a shipped example machine (see `gpudiag examples`) "
            "instead of this machine.",
            metavar="NAME|FILE",
        ),
    ] = None,
    color: Annotated[
        str,
        typer.Option("--color", help="Colour output: auto (TTY and no NO_COLOR), always, never."),
    ] = "auto",
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for internal errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    if color not in ("auto", "always", "never"):
        raise typer.BadParameter("use auto, always or never", param_hint="--color")
    if debug:
        os.environ[DEBUG_ENV] = "1"
    ctx.obj = Settings(replay=replay or None, debug=debug, color=color)


# Command name -> (module in gpudiag.cli, function). Modules keep heavy imports inside
# their functions; `run` imports only the module of the command being run.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("list_cmd", "list_command"),
    "check": ("check_cmd", "command"),
    "memory": ("memory_cmd", "command"),
    "visible": ("visible_cmd", "command"),
    "bench-transfer": ("bench_cmd", "command"),
    "snapshot": ("snapshot_cmd", "snapshot_command"),
    "examples": ("examples_cmd", "examples_command"),
    "exporter": ("exporter_cmd", "command"),
    "report": ("report_cmd", "command"),
    "drain": ("drain_cmd", "command"),
    # The views nvidia-smi and nvitop users reach for (docs/commands/nvidia-smi.md maps them).
    "dmon": ("dmon_cmd", "command"),
    "pmon": ("pmon_cmd", "command"),
    "topo": ("topo_cmd", "command"),
    "nvlink": ("nvlink_cmd", "command"),
    "mig": ("mig_cmd", "command"),
    "stat": ("stat_cmd", "command"),
    "top": ("top_cmd", "command"),  # the interactive monitor (nvitop's), on Textual: the [top] extra
}


class _Group(TyperGroup):
    """The root command: sane terminal sizes, and click's usage errors (which quote the command line,
    perhaps a value a script took from a node file) printable, since typer prints them through a
    console of its own."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Before typer or rich read them: `--help` and usage errors print through consoles of their own.
        terminal_env.sanitize(os.environ)
        terminal_env.never_unencodable(sys.stdout, sys.stderr)
        return super().main(*args, **kwargs)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _printable_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _printable_errors():  # the command's own options are parsed in here
            return super().invoke(ctx)


@contextlib.contextmanager
def _printable_errors() -> Iterator[None]:
    from gpudiag.render.printable import printable

    # click's base error, whether typer vendors click (0.28) or depends on it
    click_error: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    try:
        yield
    except click_error as exc:
        message = exc.format_message  # type: ignore[attr-defined]
        exc.format_message = lambda: printable(message())  # type: ignore[attr-defined]
        raise


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer app with every command, or with just ``only`` (start-up cost of one)."""
    app = typer.Typer(
        name="gpudiag",
        cls=_Group,
        help="GPU diagnostics: what is on each GPU, is the stack ready, where did the memory go.",
        no_args_is_help=True,
        add_completion=False,  # static scripts ship in completions/ (see gpudiag.completions)
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(root)
    for name, (module_name, function) in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"gpudiag.cli.{module_name}")
        app.command(name)(getattr(module, function))
    return app


def __getattr__(name: str) -> typer.Typer:
    # `from gpudiag.cli.app import app` (tests, completions) gets the full app, built once.
    if name == "app":
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(name)


def run(line: CommandLine) -> None:
    """Run the command line read by gpudiag.entry (see gpudiag.argv), loading only its command."""
    build_app(only=line.command)(args=line.args, prog_name="gpudiag")


def main() -> None:
    run(argv.read(sys.argv[1:]))
