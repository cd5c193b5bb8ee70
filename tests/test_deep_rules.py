"""The deep diagnostics' rules (check --level 2-4) on built facts: pass, warn, fail and skip, each
figure and threshold; and the pure pieces they lean on (peer judgement, the all-reduce's link,
bus bandwidth, counters, budget shares, the busy-GPU refusal).

`tests/test_check_rules.py` counts these cases towards its coverage of every rule and status.
"""

from __future__ import annotations

import msgspec
import pytest

from gpudiag.bench.link import Link
from gpudiag.checks import Action, Facts, Options, Status, rules
from gpudiag.checks.deep import allreduce, levels, run
from gpudiag.checks.deep.facts import (
    ALLREDUCE,
    MEMTEST,
    STRESS,
    Allreduce,
    AllreduceSize,
    D2dGpu,
    DeepFacts,
    GpuSamples,
    HostCopy,
    Links,
    MemoryCounters,
    Memtest,
    MemtestGpu,
    PatternResult,
    PcieGpu,
    PeerPair,
    Stress,
    StressGpu,
    Xid,
)
from gpudiag.checks.deep.links import judge_pair
from gpudiag.checks.deep.stress import figures
from gpudiag.errors import UsageError
from gpudiag.model import FactGroup
from gpudiag.probe.collect import collect, open_source
from tests.test_check_rules import Case, facts

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP
GiB = 1 << 30
CLEAN = MemoryCounters(0, 0, 0, 0, False, 0, False)


def deep(level: int = 4, **phases: object) -> Facts:
    """The healthy 8×H100 node with these deep results."""
    return msgspec.structs.replace(facts("h100x8-healthy"), deep=DeepFacts(level=level, **phases))  # type: ignore[arg-type]


# --- the memory test ----------------------------------------------------------------------


def mem_gpu(index: int = 0, **changes: object) -> MemtestGpu:
    base = MemtestGpu(
        gpu_index=index,
        torch_index=index,
        ok=True,
        error="",
        free_bytes=79 * GiB,
        total_bytes=80 * GiB,
        tested_bytes=75 * GiB,
        passes=1,
        seconds=10.0,
        bytes_moved=20_000 * GiB,
        patterns=tuple(PatternResult(name, 0) for name in ("address", "random")),
        before=CLEAN,
        after=CLEAN,
    )
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def memtest(*gpus: MemtestGpu, cut: str = "") -> Memtest:
    return Memtest("short", ("address", "random"), gpus or (mem_gpu(),), cut)


STUCK = PatternResult("walking_ones", 3, 0x7F0000001000, 0x7F0000009000, ((0x7F0000001000, 128, 0),), 0x80)

MEMTEST_CASES = [
    Case("mem.test", PASS, lambda: deep(memtest=memtest()), says="75.0 GiB of 80.0 GiB (94%) written and verified"),
    Case("mem.test", PASS, lambda: deep(memtest=memtest()), says="untested: 5.0 GiB in use", name="limits"),
    Case(
        "mem.test",
        FAIL,
        lambda: deep(memtest=memtest(mem_gpu(patterns=(PatternResult("address", 0), STUCK)))),
        says="3 word(s) read back wrong (walking_ones 3 at 0x7f0000001000–0x7f0000009000, bits 0x0000000000000080)",
        name="mismatch",
    ),
    Case(
        "mem.test",
        FAIL,
        lambda: deep(memtest=memtest(mem_gpu(after=MemoryCounters(0, 2, 0, 1, True, 0, False)))),
        says="volatile uncorrected ECC 0 → 2, uncorrectable row remaps 0 → 1, row remap pending 0 → 1",
        name="ecc",
    ),
    Case("mem.test", FAIL, lambda: deep(memtest=memtest(), xids=(Xid(0, 48, MEMTEST),)), says="Xid 48", name="xid"),
    Case(
        "mem.test",
        FAIL,
        lambda: deep(memtest=memtest(mem_gpu(ok=False, error="the test process stalled: no progress for 120 s"))),
        says="no progress",
        name="hung",
    ),
    Case(
        "mem.test",
        WARN,
        lambda: deep(memtest=memtest(mem_gpu(tested_bytes=10 * GiB))),
        says="only 10.0 GiB of 80.0 GiB tested",
        name="little",
    ),
    Case("mem.test", SKIP, lambda: facts("h100x8-healthy"), says="not run"),
    Case("mem.test", SKIP, lambda: deep(memtest_why="the memory test could not start: x"), says="could not start"),
    Case(
        "mem.test",
        (PASS, SKIP),
        lambda: deep(memtest=memtest(cut="the memory test was cut short: the run's --budget of 60 s ran out")),
        says="GPUs not listed",
        name="cut",
    ),
]


