"""Judged rows and findings on example machines: a healthy Gen3 V100, an H100 trained down to
Gen2, an A100 at x8, remote NUMA placement, wrong data, failed tasks, a run cut short."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from gpudiag.bench import engine, report
from gpudiag.bench.link import Link, Verdict
from gpudiag.bench.placement import Placed, Placement
from gpudiag.bench.plan import DeviceInfo, MiB, Mode, make_plan, tasks
from gpudiag.bench.preflight import match_gpu
from gpudiag.bench.runner import Collector, Outcome
from gpudiag.model import Gpu, Reading
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.replay.fixtures import load
from tests.test_bench_fakes import FakePrimitives, Scenario

CAPTURE = Path(__file__).resolve().parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"

L2 = {"V100": 6 * MiB, "A100": 40 * MiB, "H100": 50 * MiB}

Simulated = tuple[list[report.Row], Outcome, dict[int, Gpu | None]]


# The CPU socket of each example GPU, as sysfs tells it on such a machine: bench pins host memory
# there (NVML's NUMA id is the GPU memory's own node, not supported on these x86 GPUs).
SOCKETS = {
    "a100x2-pcie-one-at-x8": [0, 1],
    "h100-pcie-gen2-trained-down": [1],
    "v100-pcie-gen3-x16": [0],
    "h100x8-healthy": [0, 0, 0, 0, 1, 1, 1, 1],
}


def socket_of(example: str, index: int) -> int | None:
    nodes = SOCKETS.get(example, [])
    return nodes[index] if index < len(nodes) else None


def simulate(
    example: str,
    modes: str,
    rates: dict[str, float],
    sizes: str | None = None,
    placement: Placement = Placement.LOCAL,
    machine_gpus: tuple[Gpu, ...] | None = None,
    result: ChildResult | None = None,
    **scenario: Any,
) -> Simulated:
    """Run the real loop on fake copies against an example machine's GPUs, as the child would,
    and collect it as the parent does (the link is read from the example after each warm-up)."""
    gpus = machine_gpus or load(example)[0].gpus
    devices = [
        DeviceInfo(
            i,
            g.name.get(""),
            g.uuid.get("").removeprefix("GPU-"),
            None,
            next((v for k, v in L2.items() if k in g.name.get("")), 0),
            g.memory.value.total_bytes if g.memory.value else 0,
            g.memory.value.free_bytes if g.memory.value else 0,
        )
        for i, g in enumerate(gpus)
    ]
    prims = FakePrimitives(Scenario(devices=devices, rates=rates, **scenario))

    def read_link(d: DeviceInfo) -> Link | None:
        pcie = gpus[d.ordinal].pcie
        return report.link_of(pcie.gen_current.value, pcie.width_current.value)

    collector = Collector(read_link)
    plan = make_plan(modes, sizes, False, 4, 3, None)
    todo = tasks(plan, devices)
    collector.event(
        {
            "kind": "devices",
            "devices": [vars(d) for d in devices],
            "peer_access": [[a.ordinal, b.ordinal, prims.s.peer_access] for a in devices for b in devices if a != b],
            "numa_nodes": {str(i): socket_of(example, i) for i in range(len(gpus))},
            "spin_kernel": prims.spin_kernel,
        }
    )
    collector.event({"kind": "tasks", "tasks": [vars(t) | {"mode": t.mode.value} for t in todo]})

    @contextlib.contextmanager
    def place(node: int | None, nodes: dict[int, set[int]]) -> Iterator[Placed]:
        yield Placed(placement, node, f"placement {placement.value} (node {node})")

    by_ordinal = {d.ordinal: d for d in devices}
    numa = {d.ordinal: socket_of(example, d.ordinal) for d in devices}
    engine.run_tasks(prims, plan, todo, by_ordinal, numa, {}, collector.event, clock=prims.clock, place=place)
    outcome = collector.finish(result or ChildResult(ChildOutcome.OK, {"done": True}), 60.0)
    matched = {d.ordinal: match_gpu(d.uuid, None, gpus) for d in devices}
    return report.rows(outcome, matched), outcome, matched


def by_mode(rows: list[report.Row], device: int = 0) -> dict[Mode, report.Row]:
    return {r.task.mode: r for r in rows if r.task.device == device}


V100_HEALTHY = {
    "h2d_pageable": 8.1e9,
    "h2d_pinned": 12.2e9,
    "h2d_pinned_async": 12.4e9,
    "d2h_pageable": 7.6e9,
    "d2h_pinned": 12.9e9,
    "d2h_pinned_async": 13.1e9,
    "d2d": 365e9,
}


def test_a_healthy_gen3_v100_is_judged_against_gen3() -> None:
    rows, outcome, _ = simulate("v100-pcie-gen3-x16", "host,d2d", V100_HEALTHY)
    modes = by_mode(rows)
    pinned_and_d2d = [r for r in rows if r.task.mode.pinned or r.task.mode is Mode.D2D]
    assert all(r.judgement.verdict is Verdict.HEALTHY for r in pinned_and_d2d), [
        (r.task.mode, r.judgement) for r in rows
    ]
    pinned = modes[Mode.H2D_PINNED]
    assert pinned.label == "cuda:0 (GPU 0)" and pinned.link == Link(3, 16) == pinned.max_link
    assert pinned.judgement.expectation.limit == pytest.approx(15.75e9, rel=2e-3)
    assert pinned.bandwidth is not None and pinned.bandwidth.median == pytest.approx(12.2e9)
    assert modes[Mode.H2D_PAGEABLE].judgement.note == "66% of pinned"  # of the blocking pinned figure
    rows, _, _ = simulate("v100-pcie-gen3-x16", "pageable,async", V100_HEALTHY)
    assert by_mode(rows)[Mode.D2H_PAGEABLE].judgement.note == "58% of pinned"  # else of the async one
    assert modes[Mode.D2D].task.nbytes == 256 * MiB and modes[Mode.D2D].verified
    found = report.findings(rows, outcome)
    assert [f.severity for f in found] == [report.Severity.INFO] and not report.failed(found)
    assert "d2h_pageable 7.6 GB/s (58% of pinned)" in found[0].message


def test_an_h100_trained_down_to_gen2_is_named_as_such() -> None:
    rows, outcome, _ = simulate("h100-pcie-gen2-trained-down", "pinned,h2d_pageable", {}, default_rate=6.4e9)
    pinned = by_mode(rows)[Mode.H2D_PINNED_ASYNC]
    assert pinned.judgement.verdict is Verdict.BELOW and pinned.judgement.behaves_like == Link(2, 16)
    assert pinned.cause == "the link runs at Gen2 x16 under load (capable of Gen5 x16): it trained down"
    assert by_mode(rows)[Mode.H2D_PAGEABLE].judgement.verdict is Verdict.NOT_JUDGED  # 100 % of a slow pinned
    found = report.findings(rows, outcome)
    assert [f.severity for f in found] == [report.Severity.WARNING, report.Severity.INFO] and report.failed(found)
    assert found[0].message.startswith("cuda:0 (GPU 0): host copies below expected: ")
    assert "6.4 GB/s (at least 44.0 expected on Gen5 x16), behaves like Gen2 x16" in found[0].message
    assert "Reseat the GPU" in found[0].message


def test_a_gpu_at_x8_behaves_like_its_reported_link_and_peers_without_access_are_not_judged() -> None:
    rates = {"h2d_pinned": 25.2e9, "peer": 9.5e9}
    rows, outcome, _ = simulate("a100x2-pcie-one-at-x8", "h2d_pinned,peer", rates, peer_access=False)
    gpu0, gpu1 = by_mode(rows, 0)[Mode.H2D_PINNED], by_mode(rows, 1)[Mode.H2D_PINNED]
    assert gpu0.judgement.verdict is Verdict.HEALTHY
    # Same 25.2 GB/s measured on GPU 1 would be healthy too; slow it down to an x8's pace.
    slow = {**rates, "h2d_pinned": 12.3e9}
    rows, outcome, _ = simulate("a100x2-pcie-one-at-x8", "h2d_pinned,peer", slow, peer_access=False)
    gpu1 = by_mode(rows, 1)[Mode.H2D_PINNED]
    assert gpu1.judgement.verdict is Verdict.BELOW and gpu1.judgement.behaves_like == Link(4, 8)
    assert gpu1.cause == "the link runs at Gen4 x8 under load (capable of Gen4 x16): it trained down"
    peers = [r for r in rows if r.task.mode is Mode.PEER]
    assert [r.peer_access for r in peers] == [False, False]
    assert all(r.judgement.verdict is Verdict.NOT_JUDGED and "staged" in r.judgement.note for r in peers)
    assert [f.device for f in report.findings(rows, outcome)] == [0, 1]  # both GPUs' host copies at 12.3


@pytest.mark.parametrize(
    ("placement", "cause"),
    [
        (Placement.NOT_PINNED, "host memory may be on a remote NUMA node (placement not_pinned (node 0))"),
        (Placement.LOCAL, "the link runs at full speed and host memory is local: a shared PCIe switch"),
    ],
)
def test_a_slow_copy_on_a_full_speed_link_points_at_numa_or_the_path(placement: Placement, cause: str) -> None:
    gpus = load("h100x8-healthy")[0].gpus[:1]
    rows, outcome, _ = simulate(
        "h100x8-healthy", "d2h_pinned", {"d2h_pinned": 30e9}, placement=placement, machine_gpus=gpus
    )
    row = rows[0]
    assert row.judgement.verdict is Verdict.BELOW and row.judgement.behaves_like == Link(4, 16)
    assert row.cause.startswith(cause)
    advice = "numactl --cpunodebind=0 --membind=0" in report.findings(rows, outcome)[0].message
    assert advice is (placement is Placement.NOT_PINNED)


def test_wrong_data_is_a_failure_and_a_failed_task_a_warning() -> None:
    rows, outcome, _ = simulate(
        "v100-pcie-gen3-x16",
        "h2d_pinned,d2d,d2h_pinned",
        V100_HEALTHY,
        corrupt=("d2d",),
        fail={"d2h_pinned": "CUDA error: an illegal memory access was encountered"},
    )
    modes = by_mode(rows)
    assert modes[Mode.D2D].failed and modes[Mode.D2D].bandwidth is not None
    assert modes[Mode.D2H_PINNED].error.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert modes[Mode.D2H_PINNED].bandwidth is None and modes[Mode.D2H_PINNED].verified is None
    found = report.findings(rows, outcome)
    assert [f.severity for f in found] == [report.Severity.FAILURE, report.Severity.WARNING]
    assert "d2d cuda:0 256MiB copied wrong data" in found[0].message and report.failed(found)


def test_a_run_cut_short_keeps_its_figures_and_says_why() -> None:
    cut = ChildResult(ChildOutcome.TIMEOUT)
    rows, outcome, _ = simulate("v100-pcie-gen3-x16", "h2d_pinned", V100_HEALTHY, result=cut)
    assert rows[0].bandwidth is not None  # measured before the end
    outcome.results.clear()  # as if it hung before measuring anything
    rows = report.rows(outcome, {0: None})
    assert rows[0].error.startswith("not measured") and rows[0].label == "cuda:0"
    found = report.findings(rows, outcome)
    assert [f.message for f in found] == ["the benchmark process did not finish within 60 s (hung in CUDA?)"]


def test_a_slot_below_the_gpus_generation_is_information_only() -> None:
    gpu = load("h100x8-healthy")[0].gpus[0]
    slot4 = replace(gpu, pcie=replace(gpu.pcie, gen_max=Reading.of(4), gen_current=Reading.of(4)))
    rows, outcome, _ = simulate("h100x8-healthy", "h2d_pinned", {"h2d_pinned": 25e9}, machine_gpus=(slot4,))
    assert rows[0].judgement.verdict is Verdict.HEALTHY and rows[0].max_link == Link(4, 16)
    found = report.findings(rows, outcome)
    assert [f.severity for f in found] == [report.Severity.INFO] and not report.failed(found)
    assert "supports PCIe Gen5 but its slot allows Gen4" in found[0].message


def test_small_sizes_are_not_judged_and_notes_explain_the_run() -> None:
    gpus = load("h100x8-healthy")[0].gpus[:2]
    rows, outcome, _ = simulate(
        "h100x8-healthy", "h2d_pinned_async,d2d", {}, sizes="4KiB,1GiB", machine_gpus=gpus, enqueue_seconds=0.003
    )
    small = [r for r in rows if r.task.nbytes == 4096]
    assert all(r.judgement.verdict is Verdict.NOT_JUDGED for r in small)
    notes = report.notes(rows, outcome, launch_blocking=True, requested_peer=False)
    assert not any("placement" in n for n in notes)  # local placement needs no note
    remote = simulate("h100x8-healthy", "h2d_pinned", {}, placement=Placement.NODE_UNKNOWN, machine_gpus=gpus[:1])
    assert "placement node_unknown (node 0)" in report.notes(remote[0], remote[1], False, False)
    assert any(n.endswith("enqueue outlasted the spin kernel: they may read low") for n in notes)
    assert any(n.startswith("CUDA_LAUNCH_BLOCKING=1") for n in notes)
    assert "not judged at 4KiB: below the bandwidth plateau or inside the L2 cache" in notes
    single = simulate("v100-pcie-gen3-x16", "peer,d2d", {}, spin_kernel=False)
    single_notes = report.notes(single[0], single[1], launch_blocking=False, requested_peer=True)
    assert "peer modes need two or more GPUs: none measured" in single_notes
    assert any(n.startswith("no spin kernel") for n in single_notes)


def test_d2d_below_its_memory_class_is_a_finding() -> None:
    rows, outcome, _ = simulate("v100-pcie-gen3-x16", "d2d", {"d2d": 200e9})
    assert rows[0].judgement.verdict is Verdict.BELOW and "memory clocks" in rows[0].cause
    assert "d2d 200.0 GB/s is below expected" in report.findings(rows, outcome)[0].message


# The healthy H100 of docs/hardware/h100-80gb-hbm3-driver580/gpudiag-bench-transfer.txt (GB/s).
H100_CAPTURED = {
    "h2d_pageable": 7.2e9,
    "h2d_pinned": 53.7e9,
    "h2d_pinned_async": 54.8e9,
    "d2h_pageable": 12.0e9,
    "d2h_pinned": 53.8e9,
    "d2h_pinned_async": 55.2e9,
    "d2d": 1494e9,
}


def test_the_captured_healthy_h100_passes_and_its_pageable_figures_only_inform() -> None:
    captured = (CAPTURE / "gpudiag-bench-transfer.txt").read_text()
    for mode, rate in H100_CAPTURED.items():  # the figures above are the capture's
        shown = f"{rate / 1e9:.0f}" if mode == "d2d" else f"{rate / 1e9:.1f}"
        assert re.search(rf"^{mode}\s+\d+MiB\s+{shown}\s", captured, re.M), mode
    gpu = load("h100x8-healthy")[0].gpus[:1]  # an H100 80GB HBM3 at Gen5 x16, as captured
    rows, outcome, _ = simulate("h100x8-healthy", "host,d2d", H100_CAPTURED, machine_gpus=gpu)
    modes = by_mode(rows)
    for mode in (Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC, Mode.D2H_PINNED, Mode.D2H_PINNED_ASYNC, Mode.D2D):
        assert modes[mode].judgement.verdict is Verdict.HEALTHY, mode
    assert modes[Mode.H2D_PAGEABLE].judgement == modes[Mode.H2D_PAGEABLE].judgement.__class__(
        Verdict.NOT_JUDGED, modes[Mode.H2D_PAGEABLE].judgement.expectation, note="13% of pinned"
    )
    assert modes[Mode.D2H_PAGEABLE].judgement.note == "22% of pinned"
    found = report.findings(rows, outcome)
    assert not report.failed(found) and [f.severity for f in found] == [report.Severity.INFO]
    assert "h2d_pageable 7.2 GB/s (13% of pinned), d2h_pageable 12.0 GB/s (22% of pinned)" in found[0].message
    assert "not the link" in found[0].message and "pin_memory" in found[0].message
