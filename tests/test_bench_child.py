"""The child process and its protocol: events, the watchdog, the parent's collector, and real
child processes (with the fake primitives, and with this machine's real CPU-only torch)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gpudiag.bench import child as bench_child
from gpudiag.bench import runner
from gpudiag.bench.child import Watchdog, child_main, numa_node_for
from gpudiag.bench.link import Link
from gpudiag.bench.placement import Placement
from gpudiag.bench.plan import DeviceInfo, Mode, Task, make_plan
from gpudiag.bench.runner import Collector, run_child
from gpudiag.children import protocol
from gpudiag.probe.child import ChildOutcome, ChildResult
from tests.test_bench_fakes import SCENARIO_ENV, SPEC, Scenario, device

ROOT = Path(__file__).resolve().parent.parent


_real_start = Watchdog.start


@pytest.fixture(autouse=True)
def no_watchdog_thread_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """child_main runs in-process here: its watchdog must not watch pytest's parent."""
    monkeypatch.setattr(Watchdog, "start", lambda self, interval=0.5: threading.Thread())


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith(protocol.EVENT)]


def test_child_main_speaks_the_protocol(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = Scenario(devices=[device(0, uuid="AAA"), device(1, uuid="bbb")], peer_access=False)
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    config = {
        "plan": make_plan("h2d_pinned_async,peer", "64MiB", False, 2, 2, None).to_data(),
        "numa_by_uuid": {"aaa": 0, "bbb": 1},
        "numa_by_pci": {},
        "primitives": SPEC,
    }
    final: list[dict[str, Any]] = []
    child_main(json.dumps(config), final.append)
    events = [json.loads(line[len(protocol.EVENT) :]) for line in _lines(capsys)]
    assert final == [{"done": True}]
    assert [e["kind"] for e in events[:2]] == ["devices", "tasks"]
    assert events[0]["numa_nodes"] == {"0": 0, "1": 1}
    assert events[0]["peer_access"] == [[0, 1, False], [1, 0, False]]
    assert [t["mode"] for t in events[1]["tasks"]] == ["h2d_pinned_async", "h2d_pinned_async", "peer", "peer"]
    results = [e for e in events if e["kind"] == "result"]
    assert len(results) == 4 and all(r["verified"] for r in results)
    # The virtual clock of the fake: exactly the copy's time at the default 25 GB/s.
    assert results[0]["seconds_per_copy"] == pytest.approx([64 * 2**20 / 25e9] * 2)


@pytest.mark.parametrize(
    ("scenario", "plan_devices", "answer"),
    [
        (Scenario(no_cuda="torch 2.13.0+cpu is a CPU-only build"), None, "no_cuda"),
        (Scenario(), "0,2", "usage"),
    ],
)
def test_child_main_final_answers(
    scenario: Scenario, plan_devices: str | None, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    config = {"plan": make_plan(None, None, False, 1, 1, plan_devices).to_data(), "primitives": SPEC}
    final: list[dict[str, Any]] = []
    child_main(json.dumps(config), final.append)
    assert list(final[0]) == [answer]
    if answer == "usage":
        assert final[0]["usage"].startswith("--device: cuda:2 not visible; torch sees 1 CUDA device(s)")


def test_numa_node_lookup_by_uuid_then_pci() -> None:
    d = DeviceInfo(0, "x", "GPU-AbC", "0000:b1:00.0", 0, 1, 1)
    assert numa_node_for(d, {"abc": 1}, {}) == 1
    assert numa_node_for(d, {}, {"0000:b1:00.0": 0}) == 0
    assert numa_node_for(d, {}, {}) is None


def test_watchdog_ends_a_hung_task_and_an_orphaned_child() -> None:
    now = [0.0]
    parent = [100]
    events: list[dict[str, Any]] = []
    exits: list[int] = []
    plan = make_plan("d2d", "4KiB", False, 16, 3, None)
    dog = Watchdog(plan, events.append, exits.append, lambda: now[0], lambda: parent[0])
    task = Task(5, Mode.D2D, 0, None, 4096)
    dog.on_task(task)
    now[0] = 29.0
    dog.check()
    assert not exits
    now[0] = 31.0
    dog.check()
    assert exits == [bench_child.HUNG_EXIT] and events[0]["kind"] == "hung" and events[0]["task"] == 5
    dog.on_task(None)
    now[0] = 1e6
    dog.check()
    assert exits == [bench_child.HUNG_EXIT]  # no task, no deadline
    parent[0] = 1  # re-parented: gpudiag went away (Ctrl-C)
    assert dog.check() is True
    assert exits[-1] == bench_child.PARENT_GONE_EXIT


def test_the_watchdog_thread_looks_until_it_fires() -> None:
    parent = [100]
    exits: list[int] = []
    dog = Watchdog(make_plan("d2d", None, False, 1, 1, None), lambda e: None, exits.append, parent=lambda: parent[0])
    thread = _real_start(dog, 0.01)
    parent[0] = 1
    thread.join(timeout=5)
    assert not thread.is_alive() and exits == [bench_child.PARENT_GONE_EXIT]


def _events(*events: dict[str, Any]) -> list[str]:
    return [protocol.EVENT + json.dumps(e) for e in events]


DEVICES = {"kind": "devices", "devices": [vars(device(0))], "peer_access": [], "numa_nodes": {"0": 0}}
TASKS = {
    "kind": "tasks",
    "tasks": [
        {"index": 0, "mode": "d2d", "device": 0, "peer": None, "nbytes": 4096},
        {"index": 1, "mode": "h2d_pinned", "device": 0, "peer": None, "nbytes": 4096},
    ],
}


def test_the_collector_reads_events_and_the_link_under_load() -> None:
    links: list[int] = []
    started: list[int] = []

    def read_link(d: DeviceInfo) -> Link:
        links.append(d.ordinal)
        return Link(4, 16)

    collector = Collector(read_link, on_start=lambda t: started.append(t.index))
    placement = {"placement": "not_pinned", "gpu_node": 1, "detail": "cpuset"}
    for line in [
        "some torch warning",
        protocol.EVENT + "{not json",
        *_events(
            {**DEVICES, "spin_kernel": False, "version": "torch x"},
            TASKS,
            {"kind": "start", "task": 0},
            {"kind": "warm", "task": 0},
            {"kind": "result", "task": 0, "seconds_per_copy": [1e-6], "verified": True, "placement": placement},
            {"kind": "start", "task": 1},
            {"kind": "hung", "task": 1, "seconds": 30.5},
        ),
    ]:
        collector.line(line)
    out = collector.outcome
    assert links == [0] and started == [0, 1] and out.links == {0: Link(4, 16)}
    assert not out.spin_kernel and out.version == "torch x"
    assert out.results[0].placement is not None and out.results[0].placement.placement is Placement.NOT_PINNED
    assert 1 not in out.results
    final = collector.finish(ChildResult(ChildOutcome.FAILED, detail="exit 3"), 99.0)
    assert final.failure.startswith("h2d_pinned cuda:0 4KiB did not finish within 30 s: the copy hung")


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ChildResult(ChildOutcome.OK, {"done": True}), ("", "", "")),
        (ChildResult(ChildOutcome.OK, {"no_cuda": "why"}), ("why", "", "")),
        (ChildResult(ChildOutcome.OK, {"usage": "bad"}), ("", "bad", "")),
        (ChildResult(ChildOutcome.OK, {}), ("", "", "the benchmark process ended without finishing")),
        (
            ChildResult(ChildOutcome.TIMEOUT),
            ("", "", "the benchmark process did not finish within 12 s (hung in CUDA?)"),
        ),
        (
            ChildResult(ChildOutcome.CRASHED, detail="crashed with SIGSEGV"),
            ("", "", "the benchmark process crashed with SIGSEGV"),
        ),
        (
            ChildResult(ChildOutcome.FAILED, detail="ImportError: x"),
            ("", "", "the benchmark process failed: ImportError: x"),
        ),
    ],
)
def test_the_collector_turns_the_childs_end_into_an_outcome(
    result: ChildResult, expected: tuple[str, str, str]
) -> None:
    out = Collector(lambda d: None).finish(result, 12.0)
    assert (out.no_cuda, out.usage, out.failure) == expected