def test_a_mismatch_names_the_gpu_and_asks_for_an_rma_after_a_retry() -> None:
    found = rules.run(deep(memtest=memtest(mem_gpu(3, patterns=(STUCK,)))), Options(), only=("mem.test",), level=2)
    assert [(r.target, r.status, r.action) for r in found] == [("GPU 3", FAIL, Action.RMA)]
    assert "--level 4 --only mem.test" in found[0].fix


# --- copies: PCIe, peers, device memory -------------------------------------------------------


def copy(direction: str, gbps: float, **changes: object) -> HostCopy:
    base = HostCopy(direction, 256 << 20, gbps, "healthy", 44.0, "Gen5 x16", "Gen5 x16", verified=True)
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def pcie(*copies: HostCopy) -> Links:
    return Links(
        pcie=(PcieGpu(0, 0, copies or (copy("h2d", 53.1), copy("d2h", 54.0)), {"h2d": 8.2, "d2h": 9.0}),),
        peers=None,
        d2d=None,
    )


def pair(dst: int, gbps: float | None = 370.0, **changes: object) -> PeerPair:
    base = PeerPair(0, dst, 0, dst, True, gbps, 2.1, True, "", 18, "NODE", "OK", "healthy", 310.25, "NVLink x18")
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def peers(*pairs: PeerPair) -> Links:
    return Links(pcie=None, peers=pairs, d2d=None, devices=8)


def d2d(**changes: object) -> Links:
    base = D2dGpu(0, 0, 512 << 20, 1300.0, "healthy", 1053.0, 1675.0, verified=True)
    return Links(None, None, (msgspec.structs.replace(base, **changes),))  # type: ignore[arg-type]


LINK_CASES = [
    Case("link.pcie", PASS, lambda: deep(links=pcie()), says="H2D 53.1, D2H 54.0 GB/s on Gen5 x16 (healthy ≥ 44.0)"),
    Case("link.pcie", PASS, lambda: deep(links=pcie()), says="latency 8.2/9.0 µs", name="latency"),
    Case(
        "link.pcie",
        FAIL,
        lambda: deep(
            links=pcie(
                copy("h2d", 12.1, verdict="below_expected", link_loaded="Gen3 x16", behaves_like="Gen3 x16", cause="c"),
                copy("d2h", 54.0),
            )
        ),
        says="H2D 12.1 GB/s below expected (≥ 44.0 on Gen5 x16), behaves like Gen3 x16",
        name="slow",
    ),
    Case("link.pcie", FAIL, lambda: deep(links=pcie(copy("h2d", 53.0, verified=False))), says="wrong data"),
    Case("link.pcie", FAIL, lambda: deep(links=pcie(copy("h2d", 53.0, error="out of memory: x"))), name="error"),
    Case(
        "link.pcie",
        (PASS, FAIL),
        lambda: deep(links=msgspec.structs.replace(pcie(), failure="h2d_pinned cuda:0 256MiB did not finish")),
        says="did not finish",
        name="hung",
    ),
    Case("link.pcie", SKIP, lambda: deep(links_why="the copy tests could not run: x"), says="could not run"),
    Case(
        "link.peer",
        PASS,
        lambda: deep(links=peers(*(pair(i) for i in range(1, 8)))),
        says="to GPU 1-7: 370 GB/s (NVLink x18, healthy ≥ 310), latency 2.1 µs, peer access on",
    ),
    Case(
        "link.peer",
        FAIL,
        lambda: deep(
            links=peers(
                pair(1), pair(2, 21.0, verdict="below_expected", note="PCIe speed though NVML reports NVLink x18")
            )
        ),
        says="to GPU 2: 21.0 GB/s (PCIe speed though NVML reports NVLink x18, healthy ≥ 310)",
        name="slow",
    ),
    Case("link.peer", FAIL, lambda: deep(links=peers(pair(1, verified=False))), says="wrote wrong data"),
    Case("link.peer", SKIP, lambda: deep(links=peers()), says="one GPU"),
    Case("link.peer", SKIP, lambda: facts("h100x8-healthy"), name="not run"),
    Case("mem.bandwidth", PASS, lambda: deep(links=d2d()), says="D2D 1300 GB/s (healthy ≥ 1053 GB/s)"),
    Case(
        "mem.bandwidth",
        PASS,
        lambda: deep(links=d2d(verdict="not_judged", note="no memory figure for X")),
        says="not judged: no memory figure for X",
        name="unknown",
    ),
    Case(
        "mem.bandwidth",
        FAIL,
        lambda: deep(links=d2d(gbps=600.0, verdict="below_expected")),
        says="D2D 600 GB/s, below expected (healthy ≥ 1053 GB/s of a 1675 GB/s peak)",
        name="slow",
    ),
    Case("mem.bandwidth", FAIL, lambda: deep(links=d2d(verified=False)), says="wrong data"),
    Case("mem.bandwidth", SKIP, lambda: deep(links=pcie()), name="level 2"),
]


