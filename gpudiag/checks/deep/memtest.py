"""The memory test's parent side (``mem.test``): the child's settings, its run, and NVML's memory
error counters read before and after it (:mod:`gpudiag.children.memtest` writes and verifies)."""

from __future__ import annotations

from typing import Any

from gpudiag.checks.deep.collect import BUDGET, Context, Events, describe, run_child, settings_json
from gpudiag.checks.deep.facts import MEMTEST, Memtest, MemtestGpu, PatternResult
from gpudiag.checks.deep.levels import Level
from gpudiag.checks.deep.sampler import COUNTED, counters
from gpudiag.children import patterns
from gpudiag.probe.child import ChildOutcome, script


def settings(level: Level, seconds: float, overrides: dict[str, Any]) -> dict[str, Any]:
    long = level.memtest == "long"
    return {
        "device_type": "cuda",
        "patterns": list(patterns.LONG if long else patterns.SHORT),
        "passes": 1,
        "seconds": seconds if long else 0.0,
        **overrides,
    }


def run(ctx: Context, level: Level, seconds: float) -> tuple[Memtest | None, str]:
    """The test's results, or None and why it could not run (also noted as not run)."""
    s = settings(level, seconds, ctx.overrides.get(MEMTEST, {}))
    before = counters(ctx.read(COUNTED))
    ctx.sampler.set_phase(MEMTEST)
    ctx.progress.phase("memory test", total=100.0)
    done: dict[int, float] = {}

    def on_event(event: dict[str, Any]) -> None:
        kind, device = event.get("kind"), event.get("device")
        if not isinstance(device, int):
            return
        if kind == "start":
            ctx.sampler.mark_loaded(ctx.gpu_of(events.uuid(device), device))
            done[device] = 0.0
        elif kind == "progress" and isinstance(event.get("done"), int | float):
            done[device] = float(event["done"])
        elif kind == "result":
            done[device] = 1.0
        else:
            return
        ctx.progress.update(100.0 * min(done.values()), f"{len(events.devices)} GPU(s)")

    events = Events(on_event)
    result, how = run_child(ctx, [str(script("memtest")), settings_json(s)], events, python=ctx.python)
    after = counters(ctx.read(COUNTED))
    if result.outcome is ChildOutcome.NOT_STARTED:
        return _not_run(ctx, f"the memory test could not start: {result.detail}")
    if result.ok and result.data.get("no_cuda"):
        return _not_run(ctx, f"the memory test could not use CUDA: {result.data['no_cuda']}")
    if not events.devices:
        return _not_run(ctx, f"the memory test stopped before testing any GPU: {result.detail or 'no answer'}")
    gpus = []
    for device, data in sorted(events.results.items()):
        index = ctx.gpu_of(events.uuid(device), device)
        gpus.append(_gpu(index, device, data, before.get(index) if index is not None else None, after))
    cut = ""
    unfinished = events.unfinished()
    if how == BUDGET:
        cut = ctx.budget_note("the memory test was cut short")
        ctx.notes.append(cut)
    elif not result.ok and unfinished:  # a hang or a crash: a finding about the GPUs under test
        for device in unfinished:
            others = [f"GPU {ctx.gpu_of(events.uuid(d), d)}" for d in unfinished if d != device]
            also = f" (and {', '.join(others)}, tested at the same time)" if others else ""
            index = ctx.gpu_of(events.uuid(device), device)
            gpus.append(MemtestGpu(index, device, False, f"{describe(result, how)} while testing this GPU{also}"))
    elif not result.ok:
        ctx.notes.append(f"the memory test ended badly after its last GPU: {result.detail}")
    gpus.sort(key=lambda g: g.torch_index)
    return Memtest(level.memtest or "short", tuple(s["patterns"]), tuple(gpus), cut), ""


def _gpu(index: int | None, device: int, data: dict[str, Any], before: Any, after: dict[int, Any]) -> MemtestGpu:
    found = []
    for p in data.get("patterns", []):
        found.append(
            PatternResult(
                name=str(p.get("name", "")),
                mismatches=int(p.get("mismatches", 0)),
                first_address=p.get("first_address"),
                last_address=p.get("last_address"),
                samples=tuple((int(a), int(e), int(g)) for a, e, g in p.get("samples", [])),
                bits=int(p.get("bits", 0)),
            )
        )
    return MemtestGpu(
        gpu_index=index,
        torch_index=device,
        ok=bool(data.get("ok")),
        error=str(data.get("error", "")),
        free_bytes=int(data.get("free_bytes", 0)),
        total_bytes=int(data.get("total_bytes", 0)),
        tested_bytes=int(data.get("tested_bytes", 0)),
        passes=int(data.get("passes", 0)),
        seconds=float(data.get("seconds", 0.0)),
        bytes_moved=int(data.get("bytes_moved", 0)),
        patterns=tuple(found),
        before=before,
        after=after.get(index) if index is not None else None,
    )


def _not_run(ctx: Context, why: str) -> tuple[None, str]:
    ctx.notes.append(why)
    return None, why
