"""The deep diagnostics' checks (``check --level 2-4``) and their thresholds, each with its source.

Every check judges what :mod:`gpudiag.checks.deep.run` found (``Facts.deep``); a test that was not
run is SKIP with the reason, and a test the run could not finish is also a note (exit 5): a skipped
deep test never makes a run READY by itself. A passing result says what the test covered and,
after "untested:", what it did not.

Thresholds (docs/commands/check.md has the table and the sources):

- ``mem.test``: any word read back wrong, any rise of NVML's volatile ECC counts, row remaps or
  retired pages during the test, any Xid: FAIL (DCGM's memory test and memtest fail on any error);
  less than :data:`MEMTEST_MIN_SHARE` of the memory tested: WARN (our choice);
- ``link.pcie``, ``mem.bandwidth``: bench-transfer's judgement (gpudiag/bench/link.py: the PCIe
  pinned-copy floors per generation, 85 % of the typical D2D share of the datasheet peak);
- ``link.peer``: :func:`gpudiag.checks.deep.links.judge_pair`;
- ``link.nccl``: busbw (nccl-tests' PERFORMANCE.md: algbw × 2(n−1)/n for all-reduce, "a number
  comparable to the hardware peak bandwidth, independently of the number of ranks") below
  :data:`ALLREDUCE_SHARE` of the link's typical per-direction figure: FAIL on NVLink/NVSwitch, WARN
  on PCIe (our choice: a host's PCIe topology varies too much to fail it);
- ``stress.gemm``: HW slowdown, HW thermal slowdown or HW power brake while loaded: FAIL (DCGM's
  diagnostics treat these clock events as failures; SW power capping is normal at full load);
  SW thermal slowdown: WARN; a GPU whose sustained TFLOP/s is below :data:`STRAGGLER_SHARE` of the
  median of its peers of the same model: FAIL (our choice); a product that differs from the
  first: FAIL.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.checks.base import (
    INTERCONNECT,
    MEMTEST,
    STRESS,
    Volatile,
    always,
    check,
    result,
)
from gpudiag.readings import CLOCK_EVENT_NAMES, clock_event_bits

if TYPE_CHECKING:
    from gpudiag.checks.deep.facts import (
        D2dGpu,
        DeepFacts,
        GpuSamples,
        MemoryCounters,
        MemtestGpu,
        PcieGpu,
        PeerPair,
        StressGpu,
    )

MEMTEST_MIN_SHARE = 0.5  # less of the GPU's memory tested than this: WARN (our choice)
STRAGGLER_SHARE = 0.85  # sustained TFLOP/s below this share of its peers' median: FAIL (our choice)
SLOWDOWN_SHARE = 0.80  # last tenth of the stress below this share of the first tenth: WARN (our choice)
ALLREDUCE_SHARE = 0.5  # busbw below this share of the link's typical figure (our choice)
HW_THROTTLE = clock_event_bits("HwSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown")
SW_THERMAL = clock_event_bits("SwThermalSlowdown")

_SEVERITY = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.FAIL: 2}
Problem = tuple[Status, str, str, Action | None]  # (status, finding, fix, action)


def _merge(check_id: str, area: str, target: str, problems: list[Problem], passed: str) -> CheckResult:
    """One result from everything found about one target: the worst status, every finding."""
    if not problems:
        return result(check_id, area, Status.PASS, passed, target=target)
    worst = max(problems, key=lambda p: _SEVERITY[p[0]])
    finding = "; ".join(p[1] for p in problems)
    return result(check_id, area, worst[0], finding, worst[2], target, worst[3])


def _not_run(check_id: str, area: str, facts: Facts, why: str) -> list[CheckResult]:
    return [result(check_id, area, Status.SKIP, why or facts.deep_skip_reason or "not run")]


def _label(gpu_index: int | None, torch_index: int) -> str:
    return f"GPU {gpu_index}" if gpu_index is not None else f"cuda:{torch_index}"


def _xids(deep: DeepFacts, phase: str, gpu_index: int | None) -> list[int]:
    return [x.xid for x in deep.xids if x.phase == phase and x.gpu_index == gpu_index]


def _xid_problem(xids: list[int], during: str) -> list[Problem]:
    if not xids:
        return []
    shown = ", ".join(str(x) for x in sorted(set(xids)))
    return [
        (
            Status.FAIL,
            f"Xid {shown} during {during}",
            "drain the node; look the Xid up in NVIDIA's Xid catalogue, reset the GPU and run the test again",
            Action.RESET,
        )
    ]


def _counter_problem(before: MemoryCounters | None, after: MemoryCounters | None, during: str) -> list[Problem]:
    if before is None or after is None:
        return []
    rose = before.increases(after)
    if not rose:
        return []
    return [
        (
            Status.FAIL,
            f"during {during}: {', '.join(rose)}",
            "drain the node; reset the GPU (it applies pending row remaps) and run "
            "`gpudiag check --level 4 --only mem.test`; replace the GPU (RMA) if errors come back",
            Action.RESET,
        )
    ]


def _size(n: float) -> str:
    from gpudiag.units import human_bytes

    return human_bytes(n)


def _num(x: float) -> str:
    """A figure with the digits that matter: 1234, 53.1, 0.042."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 1 else f"{x:.2g}"


