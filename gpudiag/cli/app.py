"""The Typer application: global options and command registration.

Command modules are imported here, so they must keep heavy imports (torch, psutil)
inside their functions: `gpudiag list` runs at its dependency-import floor.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from gpudiag import __version__
from gpudiag.cli.common import DEBUG_ENV, Settings

app = typer.Typer(
    name="gpudiag",
    help="GPU diagnostics: what is on each GPU, is the stack ready, where did the memory go.",
    no_args_is_help=True,
    add_completion=False,  # static scripts ship in completions/ (see gpudiag.completions)
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpudiag {__version__}")
        raise typer.Exit()


@app.callback()
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


def _register() -> None:
    from gpudiag.cli import examples_cmd, list_cmd, snapshot_cmd

    app.command("list")(list_cmd.list_command)
    app.command("snapshot")(snapshot_cmd.snapshot_command)
    app.command("examples")(examples_cmd.examples_command)
    for module_name, command_name in _LATER_COMMANDS:
        try:
            module = __import__(f"gpudiag.cli.{module_name}", fromlist=["command"])
        except ModuleNotFoundError as exc:
            if exc.name != f"gpudiag.cli.{module_name}":
                raise
            continue
        app.command(command_name)(module.command)


# Commands built in their own modules; each module exposes `command`.
_LATER_COMMANDS = (
    ("check_cmd", "check"),
    ("memory_cmd", "memory"),
    ("bench_cmd", "bench-transfer"),
    ("visible_cmd", "visible"),
)

_register()


def main() -> None:
    app(prog_name="gpudiag")
