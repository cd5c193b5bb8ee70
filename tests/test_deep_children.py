"""The deep diagnostics' children, run for real on the CPU (tests/fake_devices.py): each phase's
pass, its failures pinned to the device that failed, hangs, crashes, the budget, Ctrl-C and a
parent that goes away; and the whole deep run on an example machine.

On a GPU machine the same children run on the GPUs: tests/test_deep_gpu.py (marked ``gpu``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpudiag.checks import Facts, Options, Status, rules
from gpudiag.checks.deep import allreduce, collect, levels, links, memtest, run, stress
from gpudiag.checks.deep.collect import Context, Events
from gpudiag.checks.deep.facts import MemoryCounters
from gpudiag.checks.deep.progress import Progress
from gpudiag.checks.deep.sampler import Sampler
from gpudiag.children import patterns
from gpudiag.model import Reading, Reason
from gpudiag.probe.child import script
from gpudiag.probe.collect import MachineSource
from gpudiag.sources import open_source
from tests import fake_devices
from tests.test_bench_fakes import SCENARIO_ENV, SPEC, Scenario, device

# Asked without importing torch: an import here would cost every collecting worker seconds; the
# tests that use torch in this process import it through the fixture below.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (a CPU build will do)")


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")


MACHINE = "h100x8-healthy"


def context(overrides: dict[str, Any] | None = None, budget: float = 300.0, name: str = MACHINE) -> Context:
    source = open_source(name)
    machine = source.read()
    holder: list[Context] = []
    sampler = Sampler(lambda groups: holder[0].read(groups), source.session.watch_xids(), interval=0.2)
    ctx = Context(source, machine, None, time.monotonic() + budget, budget, overrides or fake_devices.CPU, sampler)
    holder.append(ctx)
    return ctx


def judged(ctx: Context, check_id: str, level: int = 4, **phases: Any) -> list[tuple[str, Status, str]]:
    from gpudiag.checks.deep.facts import DeepFacts

    deep = DeepFacts(level, xids=tuple(ctx.sampler.xids), **phases)
    facts = Facts(ctx.machine, Reading.missing(Reason.UNAVAILABLE), None, deep=deep)
    return [(r.target, r.status, r.finding) for r in rules.run(facts, Options(), only=(check_id,), level=level)]


# --- the memory test's patterns, in this process ------------------------------------------------


@pytest.mark.slow
def test_every_pattern_passes_on_good_memory_and_counts_what_it_moved(torch: Any) -> None:
    chunks = [torch.empty(4096, dtype=torch.int64) for _ in range(3)]
    tester = patterns.Tester(torch, chunks, lambda: None, block_words=1024)
    for name in patterns.LONG:
        assert tester.run(name, seed=7).mismatches == 0, name
    assert tester.moved > sum(patterns.SWEEPS.values()) * 3 * 4096 * 8 // 2


@pytest.mark.slow
@pytest.mark.parametrize("name", patterns.LONG)
def test_a_stuck_bit_is_found_with_its_address_and_bit(name: str, torch: Any) -> None:
    chunks = [torch.empty(4096, dtype=torch.int64) for _ in range(2)]

    class Stuck(patterns.Tester):  # bit 3 of word 100 of the second chunk reads as 1, whatever was written
        def _verify(self, chunk: Any, value: Any, found: patterns.Found) -> None:
            chunks[1][100] |= 1 << 3
            super()._verify(chunk, value, found)

    found = Stuck(torch, chunks, lambda: None, block_words=1024).run(name, seed=1)
    address = chunks[1].data_ptr() + 100 * 8
    assert found.mismatches >= 1 and found.first == address and found.last == address
    assert found.bits == 1 << 3 and found.samples[0][0] == address


# --- the memory test's child ----------------------------------------------------------------


@pytest.mark.slow
def test_good_memory_passes_with_its_counters_unchanged_and_an_ecc_error_during_the_test_fails_its_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One child for two claims: GPU 0's memory is good and its counters (read from NVML) do not
    move; GPU 1's volatile uncorrected ECC count goes up by one during the test."""
    real = memtest.counters
    readings: list[dict[int, MemoryCounters]] = []

    def counters(machine: Any) -> dict[int, MemoryCounters]:
        read = real(machine)
        if readings:  # the reading after the test
            ecc = read[1].ecc_uncorrected
            assert ecc is not None
            read[1] = msgspec.structs.replace(read[1], ecc_uncorrected=ecc + 1)
        readings.append(read)
        return read

    monkeypatch.setattr(memtest, "counters", counters)
    ctx = context()
    test, why = memtest.run(ctx, levels.LEVELS[2], 0.0)
    assert why == "" and test is not None and ctx.notes == []
    assert [(g.gpu_index, g.ok) for g in test.gpus] == [(0, True), (1, True)]  # both read back right
    g = test.gpus[0]
    assert g.tested_bytes > 0.9 * (1 << 18) and g.passes == 1 and g.gbps
    assert [p.name for p in g.patterns] == list(patterns.SHORT) and g.mismatches == 0
    assert g.before == g.after and g.before is not None, "GPU 0's counters did not move"
    results = judged(ctx, "mem.test", memtest=test)
    assert results[0][1] is Status.PASS, f"good memory with unchanged counters: {results[0]}"
    before = readings[0][1].ecc_uncorrected
    assert before is not None and results[1][1] is Status.FAIL, f"an ECC error during the test: {results[1]}"
    assert f"volatile uncorrected ECC {before} → {before + 1}" in results[1][2]


