"""The fake's critical Xid events (``nvmlEventTypeXidCriticalError``): event sets, the GPUs registered
on each, and the Xids a test or a replay injects, waited for without blocking."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pynvml

from gpudiag.replay.fake_answers import FakeHandle, fail

if TYPE_CHECKING:
    from gpudiag.model import Gpu


class EventSet:
    """An NVML event set: the GPUs registered, and the events not yet waited for."""

    def __init__(self) -> None:
        self.gpus: set[int] = set()
        self.pending: deque[tuple[int, int]] = deque()


class FakeXidEvents:
    """The event calls of :class:`~gpudiag.replay.fake_nvml.FakeNvml`, which holds the event sets."""

    _event_sets: list[EventSet]

    if TYPE_CHECKING:

        def _enter(self, name: str) -> None: ...

        def _full_gpu(self, handle: FakeHandle, mig_error: int = ...) -> Gpu: ...

    def inject_xid(self, gpu: int, xid: int) -> None:
        """Make GPU ``gpu`` (its position) report critical Xid ``xid`` to every event set watching it."""
        for watched in self._event_sets:
            if gpu in watched.gpus:
                watched.pending.append((gpu, xid))

    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        event_set = EventSet()
        self._event_sets.append(event_set)
        return event_set

    def nvmlDeviceRegisterEvents(self, handle: FakeHandle, event_types: int, event_set: Any) -> None:
        self._enter("nvmlDeviceRegisterEvents")
        self._full_gpu(handle)
        if event_types & pynvml.nvmlEventTypeXidCriticalError:
            event_set.gpus.add(handle.gpu)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> Any:
        self._enter("nvmlEventSetWait_v2")
        if not event_set.pending:
            fail(pynvml.NVML_ERROR_TIMEOUT)  # the fake never blocks: no event came in time
        gpu, xid = event_set.pending.popleft()
        return SimpleNamespace(device=FakeHandle(gpu), eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._enter("nvmlEventSetFree")
        if event_set in self._event_sets:
            self._event_sets.remove(event_set)
