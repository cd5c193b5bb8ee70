"""Outliers against the fleet's own median: a robust rule that a few broken nodes cannot move.

Rule: a node is an outlier for a figure when it lies more than ``K`` scaled MADs from the fleet's
median, in the direction that hurts (low bandwidth or TFLOP/s, high temperature or error
counts), AND more than the figure's own floor away (so that a fleet of identical nodes, whose
MAD is ~0, does not flag measurement noise). MAD is scaled by 1.4826 so that it estimates the
standard deviation of normal data; K = 3.5 is Iglewicz and Hoaglin's cut-off for the modified z-score.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

K = 3.5
MAD_SCALE = 1.4826
MIN_NODES = 3  # fewer nodes than this have no "fleet" to compare against


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str
    high_is_bad: bool
    floor: float  # the least distance from the median that counts
    relative: bool  # floor is a fraction of the median instead of an absolute amount


FIGURES = (
    Figure("h2d_gbps", "H2D bandwidth", "GB/s", False, 0.10, True),
    Figure("d2h_gbps", "D2H bandwidth", "GB/s", False, 0.10, True),
    Figure("d2d_gbps", "D2D bandwidth", "GB/s", False, 0.10, True),
    Figure("matmul_tflops", "matmul", "TFLOP/s", False, 0.10, True),
    Figure("temperature_c", "temperature", "°C", True, 5.0, False),
    Figure("ecc_uncorrected", "ECC uncorrected errors", "", True, 0.5, False),
    Figure("ecc_corrected", "ECC corrected errors", "", True, 0.5, False),
    Figure("remapped_rows", "remapped rows", "", True, 0.5, False),
    Figure("retired_pages", "retired pages", "", True, 0.5, False),
)

RULE = (
    f"beyond median ± {K} × {MAD_SCALE} × MAD on the bad side, and by at least 10 % (rates), "
    f"5 °C or 1 (counts); fleets of {MIN_NODES}+ nodes"
)


@dataclass(frozen=True)
class Outlier:
    figure: Figure
    host: str
    value: float
    median: float
    mad: float  # scaled


def find(values: dict[str, dict[str, float]]) -> tuple[list[Outlier], dict[str, tuple[float, float, int]]]:
    """Outliers per figure, and per figure (median, scaled MAD, nodes) of ``values[host][figure]``."""
    found: list[Outlier] = []
    stats: dict[str, tuple[float, float, int]] = {}
    for fig in FIGURES:
        column = {host: v[fig.name] for host, v in values.items() if fig.name in v}
        if len(column) < MIN_NODES:
            continue
        median = statistics.median(column.values())
        mad = MAD_SCALE * statistics.median(abs(x - median) for x in column.values())
        stats[fig.name] = (median, mad, len(column))
        least = max(K * mad, fig.floor * abs(median) if fig.relative else fig.floor)
        for host, x in column.items():
            off = x - median if fig.high_is_bad else median - x
            if off > least:
                found.append(Outlier(fig, host, x, median, mad))
    return found, stats
