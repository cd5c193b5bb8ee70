"""Memory per training step, recorded by ``gpudiag.track.step()`` in the training loop.

A step's end is where memory that outlives the step shows: what is allocated then and was not
one step earlier is a leak (a loss kept with its graph, a list that grows). ``step()`` reads the
allocator there (``torch.cuda.memory_stats``, no synchronisation) at most every ``MIN_GAP_S``,
so a loop of 1 ms steps pays for one read in 50; the step count is exact regardless.

With ``reset_peak`` the allocator's peak is reset after each read, so each record's peak is the
peak of the steps since the previous one; without it (the default) the peak is the run's, as the
program's own ``torch.cuda.max_memory_allocated()`` sees it, and is left alone.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

RECORDS = 64  # kept and published: enough for a trend, small enough for a 2 s publication
MIN_GAP_S = 0.05


class StepLog:
    def __init__(self, records: int = RECORDS, min_gap_s: float = MIN_GAP_S) -> None:
        self.count = 0
        self.first_at: float | None = None
        self.reset_peak = False
        self.min_gap_s = min_gap_s
        # (step, wall time, ((torch_index, allocated, reserved, peak_allocated), ...))
        self.records: deque[tuple[int, float, tuple[tuple[int, int, int, int], ...]]] = deque(maxlen=records)
        self.devices: tuple[int, ...] = ()  # the devices the program allocated on (set by the publisher)
        self._last_read = -1e9
        self._lock = threading.Lock()

    def step(self, torch: Any, number: int | None = None, clock: Any = time) -> None:
        """One training step ended (``number``: the trainer's own count, e.g. HF's global_step)."""
        now = clock.monotonic()
        with self._lock:
            self.count = number if number is not None else self.count + 1
            if self.first_at is None:
                self.first_at = clock.time()
            if now - self._last_read < self.min_gap_s:
                return
            self._last_read = now
        figures = self._read(torch)
        if figures is not None:
            self.records.append((self.count, clock.time(), figures))

    def _read(self, torch: Any) -> tuple[tuple[int, int, int, int], ...] | None:
        cuda = getattr(torch, "cuda", None) if torch is not None else None
        if cuda is None or not cuda.is_initialized():
            return None
        devices = self.devices or (cuda.current_device(),)
        out = []
        for index in devices:
            stats = cuda.memory_stats(index)
            out.append(
                (
                    index,
                    int(stats.get("allocated_bytes.all.current", 0)),
                    int(stats.get("reserved_bytes.all.current", 0)),
                    int(stats.get("allocated_bytes.all.peak", 0)),
                )
            )
            if self.reset_peak:
                cuda.reset_peak_memory_stats(index)
        return tuple(out)

    def published(self) -> dict[str, Any] | None:
        """What the entry carries: the count, when stepping began, and the recent records."""
        if self.first_at is None:
            return None
        return {
            "count": self.count,
            "first_at": self.first_at,
            "peaks": "per_record" if self.reset_peak else "running",
            "records": [[step, at, *row] for step, at, rows in list(self.records) for row in rows],
        }
