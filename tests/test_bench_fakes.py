"""Fake copy primitives for bench-transfer tests: a simulated GPU timeline and a virtual clock.

A copy issued asynchronously starts when the GPU is free (or when it is issued, if the GPU
is idle) and the host moves on after a small enqueue cost; a blocking copy holds the host
for its whole duration. Events complete when the GPU reaches them. So the method itself is
under test: without a spin kernel, slow enqueues leave gaps inside the timed window.

The same fakes run inside the real child process: ``EnvPrimitives`` reads its scenario from
``GPUDIAG_TEST_BENCH_SCENARIO`` (JSON), so tests can exercise the whole parent/child path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

from gpudiag.bench.engine import NoCudaError
from gpudiag.bench.plan import DeviceInfo, GiB, Mode, Task

SCENARIO_ENV = "GPUDIAG_TEST_BENCH_SCENARIO"
SPEC = "tests.test_bench_fakes:EnvPrimitives"


def device(ordinal: int, name: str = "NVIDIA H100 80GB HBM3", uuid: str = "", l2: int = 50 << 20) -> DeviceInfo:
    return DeviceInfo(ordinal, name, uuid or f"uuid-{ordinal}", None, l2, 80 * GiB, 79 * GiB)


@dataclass
class Scenario:
    devices: list[DeviceInfo] = field(default_factory=lambda: [device(0)])
    rates: dict[str, float] = field(default_factory=dict)  # mode -> bytes/s per direction
    default_rate: float = 25e9
    peer_access: bool = True
    spin_kernel: bool = True
    enqueue_seconds: float = 20e-6
    corrupt: tuple[str, ...] = ()  # modes whose copies write wrong data
    lazy: tuple[str, ...] = ()  # modes whose copies never write (a no-op copy)
    fail: dict[str, str] = field(default_factory=dict)  # mode -> error raised when preparing
    hang: tuple[str, ...] = ()  # modes whose first copy never returns (real time)
    no_cuda: str = ""
    jitter: float = 0.0  # copies take up to this share longer or shorter, in a fixed pattern

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        data = json.loads(text)
        data["devices"] = [DeviceInfo(**d) for d in data["devices"]]
        data["corrupt"], data["lazy"], data["hang"] = (tuple(data[k]) for k in ("corrupt", "lazy", "hang"))
        return cls(**data)


class FakeCopy:
    N = 8

    def __init__(self, prims: FakePrimitives, task: Task) -> None:
        self.p, self.task = prims, task
        self.src = [task.index * 100 + i for i in range(self.N)]
        self.dst = list(self.src)  # a stale buffer that happens to hold the same data
        self.mode = task.mode.value

    @property
    def duration(self) -> float:
        self.p.calls += 1
        wobble = 1 + self.p.s.jitter * ((self.p.calls * 7) % 5 - 2) / 2
        return wobble * self.task.nbytes / self.p.s.rates.get(self.mode, self.p.s.default_rate)

    def run(self) -> None:
        p = self.p
        p.log.append("run")
        if self.mode in p.s.hang:
            time.sleep(3600)
        if self.task.mode.timed_with_events:
            begin = max(p.busy[self.task.device], p.now)
            p.busy[self.task.device] = begin + self.duration
            p.now += p.s.enqueue_seconds
        else:
            p.now += self.duration
        if self.mode not in p.s.lazy:
            self.dst = list(self.src)
            if self.mode in p.s.corrupt:
                self.dst[3] ^= 1

    def clear(self) -> None:
        self.p.log.append("clear")
        self.dst = [-1] * self.N

    def start_sample(self) -> None:
        self.p.log.append("start_sample")

    def end_sample(self) -> None:
        self.p.log.append("end_sample")

    def verify(self) -> bool:
        self.p.log.append("verify")
        return self.dst == self.src

    def close(self) -> None:
        self.p.log.append("close")


class FakePrimitives:
    def __init__(self, scenario: Scenario | None = None) -> None:
        self.s = scenario or Scenario()
        if self.s.no_cuda:
            raise NoCudaError(self.s.no_cuda)
        self.spin_kernel = self.s.spin_kernel
        self.version = "torch 9.9.9+fake (CUDA 12.8)"
        self.now = 0.0
        self.busy: dict[int, float] = {d.ordinal: 0.0 for d in self.s.devices}
        self.log: list[str] = []
        self.released = 0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def device_count(self) -> int:
        return len(self.s.devices)

    def devices(self, ordinals: Sequence[int]) -> list[DeviceInfo]:
        return [d for d in self.s.devices if d.ordinal in ordinals]

    def can_access_peer(self, device: int, peer: int) -> bool:
        return self.s.peer_access

    def prepare(self, task: Task) -> FakeCopy:
        self.log.append("prepare")
        if task.mode.value in self.s.fail:
            raise RuntimeError(self.s.fail[task.mode.value] + "\nmore detail on a second line")
        return FakeCopy(self, task)

    def synchronize(self, devices: Sequence[int]) -> None:
        self.log.append("sync")
        self.now = max([self.now, *(self.busy[d] for d in devices)])

    def spin(self, device: int, seconds: float) -> None:
        self.log.append("spin")
        if self.spin_kernel:
            self.busy[device] = max(self.busy[device], self.now) + seconds

    def record(self, device: int) -> float:
        self.log.append("record")
        return max(self.busy[device], self.now)

    def elapsed(self, start: Any, end: Any) -> float:
        self.log.append("elapsed")
        self.now = max(self.now, float(end))
        return float(end) - float(start)

    def release(self) -> None:
        self.released += 1


class EnvPrimitives(FakePrimitives):
    """The fake, configured from the environment: for the real child process."""

    def __init__(self) -> None:
        super().__init__(Scenario.from_json(os.environ[SCENARIO_ENV]))


def test_the_fake_timeline_models_asynchronous_and_blocking_copies() -> None:
    p = FakePrimitives(Scenario(rates={"d2d": 1e9, "h2d_pageable": 1e9}, enqueue_seconds=0.002))
    copy = p.prepare(Task(0, Mode.D2D, 0, None, 1_000_000))  # 1 ms on the GPU, 2 ms to enqueue
    start = p.record(0)
    copy.run()
    copy.run()
    assert p.now == pytest.approx(0.004) and p.busy[0] == pytest.approx(0.003)  # the GPU idled between
    assert p.elapsed(start, p.record(0)) == pytest.approx(0.004)  # an idle gap inside the window
    p.spin(0, 0.1)
    start = p.record(0)
    copy.run()
    copy.run()
    assert p.elapsed(start, p.record(0)) == pytest.approx(0.002)  # behind the spin: no gap
    blocking = p.prepare(Task(1, Mode.H2D_PAGEABLE, 0, None, 1_000_000))
    before = p.now
    blocking.run()
    assert p.now - before == pytest.approx(0.001)
    assert Scenario.from_json(Scenario(lazy=("d2d",)).to_json()).lazy == ("d2d",)
