"""How NVML's failures and unexpected answers become readings: an init failure explained, a lost GPU,
an answer its decoder does not take (that reading's error, never the command's)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from gpudiag.errors import DEBUG_ENV
from gpudiag.model import NvmlInfo, NvmlStatus, Reading, Reason


class GpuLostError(Exception):
    """Raised inside a GPU read when NVML reports the GPU lost; ends that GPU's read."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def undecodable(function: str, exc: BaseException) -> Reading[Any]:
    """An answer its reader did not expect (another type, a value out of range, bytes that are not
    UTF-8): that reading's error, with the reason; the traceback on stderr under ``--debug``."""
    if os.environ.get(DEBUG_ENV):
        import traceback  # only under --debug: ~3 ms of every start otherwise

        traceback.print_exception(exc, file=sys.stderr)
    why = f"{type(exc).__name__}: {exc}"
    return Reading.missing(Reason.UNKNOWN_ERROR, f"{function}: unexpected answer ({why[:200]})")


def decoded(function: str, raw: Any, decode: Callable[[Any], Any] | None = None) -> Reading[Any]:
    """``function``'s answer ``raw`` decoded, under the guard every NVML answer is decoded in: a
    decoder that fails on it, or an empty answer, is the reading's error, never the command's."""
    try:
        value = raw if decode is None else decode(raw)
    except Exception as exc:  # whatever the answer, this reading alone is lost
        return undecodable(function, exc)
    if value is None:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"{function}: unexpected answer (None)")
    return Reading(value=value)


def init_status(lib: Any, exc: Exception) -> tuple[NvmlStatus, str]:
    """Turn an nvmlInit failure into a status and a one-line, actionable explanation."""
    if isinstance(exc, lib.NVMLError_LibraryNotFound):
        return NvmlStatus.LIBRARY_NOT_FOUND, (
            "NVML library (libnvidia-ml.so.1) not found: the NVIDIA driver is not installed, "
            "or this container was started without the NVIDIA runtime"
        )
    if isinstance(exc, lib.NVMLError_DriverNotLoaded):
        return NvmlStatus.DRIVER_NOT_LOADED, (
            "NVIDIA driver not loaded: no GPU kernel module is running (is this a GPU machine? "
            "check `lsmod | grep nvidia`)"
        )
    if isinstance(exc, lib.NVMLError_LibRmVersionMismatch):
        return NvmlStatus.VERSION_MISMATCH, (
            "NVIDIA driver/library version mismatch: the driver was upgraded but the old kernel "
            "module is still loaded; reboot, or unload and reload the nvidia modules"
        )
    if isinstance(exc, lib.NVMLError_NoPermission):
        return NvmlStatus.NO_PERMISSION, (
            "no permission to open the NVIDIA devices (/dev/nvidia*): add this user to the "
            "group that owns them, or run inside the job's cgroup"
        )
    return NvmlStatus.ERROR, f"NVML failed to initialise: {exc}"


def unusable(status: NvmlStatus, detail: str, kernel_module_version: Reading[str]) -> NvmlInfo:
    """NVML state when it cannot be used at all: every system reading says why."""
    missing: Reading[str] = Reading.missing(Reason.UNAVAILABLE, detail)
    return NvmlInfo(
        status=status,
        detail=detail,
        driver_version=missing,
        nvml_version=missing,
        cuda_driver_version=Reading.missing(Reason.UNAVAILABLE, detail),
        kernel_module_version=kernel_module_version,
        process_query_api="",
        functions_missing=(),
    )