@pytest.mark.slow
def test_a_stuck_bit_and_an_error_each_fail_their_own_gpu_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One child of three devices for two claims: GPU 1 has a stuck bit, GPU 2 raises a CUDA error;
    each fails for its own reason and GPU 0 passes."""
    fake_devices.install(tmp_path, monkeypatch, "several", modes={1: "stuck", 2: "raise"})
    ctx = context({**fake_devices.CPU, "memtest": fake_devices.settings("memtest", devices=3)})
    test, _ = memtest.run(ctx, levels.LEVELS[2], 0.0)
    assert test is not None
    good, stuck, raised = test.gpus
    assert [g.ok for g in test.gpus] == [True, True, False]  # ok: finished without an exception
    assert good.mismatches == 0 and stuck.mismatches > 0 and stuck.error == ""
    walking = next(p for p in stuck.patterns if p.name == "walking_ones")
    assert walking.mismatches and walking.bits == 1 << 7 and walking.first_address is not None
    assert raised.error == "RuntimeError: CUDA error: an illegal memory access was encountered"
    results = judged(ctx, "mem.test", memtest=test)
    assert [(t, s) for t, s, _ in results] == [("GPU 0", Status.PASS), ("GPU 1", Status.FAIL), ("GPU 2", Status.FAIL)]
    assert "read back wrong" in results[1][2] and "bits 0x0000000000000080" in results[1][2]
    assert "read back wrong" not in results[2][2]


@pytest.mark.slow
def test_a_hang_is_pinned_to_its_gpu_and_the_child_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_devices.install(tmp_path, monkeypatch, "hang", bad=1)
    monkeypatch.setattr(levels, "STALL_SECONDS", 5.0)
    ctx = context()
    begun = time.monotonic()
    test, _ = memtest.run(ctx, levels.LEVELS[2], 0.0)
    assert time.monotonic() - begun < 60
    assert test is not None and [(g.gpu_index, g.ok) for g in test.gpus] == [(0, True), (1, False)]
    assert (
        test.gpus[1].error
        == "the test process stalled: no progress for 5 s (hung, e.g. in a GPU kernel) while testing this GPU"
    )
    assert ctx.notes == []  # a hang is a finding, not something that could not run


class BudgetEndsOnceTesting(Progress):
    """The budget runs out 2 s after the test started testing (however long torch took to import)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def update(self, completed: float, detail: str = "") -> None:
        self.ctx.budget_end = min(self.ctx.budget_end, time.monotonic() + 2.0)


@pytest.mark.slow
def test_the_budget_cuts_a_long_test_short_and_says_so() -> None:
    ctx = context()
    ctx.progress = BudgetEndsOnceTesting(ctx)
    test, _ = memtest.run(ctx, levels.LEVELS[4], 600.0)  # a long test of 10 minutes
    assert test is not None and test.cut_short.startswith("the memory test was cut short")
    assert ctx.notes == [test.cut_short]
    assert judged(ctx, "mem.test", memtest=test)[-1][1] is Status.SKIP


@pytest.mark.slow
def test_ctrl_c_kills_the_child_and_its_memory_goes_with_it() -> None:
    ctx = context()
    pids: list[int] = []

    def interrupt(event: dict[str, Any]) -> None:
        if event.get("kind") == "allocated":
            raise KeyboardInterrupt

    events = Events(interrupt)
    real_start = collect.start

    def spy(args: Any, **kwargs: Any) -> Any:
        running = real_start(args, **kwargs)
        pids.append(running.proc.pid)
        return running

    settings = memtest.settings(levels.LEVELS[4], 600.0, fake_devices.CPU["memtest"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collect, "start", spy)
        with pytest.raises(KeyboardInterrupt):
            collect.run_child(ctx, [str(script("memtest")), collect.settings_json(settings)], events)
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)  # the child's whole process group is gone


