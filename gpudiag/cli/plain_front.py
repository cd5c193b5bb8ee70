"""The machine-readable outputs of the commands, without typer or rich: read from argv, run, exit.

Scripts, Prolog/Epilog hooks and monitoring loops call `list --query … --format csv`, `--json`,
`-q -x` and `-L` the way they call nvidia-smi, once a second on thousands of nodes; importing the
CLI framework costs more than the rest of such a run. :mod:`gpudiag.entry` asks :func:`read` first.
Each command here has a :class:`Front`: its option table, the fields that make a line
machine-readable, its Request (the Struct the Typer command builds with ``cli.common.request_of``)
and the function below both that runs it, so the bytes and the exit code are the same by
construction. Only a line read here for certain runs here; anything else (``--help``, a table, a
watch, an option written in a form click reads differently, any usage error click would report)
gives None and Typer takes the line. A test holds each table equal to its Typer command's options.

This module is read on every such line: standard library only, and little of it.
"""

from __future__ import annotations

import os
import sys

from gpudiag import argv

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module is read before much is loaded
if TYPE_CHECKING:
    from collections.abc import Mapping

COLORS = ("auto", "always", "never")
COMPLETE_ENV = "_GPUDIAG_COMPLETE"  # click's shell completion request: Typer's
# The option every command spells alike; each table names its own too.
JSON = {"--json": ("json_output", False)}
IDS = {"--id": ("ids", True), "-i": ("ids", True)}
# dmon's and pmon's, as nvidia-smi's (the file, -f, is click's to check: Typer's).
SAMPLING = {
    "--count": ("count", True),
    "-c": ("count", True),
    "--delay": ("delay", True),
    "-d": ("delay", True),
    "--options": ("options", True),
    "-o": ("options", True),
    "--format": ("output_format", True),
}


class Front:
    """One command's plain front. ``options``: option -> (Request field, whether it takes a value),
    every option of the command that may run here (the others, a watch's, are Typer's); ``modes``:
    the fields of which one must be set for the line to run here; ``request`` and ``run``:
    ``module:name`` of the Request Struct and of the function ``run(settings, request)`` that the
    Typer command calls too; ``numbers``: the fields click turns into a number (``int`` or
    ``float`` of the text, as click does; one that does not convert is click's usage error);
    ``needs``: fields that must all be given (a bounded count); ``once``: it answers once (not a
    run of samples), so it runs without the garbage collector (:mod:`gpudiag.entry`)."""

    __slots__ = ("modes", "needs", "numbers", "once", "options", "request", "run")

    def __init__(
        self,
        options: dict[str, tuple[str, bool]],
        modes: tuple[str, ...],
        request: str,
        run: str,
        numbers: dict[str, type[int] | type[float]] | None = None,
        needs: tuple[str, ...] = (),
        once: bool = True,
    ) -> None:
        self.options = options
        self.modes = modes
        self.request = request
        self.run = run
        self.numbers = numbers or {}
        self.needs = needs
        self.once = once


FRONTS: dict[str, Front] = {
    "list": Front(
        {
            **JSON,
            **IDS,
            "--no-processes": ("no_processes", False),
            "--details": ("details", False),
            "-q": ("details", False),
            "--display": ("display", True),
            "-d": ("display", True),
            "--xml-format": ("xml", False),
            "-x": ("xml", False),
            "--list-gpus": ("list_gpus", False),
            "-L": ("list_gpus", False),
            "--query": ("query", True),
            "--query-gpu": ("query", True),
            "--query-compute-apps": ("query_apps", True),
            "--query-retired-pages": ("query_retired", True),
            "--query-remapped-rows": ("query_remapped", True),
            "--query-supported-clocks": ("query_clocks", True),
            "--format": ("output_format", True),
            "--filename": ("filename", True),
            "-f": ("filename", True),
        },
        (
            "json_output",
            "details",
            "list_gpus",
            "query",
            "query_apps",
            "query_retired",
            "query_remapped",
            "query_clocks",
        ),
        "gpudiag.cli.list_modes:Request",
        "gpudiag.cli.list_modes:once",
    ),
    "memory": Front(
        {**JSON, **IDS},
        ("json_output",),
        "gpudiag.memory.request:Request",
        "gpudiag.cli.memory_once:run",
    ),
    "visible": Front(
        {
            **JSON,
            "--value": ("value", True),
            "--unset": ("unset", False),
            "--order": ("order", True),
            "--select": ("select", True),
        },
        ("json_output",),
        "gpudiag.visibility.request:Request",
        "gpudiag.cli.visible_run:run",
    ),
    "stat": Front(
        {
            **JSON,
            **IDS,
            "--show-cmd": ("show_cmd", False),
            "-c": ("show_cmd", False),
            "--show-pid": ("show_pid", False),
            "-p": ("show_pid", False),
            "--show-power": ("show_power", False),
            "-P": ("show_power", False),
            "--no-processes": ("no_processes", False),
        },
        ("json_output",),
        "gpudiag.cli.smi_requests:Stat",
        "gpudiag.cli.stat_watch:command",
    ),
    "topo": Front(
        {
            **JSON,
            "--matrix": ("matrix", False),
            "-m": ("matrix", False),
            "--p2pstatus": ("p2p", True),
            "-p2p": ("p2p", True),
        },
        ("json_output",),
        "gpudiag.cli.smi_requests:Topo",
        "gpudiag.cli.smi_runs:topo",
    ),
    "nvlink": Front(
        {
            **JSON,
            **IDS,
            "--status": ("status", False),
            "-s": ("status", False),
            "--errorcounters": ("errorcounters", False),
            "-e": ("errorcounters", False),
            "--getthroughput": ("getthroughput", True),
            "-gt": ("getthroughput", True),
        },
        ("json_output",),
        "gpudiag.cli.smi_requests:Nvlink",
        "gpudiag.cli.smi_runs:nvlink",
    ),
    "mig": Front(
        {
            **JSON,
            **IDS,
            "--list-gpu-instance-profiles": ("lgip", False),
            "-lgip": ("lgip", False),
            "--list-gpu-instances": ("lgi", False),
            "-lgi": ("lgi", False),
            "--list-compute-instances": ("lci", False),
            "-lci": ("lci", False),
        },
        ("json_output",),
        "gpudiag.cli.smi_requests:Mig",
        "gpudiag.cli.smi_runs:mig",
    ),
    # A bounded run (-c N) of JSON Lines or CSV; without -c they sample until Ctrl-C: Typer's.
    "dmon": Front(
        {**JSON, **IDS, **SAMPLING, "--select": ("select", True), "-s": ("select", True)},
        ("json_output", "output_format"),
        "gpudiag.cli.smi_requests:Dmon",
        "gpudiag.cli.monitor_runs:dmon",
        {"count": int, "delay": float},
        ("count",),
        once=False,
    ),
    "pmon": Front(
        {**JSON, **IDS, **SAMPLING, "--select": ("select", True), "-s": ("select", True)},
        ("json_output", "output_format"),
        "gpudiag.cli.smi_requests:Pmon",
        "gpudiag.cli.monitor_runs:pmon",
        {"count": int, "delay": float},
        ("count",),
        once=False,
    ),
}