# --- the all-reduce --------------------------------------------------------------------------


def reduced(
    busbw: float = 400.0, path: str = "NVSwitch", expected: float | None = 365.0, **changes: object
) -> Allreduce:
    ranks, nbytes = 8, 512 << 20
    seconds = nbytes * 2 * (ranks - 1) / ranks / (busbw * 1e9)
    base = Allreduce(ranks, "nccl", (AllreduceSize(nbytes, seconds),), True, "", path, expected, tuple(range(8)))
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


NCCL_CASES = [
    Case(
        "link.nccl",
        PASS,
        lambda: deep(allreduce=reduced()),
        says="busbw 400 GB/s (algbw 229) at 512.0 MiB across 8 GPUs (nccl), NVSwitch: healthy ≥ 182; sums correct",
    ),
    Case("link.nccl", PASS, lambda: deep(allreduce=reduced(path="", expected=None)), says="not judged", name="unknown"),
    Case("link.nccl", FAIL, lambda: deep(allreduce=reduced(40.0)), says="below half the NVSwitch figure", name="slow"),
    Case(
        "link.nccl",
        WARN,
        lambda: deep(allreduce=reduced(8.0, "PCIe", 24.0)),
        says="below half the PCIe figure (24.0 GB/s",
        name="pcie",
    ),
    Case("link.nccl", FAIL, lambda: deep(allreduce=reduced(correct=False)), says="summed wrong", name="sum"),
    Case(
        "link.nccl",
        FAIL,
        lambda: deep(allreduce=reduced(error="rank 3 (GPU 3) failed: NCCL error: unhandled system error", sizes=())),
        says="rank 3 (GPU 3) failed",
        name="rank",
    ),
    Case("link.nccl", FAIL, lambda: deep(allreduce=reduced(), xids=(Xid(2, 79, ALLREDUCE),)), says="Xid 79 during"),
    Case("link.nccl", SKIP, lambda: deep(allreduce_why="one GPU: nothing to all-reduce across"), says="one GPU"),
]


def test_bus_bandwidth_is_nccl_tests_formula() -> None:
    """nccl-tests' PERFORMANCE.md: all-reduce busbw = algbw × 2(n−1)/n."""
    size = AllreduceSize(1_000_000_000, 0.01)  # 1 GB in 10 ms: algbw 100 GB/s
    assert size.algbw_gbps == pytest.approx(100.0)
    assert size.busbw_gbps(8) == pytest.approx(175.0)
    assert size.busbw_gbps(2) == pytest.approx(100.0)


def test_the_all_reduce_is_judged_against_the_link_the_topology_shows() -> None:
    topology = open_source("h100x8-nvswitch").read(frozenset({FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PCIE}))
    assert allreduce.expectation(topology.gpus, list(range(8))) == ("NVSwitch", pytest.approx(365.0))
    assert allreduce.expectation(collect("h100x8-healthy").gpus, list(range(8))) == ("", None)  # no topology recorded
    pcie_only = collect("a100x2-pcie-one-at-x8")
    assert allreduce.expectation(pcie_only.gpus, [0, 1])[0] in ("PCIe", "")


# --- the stress ------------------------------------------------------------------------------

SAMPLED = GpuSamples(600, 71, 699.0, 690.0, 700.0, 1755, 1900, 1980, {0x4: 580})


def stressed(index: int, tflops: float = 675.0, **changes: object) -> StressGpu:
    base = StressGpu(
        index,
        index,
        True,
        "",
        600.0,
        600,
        tflops,
        tflops - 10,
        tflops + 5,
        tflops,
        0,
        20,
        SAMPLED,
        CLEAN,
        CLEAN,
        "bfloat16",
    )
    return msgspec.structs.replace(base, **changes)  # type: ignore[arg-type]


def stress(*gpus: StressGpu) -> Stress:
    return Stress(600.0, "bfloat16", 8192, gpus or tuple(stressed(i) for i in range(8)))


def one_off(index: int, **changes: object) -> Stress:
    return stress(*(stressed(i, **changes) if i == index else stressed(i) for i in range(8)))