def _span(values: Sequence[float], unit: str) -> str:
    low, high = _num(min(values)), _num(max(values))
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


# --- the memory test ------------------------------------------------------------------


@check(
    "mem.test",
    MEMTEST,
    "memory patterns over most of every GPU's free memory ([below](#deep-diagnostics---level-2-4))",
    fails=(
        "a word read back wrong (with GPU, address range, pattern and bits), a rise of the volatile ECC "
        "counts, row remaps or retired pages during the test, an Xid, a hang or crash; WARN: less than half "
        "the memory tested"
    ),
    scope=Scope.NODE,
    action=Action.RESET,
    needs_torch=always,
    needs_gpu=True,
    level=2,
    finding=Volatile("memory test failed", kinds=True),
)
def memory_test(facts: Facts, options: Options) -> list[CheckResult]:
    deep = facts.deep
    if deep is None or deep.memtest is None:
        return _not_run("mem.test", MEMTEST, facts, deep.memtest_why if deep else "")
    test = deep.memtest
    out = [_judge_memtest(deep, g, len(test.patterns)) for g in test.gpus]
    if test.cut_short:
        out.append(result("mem.test", MEMTEST, Status.SKIP, f"{test.cut_short}: the GPUs not listed were not finished"))
    return out or [result("mem.test", MEMTEST, Status.SKIP, "no GPU was tested")]


def _judge_memtest(deep: DeepFacts, g: MemtestGpu, patterns: int) -> CheckResult:
    from gpudiag.checks.deep.facts import MEMTEST as PHASE

    target = _label(g.gpu_index, g.torch_index)
    problems: list[Problem] = []
    if not g.ok:
        problems.append(
            (
                Status.FAIL,
                g.error or "the test did not finish",
                "drain the node; check `dmesg` for Xid errors, reset the GPU and run the memory test again",
                Action.RESET,
            )
        )
    if g.mismatches:
        bad = [p for p in g.patterns if p.mismatches]
        where = "; ".join(
            f"{p.name} {p.mismatches} at {_address_range(p.first_address, p.last_address)}"
            + (f", bits 0x{p.bits:016x}" if p.bits else "")
            for p in bad
        )
        problems.append(
            (
                Status.FAIL,
                f"{g.mismatches} word(s) read back wrong ({where})",
                "drain the node; reset the GPU and run `gpudiag check --level 4 --only mem.test`; "
                "replace the GPU (RMA) if it fails again",
                Action.RMA,
            )
        )
    problems += _counter_problem(g.before, g.after, "the memory test")
    problems += _xid_problem(_xids(deep, PHASE, g.gpu_index), "the memory test")
    share = g.tested_bytes / g.total_bytes if g.total_bytes else 0.0
    if g.ok and g.total_bytes and share < MEMTEST_MIN_SHARE:
        problems.append(
            (
                Status.WARN,
                f"only {_size(g.tested_bytes)} of {_size(g.total_bytes)} tested ({share:.0%}): the rest was in use",
                "run it again with the GPU idle (stop what uses its memory: see `gpudiag memory`)",
                Action.STOP_PROCESSES,
            )
        )
    rate = f", {_num(g.gbps)} GB/s" if g.gbps else ""
    counted = "ECC and remap counters unchanged" if g.before is not None and g.after is not None else "no ECC counters"
    counted += _unwatched(deep, g.gpu_index)
    passed = (
        f"{_size(g.tested_bytes)} of {_size(g.total_bytes)} ({share:.0%}) written and verified, {patterns} patterns "
        f"× {g.passes} pass(es), no mismatch, {counted}{rate}; untested: "
        f"{_size(max(0, g.total_bytes - g.tested_bytes))} in use or reserved"
    )
    return _merge("mem.test", MEMTEST, target, problems, passed)