def test_run_child_passes_the_plan_and_a_timeout_to_the_launcher() -> None:
    seen: dict[str, Any] = {}

    def launcher(args: list[str], *, python: str, timeout: float, on_line: Any) -> ChildResult:
        seen.update(args=args, timeout=timeout, python=python)
        for line in _events(DEVICES | {"spin_kernel": True}, TASKS):
            on_line(line)
        return ChildResult(ChildOutcome.OK, {"done": True})

    plan = make_plan("d2d", None, False, 16, 3, None)
    out = run_child(
        plan, Collector(lambda d: None), gpu_count=2, numa_by_uuid={"u": 1}, numa_by_pci={}, launcher=launcher
    )
    assert len(out.tasks) == 2 and not out.failure
    program, config_text = seen["args"]
    config = json.loads(config_text)
    assert Path(program) == runner.CHILD and seen["python"] == sys.executable
    assert config["numa_by_uuid"] == {"u": 1}
    assert config["primitives"] == "gpudiag.bench.torch_prims:TorchPrimitives" and config["plan"] == plan.to_data()
    assert seen["timeout"] > 120


# --- real child processes --------------------------------------------------------------


def _real(monkeypatch: pytest.MonkeyPatch, scenario: Scenario, **kwargs: Any) -> runner.Outcome:
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    plan = make_plan("h2d_pinned,d2d,h2d_pageable", "64MiB", False, 4, 2, None)
    links: list[int] = []

    def read_link(d: DeviceInfo) -> Link:
        links.append(d.ordinal)
        return Link(5, 16)

    collector = Collector(read_link)
    out = run_child(plan, collector, gpu_count=1, numa_by_uuid={}, numa_by_pci={}, primitives=SPEC, **kwargs)
    assert links == [0] * len(out.links)
    return out


