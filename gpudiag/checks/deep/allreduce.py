"""The all-reduce's parent side (``link.nccl``): the ranks' settings and rendezvous directory, their
run, nccl-tests' figures, and the link the topology says busbw should approach
(:mod:`gpudiag.children.allreduce` starts one rank per GPU)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

from gpudiag.checks.deep.collect import BUDGET, Context, Events, describe, run_child, settings_json
from gpudiag.checks.deep.facts import ALLREDUCE, Allreduce, AllreduceSize
from gpudiag.checks.deep.levels import START_SECONDS
from gpudiag.model import Gpu
from gpudiag.probe.child import ChildOutcome, script

TIMEOUT = 120.0  # torch.distributed's own: the rendezvous, and each collective


def settings(ranks: int, store_dir: str, overrides: dict[str, Any]) -> dict[str, Any]:
    return {
        "backend": "nccl",
        "device_type": "cuda",
        "ranks": ranks,
        "timeout": TIMEOUT,
        "store_dir": store_dir,
        **{k: v for k, v in overrides.items() if k != "ranks"},
    }


def run(ctx: Context, gpu_indices: Sequence[int | None]) -> tuple[Allreduce | None, str]:
    ranks = len(gpu_indices)
    if ranks < 2:
        return None, "one GPU: nothing to all-reduce across"
    ctx.sampler.set_phase(ALLREDUCE)
    for index in gpu_indices:
        ctx.sampler.mark_loaded(index)
    with tempfile.TemporaryDirectory(prefix="gpudiag-allreduce-") as store:
        s = settings(ranks, store, ctx.overrides.get(ALLREDUCE, {}))
        ctx.progress.phase(f"all-reduce across {ranks} GPUs")
        events = Events()
        limit = 2 * float(s["timeout"]) + 60.0
        result, how = run_child(
            ctx,
            [str(script("allreduce")), settings_json(s)],
            events,
            python=ctx.python,
            limit=limit,
            start_seconds=START_SECONDS,
        )
    path, expected = expectation(ctx.topology().gpus, gpu_indices)
    backend = str(s["backend"])
    if result.outcome is ChildOutcome.NOT_STARTED:
        note = f"the all-reduce could not start: {result.detail}"
        ctx.notes.append(note)
        return None, note
    if how == BUDGET:
        note = ctx.budget_note("the all-reduce was cut short")
        ctx.notes.append(note)
        return None, note
    reported = {int(e["rank"]): e for e in events.other if e.get("kind") == "rank" and isinstance(e.get("rank"), int)}
    failed = [e for e in events.other if e.get("kind") == "rank_failed"]
    error = ""
    if failed:
        first = failed[0]
        rank = int(first.get("rank", -1))
        gpu = gpu_indices[rank] if 0 <= rank < ranks else None
        where = f"rank {rank}" + (f" (GPU {gpu})" if gpu is not None else "")
        error = f"{where} failed: {first.get('error', '')}"
    elif not result.ok:
        error = describe(result, how)
    elif len(reported) < ranks:
        error = f"{ranks - len(reported)} of {ranks} ranks ended without reporting"
    sizes = _sizes(reported, ranks) if not error else ()
    correct = all(bool(e.get("correct")) for e in reported.values()) if reported and not error else None
    return Allreduce(ranks, backend, sizes, correct, error, path, expected, tuple(gpu_indices)), ""


def _sizes(reported: dict[int, dict[str, Any]], ranks: int) -> tuple[AllreduceSize, ...]:
    """Per size, the time per all-reduce averaged over the ranks (nccl-tests' default, ``-a 1``)."""
    times: dict[int, list[float]] = {}
    for event in reported.values():
        for nbytes, seconds in event.get("sizes", []):
            if isinstance(nbytes, int) and isinstance(seconds, int | float) and seconds > 0:
                times.setdefault(nbytes, []).append(float(seconds))
    return tuple(
        AllreduceSize(nbytes, sum(found) / len(found)) for nbytes, found in sorted(times.items()) if len(found) == ranks
    )


def expectation(topology: Sequence[Gpu], gpu_indices: Sequence[int | None]) -> tuple[str, float | None]:
    """(path, GB/s) busbw should approach: the per-direction figure of the link every pair shares.

    NVLink or NVSwitch (NVML sees active NVLinks between every pair): bench-transfer's typical
    peer figure for the board (the low end); PCIe: the typical pinned-copy figure of the slowest
    GPU's link (low end); unknown (no topology, or a board without a figure, or a machine too large for
    the details to read each GPU's peers: gpudiag.details.PEERS_READ_UP_TO): not judged.
    """
    from gpudiag.bench.link import Link, nvlink_typical

    chosen = [g for g in topology if g.index in gpu_indices]
    if not chosen or any(g.details.value is None or g.details.value.affinity.value is None for g in chosen):
        return "", None
    wanted = {g.index for g in chosen}
    nvlinked, switched = True, False
    for gpu in chosen:
        details = gpu.details.value
        assert details is not None and details.affinity.value is not None
        if len(wanted) > 1 and not details.affinity.value.peers:
            return "", None  # the peers were not read: no path is known
        links = {p.gpu: p.nvlinks for p in details.affinity.value.peers}
        if any(links.get(other, 0) == 0 for other in wanted - {gpu.index}):
            nvlinked = False
        for link in details.nvlinks.value or ():
            switched = switched or link.remote_type.value == "switch"
    name = chosen[0].name.value or ""
    if nvlinked:
        typical = nvlink_typical(name)
        return ("NVSwitch" if switched else "NVLink"), typical[0] / 1e9 if typical else None
    lows = []
    for gpu in chosen:
        gen, width = gpu.pcie.gen_max.value, gpu.pcie.width_max.value
        pinned = Link(gen, width).typical if gen and width else None
        if pinned is None:
            return "PCIe", None
        lows.append(pinned[0] / 1e9)
    return "PCIe", min(lows)