def _unwatched(deep: DeepFacts, gpu_index: int | None) -> str:
    """ ", Xids not watched" when NVML could not report this GPU's Xid events."""
    watch = deep.xid_watch
    if watch and ("every GPU" in watch or (gpu_index is not None and f"GPU {gpu_index} " in watch)):
        return ", Xids not watched"
    return ""


def _address_range(first: int | None, last: int | None) -> str:
    if first is None:
        return "unlocated addresses"
    return f"0x{first:x}" if last in (None, first) else f"0x{first:x}–0x{last:x}"


@check(
    "mem.bandwidth",
    MEMTEST,
    "device memory bandwidth (D2D copies)",
    fails="below 85 % of the typical share of the memory's datasheet peak (bench-transfer's rule); wrong data",
    scope=Scope.NODE,
    action=Action.RESET,
    needs_torch=always,
    needs_gpu=True,
    level=4,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("memory bandwidth below expected"),
)
def memory_bandwidth(facts: Facts, options: Options) -> list[CheckResult]:
    deep = facts.deep
    if deep is None or deep.links is None or deep.links.d2d is None:
        return _not_run("mem.bandwidth", MEMTEST, facts, deep.links_why if deep else "")
    out = [_judge_d2d(g) for g in deep.links.d2d]
    if deep.links.failure:
        out.append(_links_failure("mem.bandwidth", MEMTEST, deep.links.failure))
    return out or [result("mem.bandwidth", MEMTEST, Status.SKIP, "no GPU was measured")]


def _judge_d2d(g: D2dGpu) -> CheckResult:
    target = _label(g.gpu_index, g.torch_index)
    if g.error:
        return result("mem.bandwidth", MEMTEST, Status.FAIL, g.error, "drain the node and reset the GPU", target)
    if g.verified is False:
        return result(
            "mem.bandwidth",
            MEMTEST,
            Status.FAIL,
            "a device-to-device copy wrote wrong data",
            "drain the node; run `gpudiag check --level 4 --only mem`; replace the GPU (RMA) if it fails again",
            target,
            Action.RMA,
        )
    rate = f"D2D {_num(g.gbps)} GB/s" if g.gbps is not None else "D2D not measured"
    if g.verdict == "below_expected":
        return result(
            "mem.bandwidth",
            MEMTEST,
            Status.FAIL,
            f"{rate}, below expected (healthy ≥ {_num(g.floor_gbps or 0)} GB/s of a "
            f"{_num(g.peak_gbps or 0)} GB/s peak)",
            "check memory clocks and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE`), other processes; reset the GPU",
            target,
        )
    if g.verdict == "healthy":
        floor = _num(g.floor_gbps or 0)
        passed = f"{rate} (healthy ≥ {floor} GB/s); untested: reads or writes alone"
        return result("mem.bandwidth", MEMTEST, Status.PASS, passed, target=target)
    return result("mem.bandwidth", MEMTEST, Status.PASS, f"{rate}, data verified (not judged: {g.note})", target=target)


def _links_failure(check_id: str, area: str, failure: str) -> CheckResult:
    return result(
        check_id,
        area,
        Status.FAIL,
        failure,
        "drain the node; check `dmesg` for Xid errors; `gpudiag bench-transfer` repeats the copies",
        action=Action.RESET,
    )