STRESS_CASES = [
    Case(
        "stress.gemm",
        PASS,
        lambda: deep(stress=stress()),
        says="sustained 675 TFLOP/s bf16 for 600 s (min 665), max 71 °C, 699 of 700 W, SM 1755–1980 MHz",
    ),
    Case("stress.gemm", PASS, lambda: deep(stress=stress()), says="untested: fp64, power swings", name="limits"),
    Case(
        "stress.gemm",
        PASS,
        lambda: deep(stress=stress(), xid_watch="XIDs not watched on every GPU (Not Supported)"),
        says="power swings, Xids not watched",
        name="no xids",
    ),
    Case(
        "stress.gemm",
        (PASS, PASS, PASS, FAIL, PASS, PASS, PASS, PASS),
        lambda: deep(stress=one_off(3, tflops=520.0)),
        says="straggler: sustained 520 TFLOP/s, 23% below the median of its 7 peer(s) (675)",
        name="straggler",
    ),
    Case(
        "stress.gemm",
        (PASS, FAIL, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: deep(stress=one_off(1, samples=msgspec.structs.replace(SAMPLED, events={0x4: 500, 0x40: 34}))),
        says="hardware throttling under load: HwThermalSlowdown in 34 of 600 samples (max 71 °C)",
        name="throttle",
    ),
    Case(
        "stress.gemm",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: deep(stress=one_off(0, samples=msgspec.structs.replace(SAMPLED, events={0x20: 3}))),
        says="SwThermalSlowdown in 3 of 600 samples",
        name="sw thermal",
    ),
    Case(
        "stress.gemm",
        (WARN, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: deep(stress=one_off(0, tflops_first=800.0, tflops_last=600.0, tflops_sustained=675.0)),
        says="slowed down over the run: 800 → 600 TFLOP/s",
        name="slowdown",
    ),
    Case(
        "stress.gemm",
        (PASS, PASS, FAIL, PASS, PASS, PASS, PASS, PASS),
        lambda: deep(stress=one_off(2, result_errors=2)),
        says="2 of 20 re-computed products differed",
        name="wrong",
    ),
    Case(
        "stress.gemm",
        (FAIL, PASS, PASS, PASS, PASS, PASS, PASS, PASS),
        lambda: deep(stress=stress(), xids=(Xid(0, 63, STRESS),)),
        says="Xid 63 during the stress",
        name="xid",
    ),
    Case(
        "stress.gemm",
        (PASS, PASS, PASS, PASS, PASS, FAIL, PASS, PASS),
        lambda: deep(stress=one_off(5, after=MemoryCounters(3, 0, 0, 0, False, 0, False))),
        says="volatile corrected ECC 0 → 3",
        name="ecc",
    ),
    Case(
        "stress.gemm",
        (FAIL, PASS),
        lambda: deep(stress=stress(stressed(0, ok=False, error="the test process crashed with SIGSEGV"), stressed(1))),
        says="SIGSEGV",
        name="crash",
    ),
    Case("stress.gemm", SKIP, lambda: deep(level=2), says="not run"),
]

CASES: list[Case] = [*MEMTEST_CASES, *LINK_CASES, *NCCL_CASES, *STRESS_CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.check_id}-{c.name or c.expected}")
def test_rule(case: Case) -> None:
    from tests.test_check_rules import test_rule as check

    check(case)


def test_a_straggler_of_another_model_is_not_compared_with_these() -> None:
    f = deep(stress=one_off(3, tflops=300.0))
    gpus = list(f.machine.gpus)
    gpus[3] = msgspec.structs.replace(gpus[3], name=msgspec.structs.replace(gpus[3].name, value="NVIDIA A100"))
    f = msgspec.structs.replace(f, machine=msgspec.structs.replace(f.machine, gpus=tuple(gpus)))
    found = rules.run(f, Options(), only=("stress.gemm",), level=3)
    assert all(r.status is PASS for r in found), [r.finding for r in found if r.status is not PASS]


def test_level_one_runs_no_deep_check_and_each_deep_check_declares_its_level() -> None:
    at_one = {r.id for r in rules.run(deep(memtest=memtest()), Options())}
    assert not at_one & {"mem.test", "link.pcie", "stress.gemm"}
    levels_of = {c.id: c.level for c in rules.CHECKS if c.level > 1}
    assert levels_of == {
        "mem.test": 2,
        "mem.bandwidth": 4,
        "link.pcie": 2,
        "link.peer": 2,
        "link.nccl": 2,
        "stress.gemm": 3,
    }
    assert all(c.needs_gpu and c.needs_torch(Options()) for c in rules.CHECKS if c.level > 1)
    assert rules.deeper(("mem",), 1) == 2 and rules.deeper(("stress.gemm",), 2) == 3
    assert rules.deeper(("health", "mem"), 1) is None  # health runs at level 1


# --- pure pieces -----------------------------------------------------------------------------


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("gbps", "access", "link", "name", "verdict", "says"),
    [
        (372.0, True, (18, "NODE", "OK"), H100, "healthy", "NVLink x18"),
        (40.0, True, (18, "NODE", "OK"), H100, "below_expected", "NVLink x18"),
        (25.0, True, (4, "SYS", "OK"), "Some NVLink GPU", "below_expected", "PCIe speed though NVML reports NVLink x4"),
        (90.0, True, (4, "SYS", "OK"), "Some NVLink GPU", "not_judged", "no reference figure"),
        (24.5, True, (0, "PXB", "OK"), "NVIDIA A40", "healthy", "PCIe PXB (Gen4 x16)"),
        (9.0, True, (0, "PIX", "OK"), "NVIDIA A40", "below_expected", "PCIe PIX"),
        (9.0, True, (0, "SYS", "OK"), "NVIDIA A40", "not_judged", "through the CPU (SYS)"),
        (9.0, False, (0, "SYS", "ChipsetNotSupported"), "NVIDIA A40", "not_judged", "ChipsetNotSupported"),
        (9.0, False, (0, "PIX", "OK"), "NVIDIA A40", "below_expected", "though NVML reports P2P"),
        (9.0, True, None, "NVIDIA A40", "not_judged", "topology not known"),
    ],
)
def test_a_peer_copy_is_judged_against_what_links_the_pair(
    gbps: float, access: bool, link: tuple[int, str, str] | None, name: str, verdict: str, says: str
) -> None:
    found, _, note = judge_pair(gbps, access, link, name, (Link(4, 16), Link(4, 16)))
    assert found == verdict and says in note


def test_counters_name_what_rose() -> None:
    assert CLEAN.increases(CLEAN) == []
    assert CLEAN.increases(MemoryCounters(1, 0, 0, 0, False, 0, False)) == ["volatile corrected ECC 0 → 1"]
    assert MemoryCounters().increases(MemoryCounters(5, 5)) == []  # not supported before: nothing to compare


def test_stress_figures_leave_out_the_warm_up() -> None:
    rates = [900.0] + [600.0] * 18 + [500.0]
    got = figures(rates)
    assert got["tflops_sustained"] == 600.0 and got["tflops_first"] == 750.0 and got["tflops_last"] == 550.0
    assert figures([])["tflops_sustained"] is None


def test_the_budget_shrinks_the_elastic_tests_alike() -> None:
    level4 = levels.LEVELS[4]
    assert levels.shares(level4, 5400, 4) == (900.0, 1200.0)
    memtest_s, stress_s = levels.shares(level4, 1200, 4)
    assert memtest_s / stress_s == pytest.approx(900 / 1200) and memtest_s + stress_s < 1200
    assert levels.shares(level4, 10, 4) == (levels.MIN_MEMTEST_SECONDS, levels.MIN_STRESS_SECONDS)
    assert levels.shares(levels.LEVELS[2], 10, 3) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((5, None, False, False, False, None, False), "--level 5: expected 1 to 4"),
        ((1, 60.0, False, False, False, None, False), "--budget bounds the deep tests"),
        ((1, None, True, False, False, None, False), "--force lets the deep tests run"),
        ((2, -1.0, False, False, False, None, False), "--budget -1.0: must be a positive"),
        ((2, float("nan"), False, False, False, None, False), "must be a positive"),
        ((2, None, False, True, False, None, False), "leave out --quick"),
        ((3, None, False, False, True, None, False), "leave out --no-torch"),
        ((2, None, False, False, False, "prolog", False), "leave out --mode"),
        ((2, None, False, False, False, None, True), "a replay has none to test"),
    ],
)
def test_level_options_that_do_not_go_together(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        levels.usage(levels.parse(args[0]), *args[1:])


def test_busy_gpus_are_those_with_other_compute_processes(machine) -> None:  # type: ignore[no-untyped-def]
    busy = run.busy(machine("h100x8-training-64procs"))
    assert busy and busy[0].startswith("GPU 0 (PID ")
    pids = [p.pid for g in machine("h100x8-training-64procs").gpus for p in g.processes.value or ()]
    assert run.busy(machine("h100x8-training-64procs"), own=pids) == []  # the check's own children
    assert run.busy(machine("h100x8-healthy")) == []
