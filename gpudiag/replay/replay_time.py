"""Time for a replay's GPM reads, which passes at once."""

from __future__ import annotations

from collections.abc import Mapping


class ReplayTime:
    """Time for a replay's GPM reads: a wait between two samples passes at once (the recorded figures
    are the window's whatever it lasts), and a GPU whose snapshot records its window is sampled that
    window apart, so the replay reports the window the live read measured (0.100074 s, not the 0.1 s
    asked for); a GPU without one is sampled as the waits move the time."""

    def __init__(self, windows: Mapping[int, float] | None = None) -> None:
        self._now = 0.0
        self._windows = dict(windows or {})  # by position: each GPU's recorded window
        self._sampled: dict[int, float] = {}  # by position: the time of the GPU's latest sample
        self._last: int | None = None

    def sampled(self, gpu: int) -> None:
        """The fake took a GPM sample of GPU ``gpu`` (its position): the next ``now`` is its time."""
        window, previous = self._windows.get(gpu), self._sampled.get(gpu)
        self._sampled[gpu] = self._now if window is None or previous is None else previous + window
        self._last = gpu

    def now(self) -> float:
        return self._now if self._last is None else self._sampled[self._last]

    def sleep(self, seconds: float) -> None:
        self._now += seconds
