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
MODEL_SEP = " @ "  # a per-model figure's statistics, when the fleet has several models: "stress_tflops @ 8× H100"


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str
    high_is_bad: bool
    floor: float  # the least distance from the median that counts
    relative: bool  # floor is a fraction of the median instead of an absolute amount
    per_model: bool = False  # compared only among nodes with the same GPUs (`check --level 2-4`'s figures)


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
    # From `check --level 2-4` (each the node's slowest GPU): a figure only means something beside the
    # same GPUs, so each is compared within the nodes of one GPU model.
    Figure("stress_tflops", "sustained GEMM", "TFLOP/s", False, 0.10, True, per_model=True),
    Figure("memtest_gbps", "memory test", "GB/s", False, 0.10, True, per_model=True),
    Figure("peer_gbps", "peer copies", "GB/s", False, 0.10, True, per_model=True),
    Figure("allreduce_busbw_gbps", "all-reduce busbw", "GB/s", False, 0.10, True, per_model=True),
)
_BY_NAME = {f.name: f for f in FIGURES}

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
    model: str = ""  # per-model figures: the GPUs of the nodes compared ("8× NVIDIA H100 80GB HBM3")
    gpu: int | None = None  # the GPU the node's figure is from (its slowest), when known


def figure_of(key: str) -> Figure:
    """The figure behind a key of :func:`find`'s statistics (``name`` or ``name @ model``)."""
    return _BY_NAME[key.split(MODEL_SEP, 1)[0]]


def find(
    values: dict[str, dict[str, float]],
    models: dict[str, str] | None = None,
    gpus: dict[str, dict[str, int]] | None = None,
) -> tuple[list[Outlier], dict[str, tuple[float, float, int]]]:
    """Outliers per figure, and per figure (median, scaled MAD, nodes) of ``values[host][figure]``.

    ``models``: each host's GPUs; per-model figures are compared within each model's nodes (their
    statistics keyed ``name @ model`` when there are several). ``gpus``: per host, which GPU each
    figure came from."""
    found: list[Outlier] = []
    stats: dict[str, tuple[float, float, int]] = {}
    for fig in FIGURES:
        column = {host: v[fig.name] for host, v in values.items() if fig.name in v}
        if not fig.per_model or models is None:
            groups = {"": column}
        else:
            groups = {}
            for host, x in column.items():
                groups.setdefault(models.get(host, ""), {})[host] = x
        for model, members in groups.items():
            key = fig.name if len(groups) == 1 else f"{fig.name}{MODEL_SEP}{model}"
            for host, x, median, mad in _beyond(fig, members, stats, key):
                gpu = (gpus or {}).get(host, {}).get(fig.name) if fig.per_model else None
                found.append(Outlier(fig, host, x, median, mad, model if fig.per_model else "", gpu))
    return found, stats


def _beyond(
    fig: Figure, column: dict[str, float], stats: dict[str, tuple[float, float, int]], key: str
) -> list[tuple[str, float, float, float]]:
    if len(column) < MIN_NODES:
        return []
    median = statistics.median(column.values())
    mad = MAD_SCALE * statistics.median(abs(x - median) for x in column.values())
    stats[key] = (median, mad, len(column))
    least = max(K * mad, fig.floor * abs(median) if fig.relative else fig.floor)
    out = []
    for host, x in column.items():
        off = x - median if fig.high_is_bad else median - x
        if off > least:
            out.append((host, x, median, mad))
    return out
