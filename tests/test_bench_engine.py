"""The measuring loop over fake primitives: order of operations, the spin kernel keeping the
enqueue cost out, per-call wall clocks, verification, failures; and NUMA placement."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpudiag.bench import engine
from gpudiag.bench.placement import (
    Placed,
    Placement,
    cpu_list,
    nodes_with_cpus,
    pci_numa_node,
    placed_on,
)
from gpudiag.bench.plan import GiB, MiB, Mode, Task, make_plan, tasks
from tests.test_bench_fakes import FakePrimitives, Scenario, device


def _measure(scenario: Scenario, mode: Mode, nbytes: int = 256 * MiB, iters: int = 16, samples: int = 3) -> Any:
    prims = FakePrimitives(scenario)
    plan = make_plan(mode.value, None, False, iters, samples, None)
    task = Task(0, mode, 0, 1 if mode.is_peer else None, nbytes)
    warm: list[float] = []
    measured = engine.measure(prims, prims.prepare(task), task, plan, lambda: warm.append(prims.now), prims.clock)
    return measured, prims, warm


def test_an_event_timed_sample_spins_then_times_only_the_copies() -> None:
    measured, prims, warm = _measure(Scenario(devices=[device(0), device(1)]), Mode.PEER_BIDIR, iters=2, samples=1)
    assert prims.log == [
        "prepare",
        *["run"] * 4,  # warm-up
        "sync",
        "clear",  # after the warm-up: verification cannot pass on what the warm-up wrote
        "sync",
        "spin",
        "record",
        "start_sample",
        "run",
        "run",
        "end_sample",
        "record",
        "elapsed",
        "sync",
        "verify",
    ]
    assert len(warm) == 1 and measured.verified and measured.spin_short == 0


def test_the_spin_kernel_keeps_a_slow_enqueue_out_of_the_window() -> None:
    # Each copy takes 0.5 ms on the GPU but 1 ms to enqueue (a busy host).
    slow_host: dict[str, Any] = {"rates": {"d2d": 1e12}, "enqueue_seconds": 0.001}
    spun, _, _ = _measure(Scenario(**slow_host), Mode.D2D, nbytes=500_000_000, iters=8)
    assert spun.seconds_per_copy == pytest.approx((0.0005,) * 3)  # the true copy time
    assert spun.spin_short == 0
    unspun, _, _ = _measure(Scenario(spin_kernel=False, **slow_host), Mode.D2D, nbytes=500_000_000, iters=8)
    assert all(t > 0.0009 for t in unspun.seconds_per_copy)  # the host's pace, not the copy's
    assert unspun.spin_short == 3  # and every sample says so


def test_a_sample_whose_enqueue_outlasts_the_spin_is_counted_and_the_spin_grows() -> None:
    # 16 copies x 1 ms enqueue = 16 ms > the 10 ms first spin; the next spins last 32 ms.
    measured, _, _ = _measure(Scenario(rates={"d2d": 1e12}, enqueue_seconds=0.001), Mode.D2D, nbytes=10**9)
    assert measured.spin_short == 1
    assert measured.seconds_per_copy[1:] == pytest.approx((0.001, 0.001))


def test_blocking_and_pageable_copies_are_timed_per_call_with_the_wall_clock() -> None:
    measured, prims, _ = _measure(Scenario(rates={"h2d_pageable": 10e9}), Mode.H2D_PAGEABLE, iters=4, samples=2)
    assert measured.seconds_per_copy == pytest.approx((256 * MiB / 10e9,) * 2)
    timed = prims.log[prims.log.index("clear") + 2 :]
    assert timed[:4] == ["run", "sync", "run", "sync"] and "spin" not in prims.log and "record" not in prims.log


@pytest.mark.parametrize(
    ("fault", "verified"), [({}, True), ({"lazy": ("d2d",)}, False), ({"corrupt": ("d2d",)}, False)]
)
def test_verification_catches_a_copy_that_did_nothing_or_wrote_wrong_data(
    fault: dict[str, Any], verified: bool
) -> None:
    # The fake's destination starts out holding the source (a stale buffer): only the clear
    # after the warm-up lets verification see that a no-op copy copied nothing.
    measured, _, _ = _measure(Scenario(**fault), Mode.D2D)
    assert measured.verified is verified


def _run(scenario: Scenario, modes: str, sizes: str | None = None, device_filter: str | None = None) -> Any:
    prims = FakePrimitives(scenario)
    plan = make_plan(modes, sizes, False, 4, 3, device_filter)
    devices = {d.ordinal: d for d in scenario.devices}
    todo = tasks(plan, list(devices.values()))
    events: list[dict[str, Any]] = []
    seen: list[Task | None] = []
    placements: list[int | None] = []

    @contextlib.contextmanager
    def place(node: int | None, nodes: dict[int, set[int]]) -> Iterator[Placed]:
        placements.append(node)
        yield Placed(Placement.LOCAL, node, f"host memory on NUMA node {node}, the GPU's")

    engine.run_tasks(
        prims, plan, todo, devices, {0: 0, 1: 1}, {0: {0}, 1: {1}}, events.append, seen.append, prims.clock, place
    )
    return events, seen, placements, prims


def test_run_tasks_emits_start_warm_result_for_every_task() -> None:
    scenario = Scenario(devices=[device(0), device(1)], rates={"peer_bidir": 40e9})
    events, seen, placements, prims = _run(scenario, "h2d_pinned,peer_bidir")
    assert [(e["kind"], e["task"]) for e in events] == [
        ("start", 0),
        ("warm", 0),
        ("result", 0),
        ("start", 1),
        ("warm", 1),
        ("result", 1),
        ("start", 2),
        ("warm", 2),
        ("result", 2),
    ]
    bidir = events[-1]
    assert bidir["verified"] is True and len(bidir["seconds_per_copy"]) == 3
    assert 2 * 256 * MiB / bidir["seconds_per_copy"][0] == pytest.approx(80e9)  # both directions together
    assert bidir["placement"] == {
        "placement": "local",
        "gpu_node": 0,
        "detail": "host memory on NUMA node 0, the GPU's",
    }
    assert placements == [0, 1, 0] and seen[-1] is None and [t.index for t in seen[:-1] if t] == [0, 1, 2]
    assert prims.released == 3


def test_a_failing_task_is_reported_and_the_next_one_runs() -> None:
    scenario = Scenario(fail={"h2d_pinned": "CUDA out of memory. Tried to allocate 20.00 GiB"})
    events, _, _, prims = _run(scenario, "h2d_pinned,d2d")
    results = [e for e in events if e["kind"] == "result"]
    assert results[0]["error"] == "out of memory: CUDA out of memory. Tried to allocate 20.00 GiB"
    assert results[1]["verified"] is True and prims.released == 2
    too_big = Scenario(devices=[device(0).__class__(0, "small", "u", None, 0, 8 * GiB, 4 * GiB)])
    events, _, _, prims = _run(too_big, "d2d", sizes="64MiB,4GiB")
    results = [e for e in events if e["kind"] == "result"]
    assert "verified" in results[0] and results[1]["error"].startswith("needs 8192 MiB on cuda:0")
    assert prims.log.count("prepare") == 1  # the one that does not fit is never allocated


def test_describe_gives_one_line() -> None:
    assert engine.describe(RuntimeError("CUDA error: an illegal memory access\nCUDA kernel errors...")) == (
        "RuntimeError: CUDA error: an illegal memory access"
    )
    assert engine.describe(ValueError()) == "ValueError"
    assert len(engine.describe(RuntimeError("x" * 500))) == 200


# --- placement -------------------------------------------------------------------------


def test_cpu_lists_and_sysfs_nodes(tmp_path: Path) -> None:
    assert cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert cpu_list("") == set()
    for node, cpus in ((0, "0-3"), (1, "4-7"), (2, "")):  # node 2: memory only (CXL, HBM)
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(cpus + "\n")
    assert nodes_with_cpus(tmp_path) == {0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}}
    assert nodes_with_cpus(tmp_path / "missing") == {}
    (tmp_path / "0000:b1:00.0").mkdir()
    (tmp_path / "0000:b1:00.0" / "numa_node").write_text("1\n")
    (tmp_path / "0000:18:00.0").mkdir()
    (tmp_path / "0000:18:00.0" / "numa_node").write_text("-1\n")
    assert pci_numa_node("00000000:B1:00.0", tmp_path) == 1  # NVML's 8-digit domain
    assert pci_numa_node("0000:b1:00.0", tmp_path) == 1
    assert pci_numa_node("00000000:18:00.0", tmp_path) is None  # sysfs: no affinity
    assert pci_numa_node("garbage", tmp_path) is None


class Affinity:
    def __init__(self, allowed: set[int], refuse: bool = False) -> None:
        self.current, self.refuse, self.calls = set(allowed), refuse, []  # type: ignore[var-annotated]

    def get(self, pid: int) -> set[int]:
        return set(self.current)

    def put(self, pid: int, cpus: set[int]) -> None:
        if self.refuse:
            raise OSError(22, "Invalid argument")
        self.calls.append(set(cpus))
        self.current = set(cpus)


NODES = {0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}}


def test_placement_pins_to_the_gpus_node_and_restores() -> None:
    aff = Affinity(set(range(8)))
    with placed_on(1, NODES, aff.get, aff.put) as placed:
        assert placed.placement is Placement.LOCAL and aff.current == {4, 5, 6, 7}
    assert aff.current == set(range(8)) and aff.calls == [{4, 5, 6, 7}, set(range(8))]


def test_placement_says_when_memory_may_be_remote() -> None:
    with placed_on(0, {0: {0, 1}}, Affinity({0, 1}).get, Affinity({0, 1}).put) as placed:
        assert placed.placement is Placement.SINGLE_NODE and not placed.placement.may_be_remote
    with placed_on(None, NODES) as placed:
        assert placed.placement is Placement.NODE_UNKNOWN and placed.placement.may_be_remote
    cpuset = Affinity({0, 1, 2, 3})  # a job confined to socket 0, its GPU on socket 1
    with placed_on(1, NODES, cpuset.get, cpuset.put) as placed:
        assert placed.placement is Placement.NOT_PINNED and "cpuset" in placed.detail and not cpuset.calls
    refusing = Affinity(set(range(8)), refuse=True)
    with placed_on(1, NODES, refusing.get, refusing.put) as placed:
        assert placed.placement is Placement.NOT_PINNED and "Invalid argument" in placed.detail