# --- the interconnect -------------------------------------------------------------------


@check(
    "link.pcie",
    INTERCONNECT,
    "pinned host copies both ways, 256 MiB and 4 bytes",
    fails=(
        "below bench-transfer's floor for the link (Gen5 x16 44, Gen4 21, Gen3 10 GB/s, narrower links in "
        "proportion); wrong data"
    ),
    scope=Scope.NODE,
    action=Action.RESEAT,
    needs_torch=always,
    needs_gpu=True,
    level=2,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("PCIe copies below expected"),
)
def pcie_copies(facts: Facts, options: Options) -> list[CheckResult]:
    deep = facts.deep
    if deep is None or deep.links is None or deep.links.pcie is None:
        return _not_run("link.pcie", INTERCONNECT, facts, deep.links_why if deep else "")
    out = [_judge_pcie(g) for g in deep.links.pcie]
    if deep.links.failure:
        out.append(_links_failure("link.pcie", INTERCONNECT, deep.links.failure))
    return out or [result("link.pcie", INTERCONNECT, Status.SKIP, "no GPU was measured")]


def _judge_pcie(g: PcieGpu) -> CheckResult:
    target = _label(g.gpu_index, g.torch_index)
    problems: list[Problem] = []
    for c in g.copies:
        name = c.direction.upper()
        if c.error:
            problems.append((Status.FAIL, f"{name}: {c.error}", "drain the node; check `dmesg` for Xid errors", None))
        elif c.verified is False:
            problems.append(
                (
                    Status.FAIL,
                    f"{name} copied wrong data: the GPU, its memory or the link corrupts data",
                    "drain the node; reseat the GPU; replace it if it happens again",
                    Action.RESEAT,
                )
            )
        elif c.verdict == "below_expected":
            like = f", behaves like {c.behaves_like}" if c.behaves_like else ""
            trained_down = c.link_loaded is not None and c.link_max is not None and c.link_loaded != c.link_max
            problems.append(
                (
                    Status.FAIL,
                    f"{name} {_num(c.gbps or 0)} GB/s below expected (≥ {_num(c.floor_gbps or 0)} on {c.link_max})"
                    f"{like}: {c.cause}",
                    "reseat the GPU or riser, check the slot and BIOS"
                    if trained_down
                    else "check the PCIe switch, IOMMU/ACS settings and NUMA placement; `gpudiag bench-transfer` "
                    "measures more",
                    Action.RESEAT if trained_down else Action.FIX_CONFIG,
                )
            )
    rates = ", ".join(f"{c.direction.upper()} {_num(c.gbps)}" for c in g.copies if c.gbps is not None)
    judged = [c for c in g.copies if c.floor_gbps is not None]
    on = (
        f" GB/s on {judged[0].link_max} (healthy ≥ {_num(judged[0].floor_gbps or 0)})"
        if judged
        else " GB/s (not judged: PCIe link not reported by NVML)"
    )
    latency = "/".join(_num(g.latency_us[d]) for d in ("h2d", "d2h") if d in g.latency_us)
    passed = (rates + on if rates else "no figure") + (f", latency {latency} µs" if latency else "")
    passed += "; untested: pageable copies"
    return _merge("link.pcie", INTERCONNECT, target, problems, passed)


@check(
    "link.peer",
    INTERCONNECT,
    "every ordered GPU pair's peer copy, bandwidth and latency",
    fails=(
        "below what the topology NVML reports allows (NVLink: 85 % of the board's typical figure; PCIe "
        "switch: the host-copy floor); no CUDA peer access where NVML says P2P works; wrong data"
    ),
    scope=Scope.NODE,
    action=Action.RESEAT,
    needs_torch=always,
    needs_gpu=True,
    level=2,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=Volatile("peer copies below expected"),
)
def peer_matrix(facts: Facts, options: Options) -> list[CheckResult]:
    deep = facts.deep
    if deep is None or deep.links is None or deep.links.peers is None:
        return _not_run("link.peer", INTERCONNECT, facts, deep.links_why if deep else "")
    if not deep.links.peers:
        return [result("link.peer", INTERCONNECT, Status.SKIP, "one GPU: no pair to copy between")]
    by_source: dict[int, list[PeerPair]] = {}
    for pair in deep.links.peers:
        by_source.setdefault(pair.src_torch, []).append(pair)
    out = [_judge_peers(pairs) for _, pairs in sorted(by_source.items())]
    if deep.links.failure:
        out.append(_links_failure("link.peer", INTERCONNECT, deep.links.failure))
    return out


