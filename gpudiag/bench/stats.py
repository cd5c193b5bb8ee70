"""Figures from timed samples: median, min/max and spread, in bytes per second.

GB/s is 1e9 B/s (nvbandwidth's and PCIe's unit); GiB/s (2^30 B/s) on request.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

GB = 1e9
GiB = float(1 << 30)


@dataclass(frozen=True)
class Bandwidth:
    median: float  # bytes per second
    minimum: float
    maximum: float
    rates: tuple[float, ...]  # one per sample, in the order taken

    @property
    def samples(self) -> int:
        return len(self.rates)

    @property
    def spread_percent(self) -> float:
        """(max - min) / median: how much the samples disagree."""
        return 100.0 * (self.maximum - self.minimum) / self.median if self.median else 0.0


def bandwidth(counted_bytes: int, seconds_per_copy: Sequence[float]) -> Bandwidth:
    """Each sample's seconds per copy -> bytes per second. A zero or negative time is an
    error (a clock too coarse for the size), never an infinite figure."""
    if not seconds_per_copy:
        raise ValueError("no samples")
    if any(not t > 0 for t in seconds_per_copy):
        raise ValueError(f"non-positive time in samples: {list(seconds_per_copy)}")
    rates = tuple(counted_bytes / t for t in seconds_per_copy)
    return Bandwidth(statistics.median(rates), min(rates), max(rates), rates)


def saturation_size(points: Sequence[tuple[int, float]], share: float = 0.9) -> int | None:
    """The smallest size whose rate reaches ``share`` of the peak: where the bandwidth-vs-size
    curve saturates. None without points."""
    if not points:
        return None
    peak = max(rate for _, rate in points)
    return min(size for size, rate in points if rate >= share * peak)
