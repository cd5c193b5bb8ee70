"""The watch loop over a changing machine: the real NVML source over the fake NVML, stepped per sample.

Time is injected (a clock whose sleep moves the fake machine on), so these run instantly.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.memory import loop
from gpudiag.memory.build import build
from gpudiag.memory.state import max_free, min_free
from gpudiag.memory.view import MemoryView
from gpudiag.model import GpuState, Machine, Reading, Reason
from gpudiag.probe.collect import MachineSource
from gpudiag.replay.fixtures import load
from gpudiag.sources import open_source
from tests.test_memory import MiB, with_free, with_gpu


class Timeline:
    """A monotonic clock for the watch; each sleep passes time and moves the machine to its next state."""

    def __init__(self, source: MachineSource, states: list[Machine]) -> None:
        self.source, self.states, self.t, self.step = source, states, 0.0, 0
        self.sleeps: list[float] = []
        self._apply()

    def _apply(self) -> None:
        machine = self.states[min(self.step, len(self.states) - 1)]
        self.source.lib.set_machine(machine)
        self.source.host.set_machine(machine)  # type: ignore[attr-defined]

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        self.step += 1
        self._apply()


def lose(machine: Machine, index: int) -> Machine:
    lost: Reading[Any] = Reading.missing(Reason.GPU_LOST, "GPU is lost")
    return with_gpu(machine, index, state=GpuState.LOST, memory=lost, processes=lost)


def add_process(machine: Machine, gpu: int, pid: int, used_mib: int) -> Machine:
    procs = machine.gpus[gpu].processes.value
    assert procs is not None
    template = machine.gpus[0].processes.value
    assert template
    extra = msgspec.structs.replace(template[0], pid=pid, used_memory_bytes=Reading.of(used_mib * MiB))
    return with_gpu(machine, gpu, processes=Reading.of((*procs, extra)))


def watch_source(
    states: list[Machine], options: loop.WatchOptions, name: str = "v100x4-tutorial"
) -> tuple[loop.Outcome, list[MemoryView], MachineSource, Timeline]:
    shown: list[MemoryView] = []
    with open_source(name) as source:
        clock = Timeline(source, states)
        outcome = loop.run(
            lambda: build(source.read(), {}),
            lambda view, state: shown.append(view),
            options,
            clock.now,
            clock.sleep,
        )
    return outcome, shown, source, clock


def test_processes_come_and_go_and_a_gpu_is_lost_at_sample_3() -> None:
    base = load("v100x4-tutorial")[0]
    started = add_process(base, 1, 4242, 700)
    states = [base, started, lose(started, 2), lose(base, 2), base]
    outcome, shown, source, clock = watch_source(states, loop.WatchOptions(interval=1.0, count=5))
    assert outcome.code is ExitCode.OK and outcome.samples == 5
    assert [r.process.pid for r in shown[1].processes if r.status == "new"] == [4242]
    assert shown[2].lost == (2,) and shown[2].gpus[2].gpu.state is GpuState.LOST
    assert "GPU is lost" in shown[2].gpus[2].gpu.state_detail
    assert [r.gpu.state for r in shown[2].gpus].count(GpuState.OK) == 3  # the others still read
    assert [(e.gpu_index, e.pid) for e in shown[3].exited] == [(1, 4242)]
    assert shown[3].exited and all(e.gpu_index != 2 for e in shown[3].exited)  # lost, not exited
    assert clock.sleeps == [1.0] * 4
    lib = source.lib
    assert lib.calls.count("nvmlDeviceGetHandleByIndex") == 4  # handles fetched once, not per sample
    assert lib.calls.count("nvmlInit") == 1


def test_a_count_that_ends_with_a_gpu_lost_says_so() -> None:
    base = load("v100x4-tutorial")[0]
    outcome, _, _, _ = watch_source([base, lose(base, 3)], loop.WatchOptions(interval=1.0, count=2))
    assert outcome.code is ExitCode.GPU_LOST and outcome.message == "GPU 3 is lost (the other GPUs are shown)"


def test_until_free_waits_for_a_gpu_then_exits_0() -> None:
    base = load("v100x4-tutorial")[0]
    states = [base, base, base, with_free(base, 2, 15000)]
    options = loop.WatchOptions(interval=2.0, until_free=14 * 1024 * MiB)
    outcome, _, _, clock = watch_source(states, options)
    assert outcome.code is ExitCode.OK and outcome.samples == 4
    assert outcome.message.startswith("GPU 2 has 14.6 GiB free")
    assert clock.t == pytest.approx(6.0)


def test_until_free_times_out_with_exit_1_without_oversleeping() -> None:
    base = load("v100x4-tutorial")[0]
    options = loop.WatchOptions(interval=10.0, until_free=14 * 1024 * MiB, timeout=5.0)
    outcome, _, _, clock = watch_source([base], options)
    assert outcome.code is ExitCode.FAILED
    assert outcome.message.startswith("timed out after 5 s: no GPU reached 14.0 GiB free (the most: GPU 1")
    assert clock.t == pytest.approx(5.0)  # woke at the deadline, not at the next 10 s tick


def test_alert_fires_when_free_memory_drops() -> None:
    base = load("h100x8-healthy")[0]
    options = loop.WatchOptions(interval=1.0, alert_free_below=1024 * MiB)
    outcome, _, _, _ = watch_source([base, base, with_free(base, 3, 500)], options, "h100x8-healthy")
    assert outcome.code is ExitCode.FAILED and outcome.samples == 3
    assert outcome.message == "alert: GPU 3 has 500.0 MiB free, below 1.0 GiB"


def test_a_lost_gpu_neither_fires_the_alert_nor_satisfies_until_free() -> None:
    base = load("h100x8-healthy")[0]
    lost = lose(base, 0)
    view = build(lost, {})
    low, high = min_free(view), max_free(view)
    assert low is not None and high is not None and 0 not in (low[0], high[0])  # the lost GPU 0 is in neither
    outcome, _, _, _ = watch_source(
        [lost], loop.WatchOptions(interval=1.0, count=3, alert_free_below=MiB), "h100x8-healthy"
    )
    assert outcome.code is ExitCode.GPU_LOST and outcome.samples == 3


def test_ctrl_c_during_a_sleep_goes_through_the_watch() -> None:
    """An interrupted wait is no answer: the interrupt reaches the command, which exits 128+N."""
    shown: list[MemoryView] = []

    def interrupted(_seconds: float) -> None:
        raise KeyboardInterrupt

    with open_source("v100x4-tutorial") as source, pytest.raises(KeyboardInterrupt):
        loop.run(
            lambda: build(source.read(), {}),
            lambda view, state: shown.append(view),
            loop.WatchOptions(interval=1.0),
            lambda: 0.0,
            interrupted,
        )
    assert len(shown) == 1


def test_a_slow_sample_keeps_the_grid() -> None:
    """A sample that takes 2.5 intervals skips the missed ticks instead of bunching samples up."""
    t = [0.0]
    durations = iter([0.1, 2.5, 0.1, 0.1])
    sleeps: list[float] = []
    base = build(load("v100x4-tutorial")[0], {})

    def sample() -> MemoryView:
        t[0] += next(durations)
        return base

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        t[0] += seconds

    loop.run(sample, lambda *a: None, loop.WatchOptions(interval=1.0, count=4), lambda: t[0], sleep)
    assert sleeps == [0.9, 0.5, 0.9]  # samples start at 0, 1, then 4 (2 and 3 were missed), 5
