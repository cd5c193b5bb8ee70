"""Sampling on a grid: a slow sample shortens the next sleep, overrun intervals are skipped (`list --watch`;
`memory --watch` keeps the same grid in :func:`gpudiag.memory.loop.run`)."""

from __future__ import annotations

from collections.abc import Callable


def repeat(
    step: Callable[[int], None],
    interval: float,
    count: int | None,
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> int:
    """Call ``step(sample_number)`` every ``interval`` seconds on the same grid as :func:`gpudiag.memory.loop.run`
    (a slow sample shortens the next sleep; overrun intervals are skipped), ``count`` times
    or until a signal (which goes through, as in that loop). Returns the number of samples taken."""
    samples = 0
    next_tick = now()
    while True:
        step(samples)
        samples += 1
        if count is not None and samples >= count:
            return samples
        next_tick += interval
        late = now() - next_tick
        if late > 0:
            next_tick += interval * (late // interval + 1)
        sleep(max(0.0, next_tick - now()))
