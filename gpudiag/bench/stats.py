"""Figures from timed samples: median, min/max and spread, in GB/s (1e9 B/s) or GiB/s."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Bandwidth:
    median: float  # bytes per second
    minimum: float
    maximum: float
    samples: int

    @property
    def spread_percent(self) -> float:
        """(max - min) / median: how much the samples disagree."""
        return 100.0 * (self.maximum - self.minimum) / self.median if self.median else 0.0

    def scaled(self, unit: float) -> tuple[float, float, float]:
        return self.median / unit, self.minimum / unit, self.maximum / unit


GB = 1e9
GiB = float(1 << 30)


def bandwidth(nbytes: int, seconds_per_copy: list[float]) -> Bandwidth:
    """Each sample's seconds per copy -> bytes per second; a zero or negative time is rejected."""
    if not seconds_per_copy:
        raise ValueError("no samples")
    if any(t <= 0 for t in seconds_per_copy):
        raise ValueError(f"non-positive time in samples: {seconds_per_copy}")
    rates = [nbytes / t for t in seconds_per_copy]
    return Bandwidth(statistics.median(rates), min(rates), max(rates), len(rates))
