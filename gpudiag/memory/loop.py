"""The `memory --watch` loop, with time, sampling and output injected so tests run instantly."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gpudiag.exitcodes import ExitCode
from gpudiag.memory.state import WatchState, max_free, min_free
from gpudiag.memory.view import Forecast, MemoryView
from gpudiag.units import human_bytes


class WatchOptions(msgspec.Struct, frozen=True):
    interval: float
    count: int | None = None
    until_free: int | None = None
    timeout: float | None = None
    alert_free_below: int | None = None
    alert_oom_within: float | None = None  # seconds: exit 1 when a GPU or process is forecast full within


class Outcome(msgspec.Struct, frozen=True):
    code: ExitCode
    message: str  # for stderr; "" when there is nothing to say
    samples: int


ALERT_CONFIRM = 3  # samples in a row a forecast must hold before --alert-oom-within fires


def oom_forecast(view: MemoryView, within: float) -> Forecast | None:
    """The soonest forecast that is due within ``within`` seconds."""
    return next((f for f in view.forecasts if f.full_in_s <= within), None)


def decide(
    view: MemoryView,
    options: WatchOptions,
    samples: int,
    elapsed: float,
    forecast_streak: int = 0,
    ended: bool = False,
) -> Outcome | None:
    """Whether this sample ends the watch, and how; None to go on. ``ended``: the source has no more
    samples (a replayed recording's last frame was this one)."""
    if options.until_free is not None:
        best = max_free(view)
        if best is not None and best[1] >= options.until_free:
            return Outcome(ExitCode.OK, f"GPU {best[0]} has {human_bytes(best[1])} free", samples)
        if options.timeout is not None and elapsed >= options.timeout:
            return Outcome(
                ExitCode.FAILED,
                f"timed out after {options.timeout:g} s: no GPU reached {human_bytes(options.until_free)} free"
                + (f" (the most: GPU {best[0]}, {human_bytes(best[1])})" if best is not None else ""),
                samples,
            )
    if options.alert_free_below is not None:
        low = min_free(view)
        if low is not None and low[1] < options.alert_free_below:
            return Outcome(
                ExitCode.FAILED,
                f"alert: GPU {low[0]} has {human_bytes(low[1])} free, below {human_bytes(options.alert_free_below)}",
                samples,
            )
    if options.alert_oom_within is not None and forecast_streak >= ALERT_CONFIRM:
        due = oom_forecast(view, options.alert_oom_within)
        if due is not None:
            from gpudiag.memory.forecast import forecast_line
            from gpudiag.trend import duration_text

            within = duration_text(options.alert_oom_within)
            return Outcome(ExitCode.FAILED, f"alert: {forecast_line(due, view)} (within {within})", samples)
    counted = options.count is not None and samples >= options.count
    if counted or ended:
        if view.lost_gpus:
            lost = ", ".join(str(i) for i in view.lost_gpus)
            return Outcome(ExitCode.GPU_LOST, f"GPU {lost} is lost (the other GPUs are shown)", samples)
        return Outcome(ExitCode.OK, "" if counted else f"the recording ended after {samples} sample(s)", samples)
    return None


def run(
    sample: Callable[[], MemoryView],
    show: Callable[[MemoryView, WatchState], None],
    options: WatchOptions,
    now: Callable[[], float],
    sleep: Callable[[float], None],
    wall: Callable[[], float] | None = None,
    ended: Callable[[], bool] | None = None,
) -> Outcome:
    """Sample every ``interval`` seconds until a stop condition. A signal (KeyboardInterrupt,
    gpudiag.edge.Interrupted) goes through: an interrupted wait is not an answer.

    ``now`` is a monotonic clock for pacing and timeouts; ``wall`` stamps the samples; ``ended`` says
    the source has nothing after the sample just taken (a recording's last frame): the watch ends there.
    Samples keep to the interval's grid: a slow sample shortens the next sleep, and a
    sample that overruns whole intervals skips them rather than bunching up.
    """
    wall = wall or now
    state = WatchState()
    start = now()
    next_tick = start
    deadline = start + options.timeout if options.until_free is not None and options.timeout is not None else None
    streak = 0  # samples in a row with an OOM forecast due within --alert-oom-within
    while True:
        view = state.update(sample(), wall())
        show(view, state)
        within = options.alert_oom_within
        streak = streak + 1 if within is not None and oom_forecast(view, within) is not None else 0
        outcome = decide(view, options, state.samples, now() - start, streak, ended is not None and ended())
        if outcome is not None:
            return outcome
        next_tick += options.interval
        late = now() - next_tick
        if late > 0:
            next_tick += options.interval * (late // options.interval + 1)
        wake = next_tick if deadline is None else min(next_tick, max(deadline, now()))
        sleep(max(0.0, wake - now()))
