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
import os
import sys
from types import FrameType

INTERRUPTED = 130  # ExitCode.INTERRUPTED; not imported from there, to keep this module light
USAGE = 2  # ExitCode.USAGE


def exit_at_once(_signum: int, _frame: FrameType | None) -> None:
    """SIGINT handler outside a command: nothing to clean up, so end quietly now."""
    os._exit(INTERRUPTED)


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
        from gpudiag.cli.app import main as run

        run()
    except KeyboardInterrupt:  # belt and braces: one that escaped a command's own handling
        os._exit(INTERRUPTED)
    finally:
        _flush_quietly()


def _flush_quietly() -> None:
    """Flush stdout now, so that a reader that went away (`| head`) cannot make the
    interpreter print "Exception ignored … BrokenPipeError" at exit."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
