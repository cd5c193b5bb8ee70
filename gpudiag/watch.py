"""The `memory --watch` loop, with time, sampling and output injected so tests run instantly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudiag.exitcodes import ExitCode
from gpudiag.memory import MemoryView, WatchState, max_free, min_free
from gpudiag.units import human_bytes


@dataclass(frozen=True)
class WatchOptions:
    interval: float
    count: int | None = None
    until_free: int | None = None
    timeout: float | None = None
    alert_free_below: int | None = None


@dataclass(frozen=True)
class Outcome:
    code: ExitCode
    message: str  # for stderr; "" when there is nothing to say
    samples: int


def run(
    sample: Callable[[], MemoryView],
    show: Callable[[MemoryView, WatchState, float], None],
    options: WatchOptions,
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> Outcome:
    """Sample every ``interval`` seconds until a stop condition; Ctrl-C ends it cleanly."""
    state = WatchState()
    start = now()
    try:
        while True:
            tick = now()
            view = state.update(sample())
            show(view, state, tick)
            if options.until_free is not None:
                best = max_free(view)
                if best is not None and best[1] >= options.until_free:
                    return Outcome(ExitCode.OK, f"GPU {best[0]} has {human_bytes(best[1])} free", state.samples)
                if options.timeout is not None and now() - start >= options.timeout:
                    return Outcome(
                        ExitCode.FAILED,
                        f"timed out after {options.timeout:g} s: no GPU reached {human_bytes(options.until_free)} free",
                        state.samples,
                    )
            if options.alert_free_below is not None:
                low = min_free(view)
                if low is not None and low < options.alert_free_below:
                    return Outcome(
                        ExitCode.FAILED,
                        f"alert: a GPU has {human_bytes(low)} free, below {human_bytes(options.alert_free_below)}",
                        state.samples,
                    )
            if options.count is not None and state.samples >= options.count:
                return Outcome(ExitCode.OK, "", state.samples)
            sleep(max(0.0, options.interval - (now() - tick)))
    except KeyboardInterrupt:
        return Outcome(ExitCode.OK, "", state.samples)
