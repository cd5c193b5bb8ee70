"""The targeted stress's parent side (``stress.gemm``): the child's settings, its run, its timed
windows reduced to figures, and what NVML saw meanwhile (:mod:`gpudiag.children.stress` computes)."""

from __future__ import annotations

import statistics
from typing import Any

from gpudiag.checks.deep.collect import BUDGET, Context, Events, describe, run_child, settings_json
from gpudiag.checks.deep.facts import STRESS, Stress, StressGpu
from gpudiag.checks.deep.sampler import COUNTED, counters
from gpudiag.probe.child import ChildOutcome, script

WARMUP_SHARE = 0.1  # the first tenth of the windows (boost clocks, a cold GPU) is not "sustained"


def settings(seconds: float, overrides: dict[str, Any]) -> dict[str, Any]:
    return {"device_type": "cuda", "seconds": seconds, "n": 8192, "dtype": "auto", **overrides}


def figures(rates: list[float]) -> dict[str, Any]:
    """StressGpu's TFLOP/s fields: sustained (median after the warm-up), lowest, and the medians of
    the first and last tenth."""
    if not rates:
        return {"tflops_sustained": None, "tflops_min": None, "tflops_first": None, "tflops_last": None}
    tenth = max(1, len(rates) // 10)
    steady = rates[int(len(rates) * WARMUP_SHARE) :] or rates
    return {
        "tflops_sustained": statistics.median(steady),
        "tflops_min": min(steady),
        "tflops_first": statistics.median(rates[:tenth]),
        "tflops_last": statistics.median(rates[-tenth:]),
    }


def run(ctx: Context, seconds: float) -> tuple[Stress | None, str]:
    s = settings(seconds, ctx.overrides.get(STRESS, {}))
    before = counters(ctx.read(COUNTED))
    ctx.sampler.set_phase(STRESS)
    ctx.progress.phase(f"GEMM stress, {s['seconds']:g} s", total=float(s["seconds"]))
    rates: dict[int, list[float]] = {}

    def on_event(event: dict[str, Any]) -> None:
        kind, device = event.get("kind"), event.get("device")
        if not isinstance(device, int):
            return
        if kind == "loaded":
            ctx.sampler.mark_loaded(ctx.gpu_of(events.uuid(device), device))
        elif kind == "window" and isinstance(event.get("tflops"), int | float):
            rates.setdefault(device, []).append(float(event["tflops"]))
            if isinstance(event.get("t"), int | float):
                ctx.progress.update(min(float(event["t"]), float(s["seconds"])), f"{len(events.devices)} GPU(s)")

    events = Events(on_event)
    result, how = run_child(ctx, [str(script("stress")), settings_json(s)], events, python=ctx.python)
    after = counters(ctx.read(COUNTED))
    if result.outcome is ChildOutcome.NOT_STARTED:
        return _not_run(ctx, f"the stress test could not start: {result.detail}")
    if result.ok and result.data.get("no_cuda"):
        return _not_run(ctx, f"the stress test could not use CUDA: {result.data['no_cuda']}")
    if not events.devices:
        return _not_run(ctx, f"the stress test stopped before loading any GPU: {result.detail or 'no answer'}")
    gpus = []
    for device, data in sorted(events.results.items()):
        index = ctx.gpu_of(events.uuid(device), device)
        gpus.append(
            StressGpu(
                gpu_index=index,
                torch_index=device,
                ok=bool(data.get("ok")),
                error=str(data.get("error", "")),
                seconds=float(data.get("seconds", 0.0)),
                windows=int(data.get("windows", 0)),
                result_errors=int(data.get("result_errors", 0)),
                checks=int(data.get("checks", 0)),
                dtype=str(data.get("dtype", "")),
                samples=ctx.sampler.summary(STRESS, index),
                before=before.get(index) if index is not None else None,
                after=after.get(index) if index is not None else None,
                **figures(rates.get(device, [])),
            )
        )
    cut = ""
    unfinished = events.unfinished()
    if how == BUDGET:
        cut = ctx.budget_note("the stress test was cut short")
        ctx.notes.append(cut)
        for device in unfinished:  # what it measured until then is still a figure
            index = ctx.gpu_of(events.uuid(device), device)
            gpus.append(
                StressGpu(
                    index,
                    device,
                    True,
                    "",
                    windows=len(rates.get(device, [])),
                    samples=ctx.sampler.summary(STRESS, index),
                    before=before.get(index) if index is not None else None,
                    after=after.get(index) if index is not None else None,
                    **figures(rates.get(device, [])),
                )
            )
    elif not result.ok and unfinished:
        for device in unfinished:
            others = [f"GPU {ctx.gpu_of(events.uuid(d), d)}" for d in unfinished if d != device]
            also = f" (and {', '.join(others)}, stressed at the same time)" if others else ""
            index = ctx.gpu_of(events.uuid(device), device)
            gpus.append(StressGpu(index, device, False, f"{describe(result, how)} while stressing this GPU{also}"))
    elif not result.ok:
        ctx.notes.append(f"the stress test ended badly after its last GPU: {result.detail}")
    gpus.sort(key=lambda g: g.torch_index)
    return Stress(float(s["seconds"]), str(s["dtype"]), int(s["n"]), tuple(gpus), cut), ""


def _not_run(ctx: Context, why: str) -> tuple[None, str]:
    ctx.notes.append(why)
    return None, why