@pytest.mark.slow
def test_a_real_child_process_runs_the_fake_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _real(monkeypatch, Scenario(rates={"h2d_pinned": 50e9, "d2d": 1300e9}))
    assert not out.failure and [t.mode for t in out.tasks] == [Mode.H2D_PAGEABLE, Mode.H2D_PINNED, Mode.D2D]
    assert set(out.results) == {0, 1, 2} and set(out.links) == {0, 1, 2}
    assert out.results[1].seconds_per_copy == pytest.approx((64 * 2**20 / 50e9,) * 2)
    assert all(r.verified for r in out.results.values())


@pytest.mark.slow
def test_a_hung_child_is_killed_and_what_it_measured_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _real(monkeypatch, Scenario(hang=("d2d",)), timeout=2.0)  # the host tasks take well under 1 s
    assert out.failure == "the benchmark process did not finish within 2 s (hung in CUDA?)"
    assert set(out.results) == {0, 1}  # the two host tasks before the hung D2D


@pytest.mark.slow
def test_the_real_cpu_only_torch_says_why_in_the_child() -> None:
    torch_build = pytest.importorskip("gpudiag.probe.torch_static").torch_build().value
    if torch_build is None or torch_build.cuda is not None:
        pytest.skip("needs this project's CPU-only torch")
    plan = make_plan(None, None, False, 16, 3, None)
    out = run_child(plan, Collector(lambda d: None), gpu_count=1, numa_by_uuid={}, numa_by_pci={})
    assert out.no_cuda == f"torch {torch_build.version} is a CPU-only build"
    assert not out.devices and not out.failure


def test_the_child_run_by_path_does_not_put_its_folder_first_on_the_path() -> None:
    """gpudiag/bench/ holds plan.py, report.py, stats.py, ...: run by path, the child drops its own
    folder from sys.path, so those never answer an import of another module of that name."""
    import subprocess

    config = {"plan": make_plan("d2d", None, False, 16, 3, None).to_data(), "primitives": "torch_prims:nothing"}
    done = subprocess.run(
        [sys.executable, str(runner.CHILD), json.dumps(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "No module named 'torch_prims'" in done.stderr
