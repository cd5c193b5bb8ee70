"""The console entry point: sets up interrupts and standard output before any heavy import.

Importing typer and rich takes a noticeable fraction of a second. A Ctrl-C in that window
used to print a KeyboardInterrupt traceback, and one during option parsing click's
"Aborted!" with exit 1. Until a command starts, nothing needs cleaning up, so an interrupt
ends the process at once with 130; the command wrapper (``cli.common.handle_errors``)
turns interrupts back into KeyboardInterrupt while a command runs, so that watches restore
the terminal and children are stopped, and then exits 130 as well.

This module must stay free of imports beyond the standard library's cheapest.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # C module: `signal` imports enum first (slower)
import errno
import os
import sys
from types import FrameType

INTERRUPTED = 130  # ExitCode.INTERRUPTED; not imported from there, to keep this module light
USAGE = 2  # ExitCode.USAGE
OUTPUT_ERROR = 74  # ExitCode.OUTPUT_ERROR
# Errors of writing output that are the machine's, not gpudiag's: disk full, quota, file too big, I/O.
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})

# `check` options after which the torch child may not be wanted, or not from this interpreter:
# with any of them, `check` starts it itself once the options are parsed.
_NOT_EARLY = ("--no-torch", "--python", "--only", "--mode", "--replay", "--help", "-h", "--version")
_early_started = False  # a torch child was started before the CLI (a command may have taken it)


def exit_at_once(_signum: int, _frame: FrameType | None) -> None:
    """SIGINT handler outside a command: nothing to clean up but an early torch child."""
    _kill_early()
    os._exit(INTERRUPTED)


def starts_torch_early(argv: list[str], environ: os._Environ[str] | dict[str, str]) -> bool:
    """A live `gpudiag check` that will start torch: start it now, not after typer, rich and
    the options (~0.15 s; `check --quick` otherwise pays it on top of torch's own start-up)."""
    if environ.get("GPUDIAG_REPLAY"):
        return False
    command, skip = None, False
    for arg in argv:  # the first word that is not an option or a global option's value
        if skip:
            skip = False
        elif arg in ("--color", "--replay"):
            skip = True
        elif not arg.startswith("-"):
            command = arg
            break
    if command != "check":
        return False
    return not any(a.split("=", 1)[0] in _NOT_EARLY for a in argv)


def _start_early() -> None:
    global _early_started
    from gpudiag.probe import torch_runtime

    torch_runtime.start_early()
    _early_started = True


def _kill_early() -> None:
    """Stop the early torch child if no command took it (a usage error, an interrupt): it runs
    in a session of its own, which a terminal's Ctrl-C does not reach."""
    if not _early_started:
        return
    from gpudiag.probe import torch_runtime

    running = torch_runtime.take_early()
    if running is not None:
        running.kill()


def _stdout_usable() -> bool:
    """False when the caller closed standard output (`>&-`): Python then has no sys.stdout."""
    if sys.stdout is None:
        return False
    try:
        os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return True


def _install() -> None:
    try:
        _signal.signal(_signal.SIGINT, exit_at_once)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        return


def main() -> None:
    _install()
    if not _stdout_usable():
        # Data goes to stdout; with it closed, every command would fail or silently say nothing.
        if sys.stderr is not None:
            sys.stderr.write("gpudiag: standard output is closed; redirect it (e.g. >/dev/null) instead\n")
        os._exit(USAGE)
    try:
        if starts_torch_early(sys.argv[1:], os.environ):
            _start_early()
        from gpudiag.cli.app import main as run

        run()
    except KeyboardInterrupt:  # belt and braces: one that escaped a command's own handling
        _kill_early()
        os._exit(INTERRUPTED)
    except OSError as exc:  # outside a command (`--help`, `--version` > /dev/full)
        if exc.errno not in WRITE_ERRORS:
            raise
        cannot_write(exc)
    finally:
        _kill_early()
        _flush_quietly()


def write_error(exc: OSError) -> str:
    """The one line for output that cannot be written."""
    return f"cannot write {exc.filename or 'standard output'}: {exc.strerror or exc}"


def cannot_write(exc: OSError) -> None:
    """Say why output could not be written, drop what is still buffered, exit 74."""
    stdout_to_devnull()
    if sys.stderr is not None:
        sys.stderr.write(f"gpudiag: {write_error(exc)}\n")
    raise SystemExit(OUTPUT_ERROR)


def stdout_to_devnull() -> None:
    """Point standard output at /dev/null: what is still buffered cannot be written anyway."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _flush_quietly() -> None:
    """Flush stdout now, so that a reader that went away (`| head`) cannot make the
    interpreter print "Exception ignored … BrokenPipeError" at exit."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        stdout_to_devnull()
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        cannot_write(exc)
