"""The copy tests' parent side (``link.pcie``, ``link.peer``, ``mem.bandwidth``): `bench-transfer`'s
engine and judgement (:mod:`gpudiag.bench`), run as that command runs it, in its child
(:mod:`gpudiag.bench.child`, gpudiag's own interpreter), the link re-read under load.

One benchmark run measures pinned host copies both ways and every ordered GPU pair's peer copy,
each at 256 MiB (bandwidth, on the plateau) and 4 bytes (latency, as CUDA's
p2pBandwidthLatencyTest times a tiny copy); level 4 adds a second run for device memory bandwidth
(D2D at bench-transfer's default size, at least 8× the L2). Peer figures are then judged against
what NVML says links each pair (:func:`judge_pair`), host and D2D figures exactly as bench-transfer
judges them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gpudiag.checks.deep.collect import Context
from gpudiag.checks.deep.facts import LINKS, D2dGpu, HostCopy, Links, PcieGpu, PeerPair
from gpudiag.model import FactGroup, Gpu
from gpudiag.probe.child import ChildOutcome, ChildResult, hung_detail, start

if TYPE_CHECKING:
    from gpudiag.bench.link import Link
    from gpudiag.bench.report import Row
    from gpudiag.bench.runner import Outcome

LATENCY_BYTES = 4
SWITCHED_PATHS = ("PIX", "PXB")  # through PCIe switches only: peer copies can reach host-copy speed


def run(ctx: Context, pcie: bool, peer: bool, d2d: bool) -> tuple[Links | None, str]:
    from gpudiag.bench.plan import PLATEAU_SIZE, WARMUP_COPIES, Mode, Plan
    from gpudiag.bench.runner import TORCH_PRIMITIVES

    overrides = ctx.overrides.get(LINKS, {})
    primitives = str(overrides.get("primitives", TORCH_PRIMITIVES))
    ctx.sampler.set_phase(LINKS)
    modes = (*((Mode.H2D_PINNED, Mode.D2H_PINNED) if pcie else ()), *((Mode.PEER,) if peer else ()))
    outcomes: list[tuple[Outcome, Any]] = []
    failure = ""
    if modes:
        plan = Plan(modes, (LATENCY_BYTES, PLATEAU_SIZE), 16, 3, WARMUP_COPIES, None)
        ctx.progress.phase(_phase_name(plan))
        outcome, failure = _bench(ctx, plan, primitives)
        outcomes.append((outcome, plan))
    if d2d and not (outcomes and _stopped(outcomes[0][0])):
        plan = Plan((Mode.D2D,), None, 16, 3, WARMUP_COPIES, None)
        ctx.progress.phase(_phase_name(plan))
        outcome, failed = _bench(ctx, plan, primitives)
        outcomes.append((outcome, plan))
        failure = failure or failed
    first = outcomes[0][0]
    if first.no_cuda or first.usage or (not first.devices and first.failure):
        why = first.no_cuda or first.usage or first.failure
        note = f"the copy tests could not run (they use bench-transfer's engine, in gpudiag's own Python): {why}"
        ctx.notes.append(note)
        return None, note
    if failure:
        ctx.notes.append(failure)
    topology = ctx.topology()
    rows = [row for outcome, _ in outcomes for row in _rows(outcome, ctx.machine.gpus)]
    return (
        Links(
            pcie=_pcie(rows) if pcie else None,
            peers=_peers(rows, topology.gpus) if peer else None,
            d2d=_d2d(rows) if d2d else None,
            failure="; ".join(o.failure for o, _ in outcomes if o.failure and not o.failure.startswith("cut short")),
            devices=len(first.devices),
        ),
        "",
    )


def _stopped(outcome: Outcome) -> bool:
    return bool(outcome.no_cuda or outcome.usage or not outcome.devices)


def _bench(ctx: Context, plan: Any, primitives: str) -> tuple[Outcome, str]:
    """One benchmark run, its timeout cut to what is left of the budget; (outcome, note if cut)."""
    from gpudiag.bench.link import Link
    from gpudiag.bench.placement import pci_numa_node
    from gpudiag.bench.plan import DeviceInfo, Task
    from gpudiag.bench.preflight import match_gpu, numa_maps
    from gpudiag.bench.runner import Collector, run_child

    gpus = ctx.machine.gpus

    def read_link(device: DeviceInfo) -> Link | None:
        gpu = match_gpu(device.uuid, device.pci_bus_id, gpus)
        if gpu is None:
            return None
        ctx.sampler.mark_loaded(gpu.index)
        pcie = ctx.read(frozenset({FactGroup.PCIE})).gpu(gpu.index).pcie
        gen, width = pcie.gen_current.value, pcie.width_current.value
        return Link(gen, width) if gen and width else None

    def on_tasks(planned: list[Task]) -> None:
        ctx.progress.phase(_phase_name(plan), total=float(len(planned)))

    def on_start(task: Task) -> None:
        ctx.progress.update(float(task.index), task.label())

    cut: list[str] = []
    by_uuid, by_pci = numa_maps(gpus, pci_numa_node)
    outcome = run_child(
        plan,
        Collector(read_link, on_tasks, on_start),
        gpu_count=len(gpus),
        numa_by_uuid=by_uuid,
        numa_by_pci=by_pci,
        primitives=primitives,
        launcher=functools.partial(_launch, ctx, cut),
    )
    if cut:
        outcome.failure = "cut short"
    return outcome, cut[0] if cut else ""


def _phase_name(plan: Any) -> str:
    from gpudiag.bench.plan import Mode

    return "device memory bandwidth" if plan.modes == (Mode.D2D,) else "PCIe and peer copies"


def _launch(
    ctx: Context,
    cut: list[str],
    args: Sequence[str],
    *,
    python: str | None,
    timeout: float,
    on_line: Callable[[str], None],
) -> ChildResult:
    """bench-transfer's launcher, with the run's budget as a second deadline."""
    running = start(args, python=python)
    own = running.start + timeout
    last = [""]

    def deadline() -> tuple[float, str]:
        if ctx.budget_end < own:
            last[0] = ctx.budget_note("the copy tests were cut short")
            return ctx.budget_end, last[0]
        last[0] = ""
        return own, hung_detail(timeout)

    try:
        result = running.finish(on_line, deadline)
    except BaseException:
        running.kill()
        raise
    if result.outcome is ChildOutcome.TIMEOUT and last[0]:
        cut.append(last[0])
    return result


def _rows(outcome: Outcome, machine_gpus: Sequence[Gpu]) -> list[Row]:
    from gpudiag.bench import report
    from gpudiag.bench.preflight import match_gpu

    gpus = {d.ordinal: match_gpu(d.uuid, d.pci_bus_id, machine_gpus) for d in outcome.devices}
    return report.rows(outcome, gpus)


def _gbps(row: Row) -> float | None:
    return row.bandwidth.median / 1e9 if row.bandwidth is not None else None


def _latency_us(row: Row) -> float | None:
    return row.task.counted_bytes / row.bandwidth.median * 1e6 if row.bandwidth is not None else None


def _index(row: Row) -> int | None:
    return row.gpu.index if row.gpu is not None else None


def _pcie(rows: list[Row]) -> tuple[PcieGpu, ...]:
    from gpudiag.bench.plan import Mode

    by_device: dict[int, list[Row]] = {}
    for row in rows:
        if row.task.mode in (Mode.H2D_PINNED, Mode.D2H_PINNED):
            by_device.setdefault(row.task.device, []).append(row)
    out = []
    for device, device_rows in sorted(by_device.items()):
        copies, latency = [], {}
        for row in device_rows:
            direction = row.task.mode.direction
            if row.task.nbytes == LATENCY_BYTES:
                if (us := _latency_us(row)) is not None:
                    latency[direction] = us
                continue
            expectation = row.judgement.expectation
            copies.append(
                HostCopy(
                    direction=direction,
                    nbytes=row.task.nbytes,
                    gbps=_gbps(row),
                    verdict=row.judgement.verdict.value,
                    floor_gbps=expectation.floor / 1e9 if expectation.floor else None,
                    link_max=str(row.max_link) if row.max_link else None,
                    link_loaded=str(row.link) if row.link else None,
                    behaves_like=str(row.judgement.behaves_like) if row.judgement.behaves_like else None,
                    cause=row.cause,
                    verified=row.verified,
                    error=row.error,
                )
            )
        out.append(PcieGpu(_index(device_rows[0]), device, tuple(copies), latency))
    return tuple(out)


def _peers(rows: list[Row], topology: Sequence[Gpu]) -> tuple[PeerPair, ...]:
    from gpudiag.bench.plan import Mode

    pairs: dict[tuple[int, int], dict[str, Row]] = {}
    for row in rows:
        if row.task.mode is Mode.PEER and row.task.peer is not None:
            key = "latency" if row.task.nbytes == LATENCY_BYTES else "bandwidth"
            pairs.setdefault((row.task.device, row.task.peer), {})[key] = row
    out = []
    for (src, dst), found in sorted(pairs.items()):
        row = found.get("bandwidth") or found["latency"]
        src_gpu, dst_gpu = _index(row), row.peer_gpu.index if row.peer_gpu is not None else None
        link = _peer_link(topology, src_gpu, dst_gpu)
        bandwidth = found.get("bandwidth")
        gbps = _gbps(bandwidth) if bandwidth is not None else None
        name = row.device.name if row.device is not None else ""
        verdict, floor, note = judge_pair(gbps, row.peer_access, link, name, (row.max_link, _max_link(row.peer_gpu)))
        latency = found.get("latency")
        out.append(
            PeerPair(
                src_torch=src,
                dst_torch=dst,
                src_gpu=src_gpu,
                dst_gpu=dst_gpu,
                access=row.peer_access,
                gbps=gbps,
                latency_us=_latency_us(latency) if latency is not None else None,
                verified=bandwidth.verified if bandwidth is not None else row.verified,
                error=(bandwidth.error if bandwidth is not None else "") or (latency.error if latency else ""),
                nvlinks=link[0] if link else None,
                path=link[1] if link else None,
                p2p_nvml=link[2] if link else None,
                verdict=verdict,
                floor_gbps=floor,
                note=note,
            )
        )
    return tuple(out)


def _max_link(gpu: Gpu | None) -> Link | None:
    from gpudiag.bench.report import max_link

    return max_link(gpu)


def _peer_link(topology: Sequence[Gpu], src: int | None, dst: int | None) -> tuple[int, str | None, str | None] | None:
    """(active NVLinks, NVML's common ancestor, P2P read status) from ``src`` to ``dst``, as NVML says."""
    gpu = next((g for g in topology if g.index == src), None)
    details = gpu.details.value if gpu is not None else None
    affinity = details.affinity.value if details is not None else None
    if affinity is None or dst is None:
        return None
    for peer in affinity.peers:
        if peer.gpu == dst:
            return peer.nvlinks, peer.common_ancestor.value, peer.p2p_read.value or peer.p2p_read.detail or None
    return None


def judge_pair(
    gbps: float | None,
    access: bool | None,
    link: tuple[int, str | None, str | None] | None,
    name: str,
    max_links: tuple[Link | None, Link | None],
) -> tuple[str, float | None, str]:
    """(verdict, floor GB/s, note) of one peer copy against what links the pair.

    - NVLink (NVML counts active links, through NVSwitches too): bench-transfer's typical per-direction
      figure for the GPU's board (H100/H200 SXM 365-397, A100 SXM 265-276 GB/s), below 85 % of its low
      end is below expected; without a figure for the board, a copy no faster than PCIe allows is;
    - PCIe through switches only (PIX, PXB): the host-copy floor of the slower of the two links;
      through the CPU (PHB, NODE, SYS) not judged: it depends on the CPU's root complex;
    - no CUDA peer access: not judged (copies are staged through host memory), unless NVML says P2P
      works, which points at the IOMMU/ACS or a driver setting: below expected.
    """
    from gpudiag.bench.link import PEER_FLOOR, nvlink_typical

    nvlinks, path, p2p = link if link is not None else (None, None, None)
    if access is False:
        if p2p == "OK":
            return "below_expected", None, "no CUDA peer access though NVML reports P2P: copies go through host memory"
        return "not_judged", None, f"no peer access ({p2p or 'not supported'}): copies go through host memory"
    if gbps is None:
        return "not_judged", None, ""
    links = [lk for lk in max_links if lk is not None]
    slower = min(links, key=lambda lk: lk.theoretical or 0.0) if links else None
    if nvlinks:
        typical = nvlink_typical(name)
        if typical is not None:
            floor = PEER_FLOOR * typical[0] / 1e9
            verdict = "healthy" if gbps >= floor else "below_expected"
            return verdict, floor, f"NVLink x{nvlinks}"
        pcie = slower.theoretical / 1e9 if slower is not None and slower.theoretical else None
        if pcie is not None and gbps <= pcie:
            return "below_expected", pcie, f"PCIe speed though NVML reports NVLink x{nvlinks}"
        return "not_judged", None, f"NVLink x{nvlinks}; no reference figure for this GPU"
    if path in SWITCHED_PATHS and slower is not None and slower.typical is not None:
        floor = slower.typical[2] / 1e9
        return ("healthy" if gbps >= floor else "below_expected"), floor, f"PCIe {path} ({slower})"
    if path is not None:
        return "not_judged", None, f"PCIe through the CPU ({path}): not judged"
    return "not_judged", None, "topology not known (NVML gave no P2P view)"


def _d2d(rows: list[Row]) -> tuple[D2dGpu, ...]:
    from gpudiag.bench.plan import Mode

    out = []
    for row in rows:
        if row.task.mode is not Mode.D2D:
            continue
        expectation = row.judgement.expectation
        out.append(
            D2dGpu(
                gpu_index=_index(row),
                torch_index=row.task.device,
                nbytes=row.task.nbytes,
                gbps=_gbps(row),
                verdict=row.judgement.verdict.value,
                floor_gbps=expectation.floor / 1e9 if expectation.floor else None,
                peak_gbps=expectation.limit / 1e9 if expectation.limit else None,
                note=row.judgement.note,
                verified=row.verified,
                error=row.error,
            )
        )
    return tuple(out)
