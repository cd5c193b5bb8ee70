"""What every part of the fake NVML answers with: its device handles, NVML's error for a recorded
reading's reason, and a recorded reading's value (or that error).

Shared by the fake module (``fake_nvml``) and the call families it loads on first use (``fake_details``,
``fake_mig``), which are handed the fake's call entry and GPU lookup rather than the fake itself.
"""

from __future__ import annotations

from typing import Any, NoReturn

import msgspec
import pynvml

from gpudiag.model import Reading, Reason


class FakeHandle(msgspec.Struct, frozen=True):
    gpu: int
    mig_slot: int | None = None


REASON_ERRORS = {
    Reason.NOT_SUPPORTED: pynvml.NVML_ERROR_NOT_SUPPORTED,
    Reason.NO_PERMISSION: pynvml.NVML_ERROR_NO_PERMISSION,
    Reason.GPU_LOST: pynvml.NVML_ERROR_GPU_IS_LOST,
    Reason.FUNCTION_NOT_FOUND: pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    Reason.NOT_FOUND: pynvml.NVML_ERROR_NOT_FOUND,
    Reason.UNAVAILABLE: pynvml.NVML_ERROR_UNKNOWN,
    Reason.UNKNOWN_ERROR: pynvml.NVML_ERROR_UNKNOWN,
    Reason.NOT_READ: pynvml.NVML_ERROR_UNKNOWN,  # a hand-made file that records no answer
    Reason.NOT_RECORDED: pynvml.NVML_ERROR_UNKNOWN,  # raised as NotRecordedError, which says so
}


class NotRecordedError(pynvml.NVMLError_Unknown):  # type: ignore[misc]
    """What the fake raises for a reading the replayed snapshot does not hold: NVML's "unknown
    error" to its consumers (gpustat, nvitop), and ``gpudiag_reason`` tells gpudiag's probe that
    the snapshot, not the GPU, lacks it."""

    gpudiag_reason = Reason.NOT_RECORDED.value


def fail(code: int) -> NoReturn:
    """Raise NVML's error for ``code``, as nvidia-ml-py does."""
    raise pynvml.NVMLError(code)


def recorded(reading: Reading[Any]) -> Any:
    """The recorded value, or the error NVML gave (NotRecordedError where the file holds none)."""
    if reading.reason is None:
        return reading.value
    if reading.reason is Reason.NOT_RECORDED or reading.reason is Reason.NOT_READ:  # the file does not hold it
        raise NotRecordedError()
    code = REASON_ERRORS[reading.reason]
    if reading.reason is Reason.UNAVAILABLE and reading.detail.endswith(": not ready"):
        code = pynvml.NVML_ERROR_NOT_READY  # as the probe read it (the InfoROM BBX not flushed yet)
    exc = pynvml.NVMLError(code)
    if reading.reason in (Reason.UNAVAILABLE, Reason.UNKNOWN_ERROR) and reading.detail:
        # What the recording said, for gpudiag's probe (NVML's unknown error to other readers).
        exc.gpudiag_reason, exc.gpudiag_detail = reading.reason.value, reading.detail
    raise exc
