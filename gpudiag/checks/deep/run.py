"""The deep run: its phases one after another within the budget, NVML read beside them; and the
refusal to start on GPUs that other processes use.

Phases run in this order, each in a child process of its own that exits (freeing its GPU memory)
before the next starts: the memory test, the copies (PCIe, peer, device memory), the
all-reduce, the stress. Each is run only if one of its checks was selected; a phase the budget
no longer allows is not started, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpudiag.checks.deep import allreduce, links, memtest, stress
from gpudiag.checks.deep.collect import Context
from gpudiag.checks.deep.facts import DeepFacts
from gpudiag.checks.deep.levels import START_SECONDS, DeepPlan, shares
from gpudiag.checks.deep.progress import Progress
from gpudiag.checks.deep.sampler import Sampler
from gpudiag.model import GpuState, Machine, ProcessKind, TorchRuntime

MEMTEST_IDS = ("mem.test",)
LINK_IDS = ("link.pcie", "link.peer", "mem.bandwidth")
ALLREDUCE_IDS = ("link.nccl",)
STRESS_IDS = ("stress.gemm",)


# Child settings per phase that replace the level's own in every run: empty, except in tests, which
# run the children on the CPU (``{"memtest": {"device_type": "cpu", ...}, ...}``).
OVERRIDES: dict[str, dict[str, Any]] = {}


def busy(machine: Machine, own: Iterable[int] = ()) -> list[str]:
    """The GPUs that other compute processes use: ``GPU 0 (PID 1234 python)``.

    A process list NVML cannot give (no permission, another container's processes) counts as
    none: the memory test then takes only what is free, and says how much that was.
    """
    mine = set(own)
    out = []
    for gpu in machine.gpus:
        procs = gpu.processes.value if gpu.state is GpuState.OK else None
        others = [
            p
            for p in procs or ()
            if p.pid not in mine and p.kind in (ProcessKind.COMPUTE, ProcessKind.COMPUTE_GRAPHICS)
        ]
        if others:
            named = ", ".join(f"PID {p.pid}" + (f" {p.host.name.value}" if p.host.name.value else "") for p in others)
            out.append(f"{gpu.label} ({named})")
    return out


def run(
    plan: DeepPlan,
    source: Any,
    machine: Machine,
    torch: TorchRuntime,
    python: str | None,
    started: float,
    progress: Progress | None = None,
) -> tuple[DeepFacts, list[str]]:
    """Every selected deep test, within ``plan.budget`` seconds of ``started`` (time.monotonic());
    (what they found, what could not run)."""
    level = plan.level
    wanted = set(plan.checks)
    watch = source.session.watch_xids()
    ctx = Context(
        source=source,
        machine=machine,
        python=python,
        budget_end=started + plan.budget,
        budget=plan.budget,
        overrides={**OVERRIDES, **plan.overrides},
        sampler=Sampler(lambda groups: ctx.read(groups), watch),
        progress=progress or Progress(),
    )
    phases = sum(bool(wanted & set(ids)) for ids in (MEMTEST_IDS, LINK_IDS, ALLREDUCE_IDS, STRESS_IDS))
    memtest_seconds, stress_seconds = shares(level, ctx.remaining(), phases)
    found: dict[str, Any] = {}
    ctx.sampler.start()
    try:
        if wanted & set(MEMTEST_IDS) and level.memtest and _time_for(ctx, "the memory test", found, "memtest"):
            found["memtest"], found["memtest_why"] = memtest.run(ctx, level, memtest_seconds)
        if wanted & set(LINK_IDS) and _time_for(ctx, "the copy tests", found, "links"):
            found["links"], found["links_why"] = links.run(
                ctx, "link.pcie" in wanted, "link.peer" in wanted, "mem.bandwidth" in wanted and level.d2d
            )
        if wanted & set(ALLREDUCE_IDS) and _time_for(ctx, "the all-reduce", found, "allreduce"):
            found["allreduce"], found["allreduce_why"] = allreduce.run(ctx, _ranks(ctx, torch))
        if wanted & set(STRESS_IDS) and level.stress_seconds and _time_for(ctx, "the stress test", found, "stress"):
            seconds = min(stress_seconds, max(1.0, ctx.remaining() - START_SECONDS / 4))
            found["stress"], found["stress_why"] = stress.run(ctx, seconds)
    finally:
        ctx.sampler.stop()
        ctx.progress.done()
    if ctx.sampler.error:
        ctx.notes.append(ctx.sampler.error)
    xid_watch = f"XIDs not watched on {', '.join(watch.missing)}" if watch.missing else ""
    facts = DeepFacts(level=level.number, xids=tuple(ctx.sampler.xids), xid_watch=xid_watch, **found)
    return facts, ctx.notes


def _time_for(ctx: Context, what: str, found: dict[str, Any], key: str) -> bool:
    """Whether the budget leaves time to start this phase; if not, it is noted as not run."""
    if ctx.remaining() > START_SECONDS / 4:
        return True
    note = ctx.budget_note(f"{what} was not started")
    ctx.notes.append(note)
    found[f"{key}_why"] = note
    return False


def _ranks(ctx: Context, torch: TorchRuntime) -> list[int | None]:
    """The NVML GPU behind each of torch's devices, in torch's order: one rank each."""
    forced = ctx.overrides.get("allreduce", {}).get("ranks")
    if isinstance(forced, int):  # CPU stand-ins (tests): the GPUs at those positions
        return [g.index for g in ctx.machine.gpus[:forced]]
    return [ctx.nvml_index_of(d.uuid) for d in torch.devices]
