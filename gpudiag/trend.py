"""Growth of a memory series and when it reaches a limit (standard library only: the tracker uses it too).

The slope is robust (the median of slopes between points half a window apart, a cheap cousin of
Theil-Sen): a caching allocator grows in steps and a training step's activations come and go, so a
least-squares line would chase both. Growth counts only when it is sustained: the later half of the
window must still grow at half the whole window's rate, so the ramp of a job's first steps, which
then levels off, forecasts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_POINTS = 6


@dataclass(frozen=True)
class Growth:
    per_x: float  # units of y per unit of x (bytes per second, bytes per step)
    points: int
    first_x: float
    last_x: float
    first_y: float
    last_y: float


def median(values: Iterable[float]) -> float:
    """The median (``statistics`` costs a few ms of start-up for what this does)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _median_slope(points: Sequence[tuple[float, float]]) -> float | None:
    half = len(points) // 2
    slopes = [
        (points[i + half][1] - points[i][1]) / (points[i + half][0] - points[i][0])
        for i in range(len(points) - half)
        if points[i + half][0] != points[i][0]
    ]
    return median(slopes) if slopes else None


def sustained_growth(points: Sequence[tuple[float, float]], min_points: int = MIN_POINTS) -> Growth | None:
    """The series' growth per unit of x if it grows and keeps growing; None if flat, falling or too short."""
    if len(points) < min_points:
        return None
    points = sorted(points)
    whole = _median_slope(points)
    recent = _median_slope(points[len(points) // 2 :])
    if whole is None or recent is None or whole <= 0 or recent < 0.5 * whole:
        return None
    return Growth(whole, len(points), points[0][0], points[-1][0], points[0][1], points[-1][1])


def until(level: float, limit: float, growth: Growth) -> float | None:
    """Units of x until ``level`` reaches ``limit`` at ``growth`` (0 if it already has)."""
    if growth.per_x <= 0:
        return None
    return max(0.0, (limit - level) / growth.per_x)


def duration_text(seconds: float) -> str:
    """'45s', '4m10s', '2h05m', '3d4h': the two largest units, as a forecast deserves no more."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def size_text(n: float) -> str:
    """Binary units with one decimal, as gpudiag prints sizes (``18.3 GiB``, ``512.0 MiB``)."""
    value = float(n)
    for unit in ("Bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} Bytes" if unit == "Bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