def _judge_peers(pairs: list[PeerPair]) -> CheckResult:
    first = pairs[0]
    target = _label(first.src_gpu, first.src_torch)
    problems: list[Problem] = []
    for p in pairs:
        to = _label(p.dst_gpu, p.dst_torch)
        if p.error:
            problems.append((Status.FAIL, f"to {to}: {p.error}", "drain the node; check `dmesg` for Xid errors", None))
        elif p.verified is False:
            problems.append(
                (
                    Status.FAIL,
                    f"to {to}: the peer copy wrote wrong data",
                    "drain the node; check NVLink errors (`nvidia-smi nvlink -e`); reseat or replace the board",
                    Action.RESEAT,
                )
            )
        elif p.verdict == "below_expected":
            rate = f"{_num(p.gbps)} GB/s" if p.gbps is not None else "peer access off"
            floor = f", healthy ≥ {_num(p.floor_gbps)}" if p.floor_gbps else ""
            problems.append(
                (
                    Status.FAIL,
                    f"to {to}: {rate} ({p.note}{floor})",
                    "check the NVLinks (`nvidia-smi nvlink -s`, `-e`), the fabric manager on NVSwitch systems, "
                    "IOMMU/ACS for PCIe peers",
                    Action.RESEAT if p.nvlinks else Action.FIX_CONFIG,
                )
            )
    measured = [p.gbps for p in pairs if p.gbps is not None]
    passed = f"to {_targets(pairs)}: " + (_span(measured, "GB/s") if measured else "no figure")
    notes = sorted({p.note for p in pairs if p.note})
    floors = sorted({p.floor_gbps for p in pairs if p.floor_gbps})
    if notes:
        passed += f" ({'; '.join(notes)}" + (f", healthy ≥ {_num(floors[0])})" if floors else ")")
    latencies = [p.latency_us for p in pairs if p.latency_us is not None]
    if latencies:
        passed += f", latency {_span(latencies, 'µs')}"
    access = {p.access for p in pairs}
    passed += ", peer access " + ("on" if access == {True} else "off" if access == {False} else "on and off")
    passed += "; untested: both directions at once"
    return _merge("link.peer", INTERCONNECT, target, problems, passed)


def _targets(pairs: Sequence[PeerPair]) -> str:
    """``GPU 1-7`` (NVML indices, a range when contiguous), else torch's ``cuda:1,2``."""
    if any(p.dst_gpu is None for p in pairs):
        return "cuda:" + ",".join(str(p.dst_torch) for p in pairs)
    numbers = sorted(p.dst_gpu for p in pairs if p.dst_gpu is not None)
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"GPU {numbers[0]}-{numbers[-1]}"
    return "GPU " + ",".join(map(str, numbers))


