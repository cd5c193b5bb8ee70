"""NVML's critical Xid events on every GPU, collected from the moment the watch is made."""

from __future__ import annotations

import contextlib
from typing import Any


class XidWatch:
    """NVML's critical XID events (``nvmlEventTypeXidCriticalError``: the driver's Xid errors, as
    `dmesg` shows them) on every GPU, from the moment it is made: :meth:`poll` takes what came.

    ``missing`` names the GPUs that could not be watched and why (GeForce boards and old drivers
    answer NOT_SUPPORTED): events on them are not seen.
    """

    def __init__(self, lib: Any, handles: list[tuple[int, Any]]) -> None:
        self._lib = lib
        self._set: Any = None
        self.missing: list[str] = []
        self.watched: set[int] = set()  # the indices of the GPUs whose events are seen
        try:
            self._set = lib.nvmlEventSetCreate()
        except Exception as exc:  # NVML's error or the binding's: no GPU's events are seen
            self.missing = [f"every GPU ({exc})"]
            return
        for index, handle in handles:
            try:
                lib.nvmlDeviceRegisterEvents(handle, lib.nvmlEventTypeXidCriticalError, self._set)
            except Exception as exc:  # NVML's error or the binding's: this GPU's events are not seen
                self.missing.append(f"GPU {index} ({exc})")
                continue
            self.watched.add(index)

    def poll(self) -> list[tuple[int, int]]:
        """(GPU index, Xid) of every event since the last poll, without waiting."""
        lib, found = self._lib, list[tuple[int, int]]()
        if self._set is None:
            return found
        for _ in range(1000):  # a storm of events is read in the next poll
            try:
                data = lib.nvmlEventSetWait_v2(self._set, 0)
            except lib.NVMLError_Timeout:
                break
            except lib.NVMLError:
                break
            except Exception:  # a binding's failure: the next poll tries again
                break
            try:
                index = int(lib.nvmlDeviceGetIndex(data.device))
            except Exception:  # NVML's error or an unexpected answer: the GPU is not known
                index = -1
            try:
                found.append((index, int(data.eventData)))
            except Exception:  # an event that is not one (no Xid to report)
                continue
        return found

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(self._lib.NVMLError):
                self._lib.nvmlEventSetFree(self._set)
            self._set = None