@pytest.mark.slow
def test_a_child_whose_parent_goes_away_ends_itself(tmp_path: Path) -> None:
    """The parent is killed without reaping it (SIGKILL, a crashed gpudiag): the child notices."""
    parent = tmp_path / "parent.py"
    settings = fake_devices.settings("stress", seconds=600.0, devices=1)
    parent.write_text(
        "import json, os, subprocess, sys\n"
        f"settings = json.dumps({{**{settings!r}, 'parent': os.getpid()}})\n"
        f"child = subprocess.Popen([sys.executable, {str(script('stress'))!r}, settings], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
    )
    done = subprocess.run([sys.executable, str(parent)], capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.split()[0])
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the orphaned child kept running")


# --- the stress --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_stress_times_windows_and_rechecks_the_product() -> None:
    ctx = context()
    ctx.sampler.start()
    try:
        test, why = stress.run(ctx, 1.0)
    finally:
        ctx.sampler.stop()
    assert why == "" and test is not None
    for g in test.gpus:
        assert g.ok and g.windows >= 3 and g.checks >= 1 and g.result_errors == 0
        assert g.tflops_sustained is not None and g.tflops_sustained > 0
        assert g.samples is not None and g.samples.samples >= 1  # NVML was read while it ran
        assert g.before is not None and g.after == g.before


@pytest.mark.slow
def test_a_slow_gpu_is_a_straggler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_devices.install(tmp_path, monkeypatch, "slow", bad=1)
    monkeypatch.setitem(fake_devices.CPU, "stress", fake_devices.settings("stress", seconds=2.0))
    ctx = context()
    test, _ = stress.run(ctx, 2.0)
    assert test is not None
    fast, slow = (g.tflops_sustained or 0.0 for g in test.gpus)
    assert slow < 0.85 * fast
    results = judged(ctx, "stress.gemm", stress=test)
    assert results[1][1] is Status.FAIL and results[1][2].startswith("straggler: sustained")


@pytest.mark.slow
def test_a_crash_under_stress_fails_every_gpu_still_under_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_devices.install(tmp_path, monkeypatch, "crash", bad=1, delay=0.3)
    ctx = context()
    test, _ = stress.run(ctx, 5.0)
    assert test is not None and [g.ok for g in test.gpus] == [False, False]
    assert "crashed with SIGABRT while stressing this GPU (and GPU" in test.gpus[1].error


# --- the all-reduce ----------------------------------------------------------------------------


@pytest.mark.slow
def test_an_all_reduce_across_two_ranks_with_gloo() -> None:
    ctx = context()
    found, why = allreduce.run(ctx, [0, 1])
    assert why == "" and found is not None and found.error == "" and found.correct is True
    assert [s.nbytes for s in found.sizes] == [4096, 65536] and all(s.seconds > 0 for s in found.sizes)
    assert found.backend == "gloo" and found.gpu_indices == (0, 1)
    assert judged(ctx, "link.nccl", allreduce=found)[0][1] is Status.PASS  # no topology recorded: not judged


@pytest.mark.slow
def test_a_rank_that_fails_ends_the_others_and_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_devices.install(tmp_path, monkeypatch, "raise", bad=1)
    ctx = context()
    begun = time.monotonic()
    found, _ = allreduce.run(ctx, [0, 1])
    assert time.monotonic() - begun < 60  # rank 0 did not wait for gloo's timeout
    assert found is not None and found.error.startswith("rank 1 (GPU 1) failed: RuntimeError: CUDA error")
    assert judged(ctx, "link.nccl", allreduce=found)[0][1] is Status.FAIL


def test_one_gpu_has_nothing_to_all_reduce() -> None:
    assert allreduce.run(context(), [0]) == (None, "one GPU: nothing to all-reduce across")


# --- copies through bench-transfer's engine ------------------------------------------------------


