"""`gpudiag list`'s machine-readable outputs without typer or rich: read from argv, run, exit.

Scripts, Prolog/Epilog hooks and monitoring loops call `list --query … --format csv`, `--json`,
`-q -x` and `-L` the way they call nvidia-smi, once a second on thousands of nodes; importing
the CLI framework costs more than the rest of such a run. :mod:`gpudiag.entry` hands the command
line here first. Only a line this module reads for certain is run here, through the same
Request, View and error rule as the Typer command (cli.list_modes, cli.plain), so the bytes and
the exit code are the same; anything else (``--help``, a table, ``--watch``, an option written
in a form click reads differently, any usage error click would report) returns None and Typer
takes the line as before. A test holds the option table equal to the Typer command's.
"""

from __future__ import annotations

import gc
import os
import sys

from gpudiag import argv

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: this module is read before much is loaded
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpudiag.cli.plain import Settings

# list's options that run here: option -> (Request field, whether it takes a value).
OPTIONS: dict[str, tuple[str, bool]] = {
    "--json": ("json_output", False),
    "--id": ("ids", True),
    "-i": ("ids", True),
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
}
# Fields that make the output machine-readable or plain text (one of them, or Typer runs the table).
PLAIN_MODES = (
    "json_output",
    "details",
    "list_gpus",
    "query",
    "query_apps",
    "query_retired",
    "query_remapped",
    "query_clocks",
)
COLORS = ("auto", "always", "never")
COMPLETE_ENV = "_GPUDIAG_COMPLETE"  # click's shell completion request: Typer's


class Line:
    """A `list` command line read here: the global options' values and list's options."""

    __slots__ = ("debug", "options", "replay")

    def __init__(self, replay: str | None, debug: bool, options: dict[str, object]) -> None:
        self.replay = replay
        self.debug = debug
        self.options = options


def read(line: argv.CommandLine, environ: Mapping[str, str]) -> Line | None:
    """The command line, when it is a plain `list` this module runs; None for Typer."""
    if line.command != "list" or environ.get(COMPLETE_ENV) is not None:
        return None
    args = line.args
    at = argv.command_position(args)  # argv.read put the global options before the command
    if at is None:
        return None
    found = _globals(args[:at])
    if found is None:
        return None
    replay, debug = found
    options = _options(args[at + 1 :])
    if options is None or not any(options.get(field) for field in PLAIN_MODES):
        return None
    if replay is None:
        replay = environ.get("GPUDIAG_REPLAY") or None  # click: an empty variable is unset
    return Line(replay or None, debug, options)


def _globals(args: list[str]) -> tuple[str | None, bool] | None:
    """--replay, --color and --debug as click reads them (each once); anything else is Typer's."""
    replay: str | None = None
    debug = False
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
            elif value not in COLORS:
                return None  # Typer's error message
        else:
            return None
        i += 1
    return replay, debug


def _options(args: list[str]) -> dict[str, object] | None:
    """list's options, each written whole (``--id 3``, ``--id=3``, ``-i 3``; no ``-qx``, no ``-i3``),
    once; a value that looks like an option, or none, is left to click's own reading."""
    options: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        known = OPTIONS.get(name)
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


def run(found: Line) -> int:
    """Run the line as the Typer command would; its exit code."""
    # One answer, then the process ends: no cyclic garbage worth the collector's passes over every
    # module this run imports, nor its last pass at exit (~a tenth of a `list --query`'s CPU).
    gc.disable()
    try:
        return _run(found)
    finally:
        gc.freeze()  # what this run made, out of the collection at exit


def _run(found: Line) -> int:
    from gpudiag.cli import plain, terminal_env

    # What cli.app's group does before anything is read or printed.
    terminal_env.sanitize(os.environ)
    terminal_env.never_unencodable(sys.stdout, sys.stderr)
    if found.debug:
        from gpudiag.errors import DEBUG_ENV

        os.environ[DEBUG_ENV] = "1"
    settings = plain.Settings(replay=found.replay, debug=found.debug, color="auto")
    try:
        plain.guarded(_list, (settings, found.options), {}, SystemExit)
    except SystemExit as stop:
        return int(stop.code or 0)
    return 0


def _list(s: Settings, options: dict[str, object]) -> None:
    from gpudiag.api import read_machine
    from gpudiag.cli import plain
    from gpudiag.cli.list_modes import Request, check_nvml, selected, validate, view_for
    from gpudiag.exitcodes import ExitCode

    request = Request(**options)  # type: ignore[arg-type]
    validate(request)
    view = view_for(request)
    machine = read_machine(s.replay, facts=view.facts, only=view.only)  # the public API's read, as the command
    check_nvml(machine, view)
    gpus = selected(machine, request.ids, request.no_processes)
    view.show(machine, gpus, s, request.filename)
    line = plain.lost_line(gpus)
    if line is not None:
        plain.say(line)
        raise SystemExit(int(ExitCode.GPU_LOST))