@check(
    "link.nccl",
    INTERCONNECT,
    "an all-reduce across every GPU (torch.distributed, NCCL)",
    fails=(
        "a rank fails or hangs, a wrong sum; busbw below half the link's typical per-direction figure (FAIL "
        "on NVLink/NVSwitch, WARN on PCIe)"
    ),
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    needs_torch=always,
    needs_gpu=True,
    level=2,
    finding=Volatile("all-reduce below expected"),
)
def allreduce(facts: Facts, options: Options) -> list[CheckResult]:
    from gpudiag.checks.deep.facts import ALLREDUCE as PHASE

    deep = facts.deep
    if deep is None or deep.allreduce is None:
        return _not_run("link.nccl", INTERCONNECT, facts, deep.allreduce_why if deep else "")
    a = deep.allreduce
    problems: list[Problem] = []
    if a.error:
        problems.append(
            (
                Status.FAIL,
                a.error,
                "run NCCL's own test (nccl-tests all_reduce_perf) with NCCL_DEBUG=INFO; on NVSwitch systems check "
                "that nvidia-fabricmanager runs",
                None,
            )
        )
    if a.correct is False:
        problems.append(
            (
                Status.FAIL,
                "the all-reduce summed wrong on some rank",
                "drain the node; reset the GPUs and run it again",
                Action.RESET,
            )
        )
    for index in sorted({x.gpu_index for x in deep.xids if x.phase == PHASE}):
        problems += _xid_problem(_xids(deep, PHASE, index), f"the all-reduce (GPU {index})")
    largest = a.largest
    passed = "no figure"
    if largest is not None and not a.error:
        busbw = largest.busbw_gbps(a.ranks)
        figure = (
            f"busbw {_num(busbw)} GB/s (algbw {_num(largest.algbw_gbps)}) at {_size(largest.nbytes)} across {a.ranks} "
            f"GPUs ({a.backend})"
        )
        floor = ALLREDUCE_SHARE * a.expected_gbps if a.expected_gbps else None
        if floor is not None and busbw < floor:
            problems.append(
                (
                    Status.FAIL if a.path in ("NVLink", "NVSwitch") else Status.WARN,
                    f"{figure}: below half the {a.path} figure ({_num(a.expected_gbps or 0)} GB/s per direction)",
                    "check NCCL_P2P_DISABLE/NCCL_SHM_DISABLE in the environment, the NVLinks, the fabric manager, "
                    "IOMMU/ACS; nccl-tests' all_reduce_perf measures more",
                    Action.RESEAT if a.path in ("NVLink", "NVSwitch") else None,
                )
            )
        judged = f"{a.path}: healthy ≥ {_num(floor)}" if floor is not None else "not judged: link unknown"
        passed = f"{figure}, {judged}; sums correct; untested: other collectives, other nodes"
    return [_merge("link.nccl", INTERCONNECT, "", problems, passed)]


# --- the stress ------------------------------------------------------------------------


@check(
    "stress.gemm",
    STRESS,
    "sustained GEMM on every GPU at once",
    fails=(
        "HW slowdown / HW thermal / power-brake clock events under load, an Xid, an ECC or remap rise, a "
        "product that differs from the first, a straggler (below 85 % of its peers' median); WARN: SW thermal "
        "slowdown, a slowdown of more than 20 % over the run"
    ),
    scope=Scope.NODE,
    action=Action.COOLING,
    needs_torch=always,
    needs_gpu=True,
    level=3,
    finding=Volatile("GEMM stress failed", kinds=True),
)
def stress_gemm(facts: Facts, options: Options) -> list[CheckResult]:
    deep = facts.deep
    if deep is None or deep.stress is None:
        return _not_run("stress.gemm", STRESS, facts, deep.stress_why if deep else "")
    gpus = deep.stress.gpus
    if not gpus:
        return [result("stress.gemm", STRESS, Status.SKIP, "no GPU was stressed")]
    names = {g.index: g.name.value or "" for g in facts.machine.gpus}
    return [_judge_stress(deep, g, gpus, names) for g in gpus]


def _events(samples: GpuSamples | None, bits: int) -> list[str]:
    if samples is None:
        return []
    return [
        f"{CLOCK_EVENT_NAMES.get(bit, hex(bit))} in {count} of {samples.samples} samples"
        for bit, count in samples.events.items()
        if bit & bits
    ]


def _peers_median(g: StressGpu, gpus: Sequence[StressGpu], names: dict[int, str]) -> tuple[float, int] | None:
    """The median sustained TFLOP/s of the other GPUs of the same model, and how many they are."""
    model = names.get(g.gpu_index, "") if g.gpu_index is not None else ""
    peers = [
        p.tflops_sustained
        for p in gpus
        if p is not g
        and p.ok
        and p.tflops_sustained is not None
        and (names.get(p.gpu_index, "") if p.gpu_index is not None else "") == model
    ]
    return (statistics.median(peers), len(peers)) if peers else None


