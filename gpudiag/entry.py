"""The console entry point: signals and standard streams are set up before any heavy import.

Importing typer and rich takes a noticeable fraction of a second; a signal in that window ends
the process at once with 128+N, and standard error that cannot be written is forgiven
(:mod:`gpudiag.edge`). A live `gpudiag check` starts its torch child here, before the CLI is
imported (:func:`gpudiag.argv.starts_torch_early`). Whatever ends the process, no child is left.

This module must stay free of imports beyond the standard library's cheapest.
"""

from __future__ import annotations

import gc
import os
import sys

from gpudiag import argv, edge

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: typing is not loaded yet, and need not be
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpudiag.cli.plain_front import Line


def starts_torch_early(args: list[str], environ: Mapping[str, str]) -> bool:
    """Whether this command line starts `check`'s torch child before the CLI (see gpudiag.argv)."""
    return argv.starts_torch_early(argv.read(args), environ)


def main() -> None:
    edge.install()
    edge.forgive_stderr()
    if not edge.stdout_usable():
        # Data goes to stdout; with it closed, every command would fail or silently say nothing.
        edge.say("standard output is closed; redirect it (e.g. >/dev/null) instead")
        os._exit(edge.USAGE)
    line = argv.read(sys.argv[1:])
    try:
        if argv.starts_torch_early(line, os.environ):
            from gpudiag.probe import torch_runtime

            torch_runtime.start_early()
        from gpudiag.cli import plain_front  # machine-readable outputs, without typer and rich

        found = plain_front.read(line, os.environ)
        if found is not None:
            raise SystemExit(_plain(found))
        from gpudiag.cli.app import run

        run(line)
    except KeyboardInterrupt as exc:  # belt and braces: one that escaped a command's own handling
        edge.clean_up()
        os._exit(edge.exit_code(exc))
    except OSError as exc:  # outside a command (`--help`, `--version` > /dev/full)
        if exc.errno not in edge.WRITE_ERRORS:
            raise
        edge.cannot_write(exc)
    finally:
        edge.clean_up()  # an early torch child that no command took (a usage error, --help)
        edge.flush_stdout()
        edge.answered()


def _plain(found: Line) -> int:
    """A machine-readable output, without typer and rich. One answer, then the process ends: no cyclic
    garbage is worth the collector's passes over every module the run imports, nor its last pass at
    exit, which walks them all (a fifth of `list --query`'s CPU: docs/performance.md). A run of samples
    (dmon, pmon -c N) keeps the collector. Decided here, where the process ends, not in the front that
    tests run in-process."""
    from gpudiag.cli import plain_front

    if found.front.once:
        gc.disable()
    try:
        return plain_front.run(found)
    finally:
        gc.freeze()  # what the run made, out of the collection at exit
