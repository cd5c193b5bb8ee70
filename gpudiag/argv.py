"""The command line, read once: which command, the global options wherever they were written, and
whether `check` may start its torch child before the CLI is imported.

:mod:`gpudiag.entry` reads it before typer and rich are loaded (standard library only, and little
of it); :mod:`gpudiag.cli.app` hands the same reading to Typer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: typing is not loaded yet, and need not be
if TYPE_CHECKING:
    from collections.abc import Mapping

# Every command; gpudiag.cli.app.COMMANDS maps these names to their modules (a test keeps them equal).
COMMANDS = (
    "list",
    "check",
    "memory",
    "visible",
    "bench-transfer",
    "snapshot",
    "examples",
    "exporter",
    "report",
    "drain",
    "dmon",
    "pmon",
    "topo",
    "nvlink",
    "mig",
    "stat",
    "top",
)
# Global options that take a value, so that their value is not read as a command name.
VALUE_OPTIONS = ("--replay", "--color")
# Global options that may also follow the command (`gpudiag list --debug`); no command has its own.
GLOBAL_FLAGS = ("--debug",)
REPLAY_ENV = "GPUDIAG_REPLAY"

# `check` options after which the torch child may not be wanted, or not from this interpreter:
# with any of them, `check` starts it itself once the options are parsed.
NOT_EARLY = ("--no-torch", "--python", "--only", "--mode", "--replay", "--help", "-h", "--version")


class CommandLine:
    """One reading of argv. (Not a NamedTuple: `typing` would load before the early torch start.)"""

    __slots__ = ("args", "command", "options")

    def __init__(self, args: list[str], command: str | None, options: frozenset[str]) -> None:
        self.args = args  # as Typer takes them: global options written after the command moved before it
        self.command = command  # the command named, when it is one of COMMANDS
        self.options = options  # every option's name (``--x=1`` counts as ``--x``), up to ``--``


def read(argv: list[str]) -> CommandLine:
    at = command_position(argv)
    options = frozenset(a.split("=", 1)[0] for a in _before_separator(argv) if a.startswith("-"))
    if at is None:
        return CommandLine(list(argv), None, options)
    command = argv[at] if argv[at] in COMMANDS else None
    if command is None:
        return CommandLine(list(argv), None, options)
    return CommandLine(_hoisted(argv, at), command, options)


def starts_torch_early(line: CommandLine, environ: Mapping[str, str]) -> bool:
    """A live `gpudiag check` that will start torch: start it now, not after typer, rich and the
    options (~0.15 s; `check --quick` otherwise pays it on top of torch's own start-up)."""
    if environ.get(REPLAY_ENV):
        return False
    return line.command == "check" and not line.options & set(NOT_EARLY)


def _before_separator(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")] if "--" in argv else argv


def command_position(argv: list[str]) -> int | None:
    """Where the command is: the first word that is not an option or a global option's value."""
    skip_next = False
    for position, arg in enumerate(argv):
        if skip_next:
            skip_next = False
        elif arg in VALUE_OPTIONS:
            skip_next = True
        elif not arg.startswith("-"):
            return position
    return None


def _hoisted(argv: list[str], at: int) -> list[str]:
    """Global options written after the command, moved before it, so `gpudiag list --debug` and
    `gpudiag list --replay NAME` mean what `gpudiag --debug list` does. Nothing after `--` moves."""
    tail = argv[at + 1 :]
    moved: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(tail):
        arg = tail[i]
        if arg == "--":
            kept += tail[i:]
            break
        name = arg.split("=", 1)[0]
        if arg in GLOBAL_FLAGS or (name in VALUE_OPTIONS and "=" in arg):
            moved.append(arg)
        elif arg in VALUE_OPTIONS and i + 1 < len(tail):
            moved += [arg, tail[i + 1]]
            i += 1
        else:
            kept.append(arg)
        i += 1
    return [*argv[:at], *moved, argv[at], *kept]