def _judge_stress(deep: DeepFacts, g: StressGpu, gpus: Sequence[StressGpu], names: dict[int, str]) -> CheckResult:
    from gpudiag.checks.deep.facts import STRESS as PHASE

    target = _label(g.gpu_index, g.torch_index)
    problems: list[Problem] = []
    if not g.ok:
        problems.append(
            (
                Status.FAIL,
                g.error or "the stress did not finish",
                "drain the node; check `dmesg` for Xid errors; reset the GPU",
                Action.RESET,
            )
        )
    if g.result_errors:
        problems.append(
            (
                Status.FAIL,
                f"{g.result_errors} of {g.checks} re-computed products differed from the first",
                "drain the node; reset the GPU and run the stress again; replace the GPU (RMA) if it recurs",
                Action.RMA,
            )
        )
    problems += _xid_problem(_xids(deep, PHASE, g.gpu_index), "the stress")
    problems += _counter_problem(g.before, g.after, "the stress")
    s = g.samples
    hot = f" (max {s.temperature_max_c} °C)" if s is not None and s.temperature_max_c is not None else ""
    if throttled := _events(s, HW_THROTTLE):
        problems.append(
            (
                Status.FAIL,
                f"hardware throttling under load: {', '.join(throttled)}{hot}",
                "check cooling, fans, airflow and power delivery (PSUs, cables)",
                Action.COOLING,
            )
        )
    if slowed := _events(s, SW_THERMAL):
        problems.append((Status.WARN, f"{', '.join(slowed)}{hot}", "check cooling and airflow", Action.COOLING))
    peers = _peers_median(g, gpus, names)
    sustained = g.tflops_sustained
    if g.ok and sustained is not None and peers is not None and sustained < STRAGGLER_SHARE * peers[0]:
        below = 1 - sustained / peers[0]
        problems.append(
            (
                Status.FAIL,
                f"straggler: sustained {_num(sustained)} TFLOP/s, {below:.0%} below the median of its "
                f"{peers[1]} peer(s) ({_num(peers[0])})",
                "check this GPU's clocks, power limit and cooling (`nvidia-smi -q -d CLOCK,POWER,PERFORMANCE`); "
                "reset it; replace it (RMA) if it stays slow",
                Action.COOLING,
            )
        )
    first, last = g.tflops_first, g.tflops_last
    if g.ok and first and last is not None and last < SLOWDOWN_SHARE * first:
        problems.append(
            (
                Status.WARN,
                f"slowed down over the run: {_num(first)} → {_num(last)} TFLOP/s",
                "check cooling: a GPU that heats up clocks down",
                Action.COOLING,
            )
        )
    return _merge("stress.gemm", STRESS, target, problems, _stress_passed(g, peers) + _unwatched(deep, g.gpu_index))


def _stress_passed(g: StressGpu, peers: tuple[float, int] | None) -> str:
    kind = {"bfloat16": " bf16", "float16": " fp16", "float32": " fp32"}.get(g.dtype, "")
    figure = f"sustained {_num(g.tflops_sustained)} TFLOP/s{kind}" if g.tflops_sustained is not None else "no figure"
    parts = [f"{figure} for {g.seconds:.0f} s" + (f" (min {_num(g.tflops_min)})" if g.tflops_min is not None else "")]
    s = g.samples
    if s is not None:
        if s.temperature_max_c is not None:
            parts.append(f"max {s.temperature_max_c} °C")
        if s.power_max_w is not None:
            parts.append(
                f"{s.power_max_w:.0f} of {s.power_limit_w:.0f} W" if s.power_limit_w else f"{s.power_max_w:.0f} W"
            )
        if s.sm_clock_min_mhz is not None and s.sm_clock_max_mhz is not None:
            parts.append(f"SM {_span([s.sm_clock_min_mhz, s.sm_clock_max_mhz], 'MHz')}")
        parts.append("no HW throttling")
    else:
        parts.append("NVML not sampled")
    parts.append(f"{g.checks} products re-checked")
    if peers is not None:
        parts.append(f"within {STRAGGLER_SHARE:.0%} of its {peers[1]} peer(s)")
    return ", ".join(parts) + "; untested: fp64, power swings"