class Line:
    """A command line read here: its front, the global options' values and the command's options."""

    __slots__ = ("color", "debug", "front", "options", "replay")

    def __init__(self, front: Front, replay: str | None, debug: bool, color: str, options: dict[str, object]) -> None:
        self.front = front
        self.replay = replay
        self.debug = debug
        self.color = color
        self.options = options


def read(line: argv.CommandLine, environ: Mapping[str, str]) -> Line | None:
    """The command line, when it is one this module runs; None for Typer."""
    front = FRONTS.get(line.command or "")
    if front is None or environ.get(COMPLETE_ENV) is not None:
        return None
    args = line.args
    at = argv.command_position(args)  # argv.read put the global options before the command
    if at is None:
        return None
    found = _globals(args[:at])
    if found is None:
        return None
    replay, debug, color = found
    options = _options(front.options, args[at + 1 :])
    if options is None or not any(options.get(field) for field in front.modes):
        return None
    if not all(field in options for field in front.needs) or not _numbers(front, options):
        return None
    if replay is None:
        replay = environ.get(argv.REPLAY_ENV) or None  # click: an empty variable is unset
    return Line(front, replay or None, debug, color, options)


def _globals(args: list[str]) -> tuple[str | None, bool, str] | None:
    """--replay, --color and --debug as click reads them (each once); anything else is Typer's."""
    replay: str | None = None
    debug = False
    color = "auto"
    seen: set[str] = set()
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in seen:
            return None
        seen.add(name)
        if name == "--debug" and not eq:
            debug = True
        elif name in ("--replay", "--color"):
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("-"):
                    return None
                i += 1
                value = args[i]
            if name == "--replay":
                replay = value
            elif value in COLORS:
                color = value
            else:
                return None  # Typer's error message
        else:
            return None
        i += 1
    return replay, debug, color


def _options(table: dict[str, tuple[str, bool]], args: list[str]) -> dict[str, object] | None:
    """The command's options, each written whole (``--id 3``, ``--id=3``, ``-i 3``; no ``-qx``, no
    ``-i3``), once; a value that looks like an option, or none, is left to click's own reading."""
    options: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        known = table.get(name)
        if known is None:
            return None
        field, takes_value = known
        if field in options:
            return None
        if not takes_value:
            if eq:
                return None
            options[field] = True
        else:
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("-"):
                    return None
                i += 1
                value = args[i]
            options[field] = value
        i += 1
    return options


def _numbers(front: Front, options: dict[str, object]) -> bool:
    """The numeric options converted in place as click converts them; False when one does not."""
    for field, kind in front.numbers.items():
        if field in options:
            try:
                options[field] = kind(str(options[field]))  # the text as written: click converts it so
            except ValueError:
                return False
    return True


def run(found: Line) -> int:
    """Run the line as the Typer command would; its exit code."""
    from gpudiag.cli import plain, terminal_env

    # What cli.app's group does before anything is read or printed.
    terminal_env.sanitize(os.environ)
    terminal_env.never_unencodable(sys.stdout, sys.stderr)
    if found.debug:
        from gpudiag.errors import DEBUG_ENV

        os.environ[DEBUG_ENV] = "1"
    settings = plain.Settings(replay=found.replay, debug=found.debug, color=found.color)
    try:
        plain.guarded(_run, (found.front, settings, found.options), {}, SystemExit)
    except SystemExit as stop:
        return int(stop.code or 0)
    return 0


def named(where: str) -> object:
    """The object ``module:name`` names, imported now."""
    module, _, name = where.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


def _run(front: Front, settings: object, options: dict[str, object]) -> None:
    request = named(front.request)(**options)  # type: ignore[operator]
    named(front.run)(settings, request)  # type: ignore[operator]