def scenario(source: MachineSource, monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    gpus = source.read().gpus
    uuids = [(g.uuid.value or "").removeprefix("GPU-") for g in gpus[:2]]
    rates = {"h2d_pinned": 53e9, "d2h_pinned": 54e9, "peer": 380e9, "d2d": 1300e9}
    s = Scenario(devices=[device(0, uuid=uuids[0]), device(1, uuid=uuids[1])], rates=rates)
    monkeypatch.setenv(SCENARIO_ENV, dataclasses.replace(s, **changes).to_json())


@pytest.mark.slow
def test_pcie_peer_and_memory_copies_are_judged_as_bench_transfer_judges_them(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context({**fake_devices.CPU, "links": {"primitives": SPEC}})
    scenario(ctx.source, monkeypatch)
    found, why = links.run(ctx, pcie=True, peer=True, d2d=True)
    assert why == "" and found is not None and found.failure == "" and ctx.notes == []
    pcie = judged(ctx, "link.pcie", links=found)
    assert [(t, s) for t, s, _ in pcie] == [("GPU 0", Status.PASS), ("GPU 1", Status.PASS)]
    assert pcie[0][2].startswith("H2D 53.0, D2H 54.0 GB/s on Gen5 x16 (healthy ≥ 44.0), latency ")
    peer = judged(ctx, "link.peer", links=found)
    assert [s for _, s, _ in peer] == [Status.PASS, Status.PASS] and "to GPU 1: 380 GB/s" in peer[0][2]
    assert "(NVLink" not in peer[0][2]  # this example recorded no topology: judged by the board's figure only
    d2d = judged(ctx, "mem.bandwidth", links=found)
    assert [s for _, s, _ in d2d] == [Status.PASS, Status.PASS] and d2d[0][2].startswith("D2D 1300 GB/s")


@pytest.mark.slow
def test_slow_host_copies_and_wrong_peer_data_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context({**fake_devices.CPU, "links": {"primitives": SPEC}})
    scenario(ctx.source, monkeypatch, rates={"h2d_pinned": 12e9, "d2h_pinned": 54e9, "peer": 380e9}, corrupt=("peer",))
    found, _ = links.run(ctx, pcie=True, peer=True, d2d=False)
    assert found is not None
    pcie = judged(ctx, "link.pcie", links=found)
    assert pcie[0][1] is Status.FAIL and pcie[0][2].startswith("H2D 12.0 GB/s below expected (≥ 44.0 on Gen5 x16)")
    peer = judged(ctx, "link.peer", links=found)
    assert peer[0][1] is Status.FAIL and "wrote wrong data" in peer[0][2]


@pytest.mark.slow
def test_without_cuda_the_copy_tests_could_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context({**fake_devices.CPU, "links": {"primitives": SPEC}})
    scenario(ctx.source, monkeypatch, no_cuda="torch 2.13.0 is a CPU-only build")
    found, why = links.run(ctx, pcie=True, peer=True, d2d=False)
    assert found is None and "torch 2.13.0 is a CPU-only build" in why and ctx.notes == [why]


# --- the whole run ---------------------------------------------------------------------------


class XidDuringStress(Progress):
    def __init__(self, source: MachineSource) -> None:
        self.source, self.phases = source, []

    def phase(self, name: str, total: float | None = None) -> None:
        self.phases.append(name)
        if name.startswith("GEMM stress"):
            self.source.lib.inject_xid(1, 79)


@pytest.mark.slow
def test_the_whole_deep_run_at_level_3(monkeypatch: pytest.MonkeyPatch) -> None:
    source = open_source(MACHINE)
    scenario(source, monkeypatch)
    machine = source.read()
    progress = XidDuringStress(source)
    plan = levels.DeepPlan(
        levels.LEVELS[3],
        ("mem.test", "link.pcie", "link.peer", "link.nccl", "stress.gemm"),
        600.0,
        overrides={**fake_devices.CPU, "links": {"primitives": SPEC}},
    )
    torch_runtime: Any = None
    deep, notes = run.run(plan, source, machine, torch_runtime, None, time.monotonic(), progress)
    assert notes == [] and deep.level == 3
    assert progress.phases[0] == "memory test" and progress.phases[-1].startswith("GEMM stress")
    assert deep.memtest and deep.links and deep.allreduce and deep.stress
    assert [(x.gpu_index, x.xid, x.phase) for x in deep.xids] == [(1, 79, "stress")]
    facts = Facts(machine, Reading.missing(Reason.UNAVAILABLE), None, deep=deep)  # type: ignore[arg-type]
    results = rules.run(facts, Options(), only=("mem", "link", "stress"), level=3)
    failed = [(r.id, r.target) for r in results if r.status is Status.FAIL]
    assert ("stress.gemm", "GPU 1") in failed  # the XID during the stress
    assert not [r for r in results if r.id == "mem.test" and r.status is not Status.PASS]
