"""The one domain exception; the CLI edge turns it into a message and an exit code."""

from __future__ import annotations

from gpudiag.exitcodes import ExitCode

# Set by --debug: internal errors, and answers a reader could not decode, show their tracebacks on stderr.
DEBUG_ENV = "GPUDIAG_DEBUG"


class GpudiagError(Exception):
    """An expected fault: shown as one line on stderr, never as a traceback."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class UsageError(GpudiagError):
    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.USAGE)
