"""bench-transfer statistics: median, min/max, spread, and where a sweep saturates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudiag.bench.stats import bandwidth, saturation_size


def test_rates_from_seconds_per_copy() -> None:
    bw = bandwidth(1_000_000_000, [0.1, 0.05, 0.08])
    assert bw.median == pytest.approx(12.5e9)
    assert [bw.minimum, bw.maximum] == pytest.approx([10e9, 20e9])
    assert bw.spread_percent == pytest.approx(80.0)
    assert bw.samples == 3 and list(bw.rates) == pytest.approx([10e9, 20e9, 12.5e9])  # in the order taken
    assert bandwidth(10, [1.0, 1.0]).median == 10.0  # an even count: the mean of the middle two


@pytest.mark.parametrize("times", [[], [0.0], [1.0, -1.0], [float("nan")]])
def test_bad_samples_are_errors_not_figures(times: list[float]) -> None:
    with pytest.raises(ValueError):
        bandwidth(1, times)


def test_saturation_is_the_first_size_near_the_peak() -> None:
    curve = [(4096, 1.0), (1 << 20, 8.0), (4 << 20, 23.0), (16 << 20, 25.0), (64 << 20, 24.5)]
    assert saturation_size(curve) == 4 << 20
    assert saturation_size(list(reversed(curve))) == 4 << 20  # order does not matter
    assert saturation_size([(1, 10.0), (2, 5.0), (3, 10.0)]) == 1
    assert saturation_size(curve, share=0.99) == 16 << 20
    assert saturation_size([]) is None


@given(st.lists(st.tuples(st.integers(1, 1 << 30), st.floats(0.01, 1e12)), min_size=1, unique_by=lambda p: p[0]))
def test_no_smaller_size_reaches_ninety_percent(points: list[tuple[int, float]]) -> None:
    found = saturation_size(points)
    peak = max(rate for _, rate in points)
    assert found in {size for size, _ in points}
    assert dict(points)[found] >= 0.9 * peak
    assert all(rate < 0.9 * peak for size, rate in points if size < found)
