"""What `gpudiag top` was asked for, and whether it can run here: the refresh interval checked, the
`[top]` extra present, a terminal to draw on. Every usage error is raised here, before the machine
is read.

The command hands over its options as a :class:`Request` (``cli.common.request_of``); :func:`prepare`
parses them once into the :class:`Top` to run.
"""

from __future__ import annotations

import msgspec

from gpudiag.api import MIN_INTERVAL  # every watch's floor
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.units import seconds

INSTALL_HINT = "gpudiag top needs Textual: pip install 'gpudiag[top]'"


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag top`, as given (see the command for what each one means)."""

    interval: float = 2.0


class Top(msgspec.Struct, frozen=True):
    interval: float  # seconds between refreshes


def prepare(r: Request, terminal: bool) -> Top:
    """The monitor ``r`` asks for, or why it cannot run: a usage error, or Textual missing (exit 1).
    ``terminal``: stdin and stdout are both a terminal."""
    seconds(r.interval, "--interval", at_least=MIN_INTERVAL)
    try:
        import textual  # noqa: F401  (the extra's presence, before anything is read)
    except ImportError:
        raise GpudiagError(INSTALL_HINT, ExitCode.FAILED) from None
    if not terminal:
        raise UsageError(
            "gpudiag top is interactive and needs a terminal; into a pipe use `gpudiag list --watch` or `gpudiag dmon`"
        )
    return Top(r.interval)
