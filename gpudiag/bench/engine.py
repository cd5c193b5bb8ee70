"""The measuring loop, over injectable copy and clock primitives.

Method (after NVIDIA's nvbandwidth), per task:
1. buffers allocated once, on the CPUs of the GPU's NUMA node (so host pages are local),
   the source filled with a pattern that differs per task;
2. untimed warm-up copies (they also enable peer access, which CUDA does lazily), then a
   synchronisation and the ``on_warm`` hook: the GPU is busy, the link at its loaded speed;
3. the destination cleared, so that verification cannot pass on a stale buffer;
4. ``samples`` samples of ``iters`` copies. Asynchronous modes: a spin kernel first, then
   the start event, the copies, the end event, so the host's enqueue cost falls inside the
   spin and outside the window; the spin lasts at least twice the longest enqueue seen.
   Blocking and pageable modes: a wall clock around each call and its synchronisation;
5. synchronise and verify that the destination holds the source.

Only :mod:`gpudiag.bench.torch_prims` implements the primitives with torch; tests inject
fakes. Everything here is plain Python.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpudiag.bench.placement import Placed, placed_on
from gpudiag.bench.plan import DeviceInfo, Plan, Task

MIN_SPIN_SECONDS = 0.01  # far longer than enqueueing 16 copies (tens of microseconds each)


class NoCudaError(Exception):
    """torch cannot use CUDA here; the message says why, in one line."""


class Copy(Protocol):
    """One task's buffers, ready to copy."""

    def run(self) -> None:
        """Issue one copy (asynchronous modes) or do it (blocking ones)."""

    def clear(self) -> None:
        """Fill the destination(s) with a value the source does not hold."""

    def start_sample(self) -> None:
        """After the start event: make every stream the copies use wait for it."""

    def end_sample(self) -> None:
        """Before the end event: make the timing stream wait for every copy."""

    def verify(self) -> bool:
        """Whether the destination(s) hold the source(s)."""

    def close(self) -> None:
        """Free the buffers."""


class Primitives(Protocol):
    spin_kernel: bool  # whether spin() really spins (else enqueue cost is inside the window)

    def device_count(self) -> int: ...

    def devices(self, ordinals: Sequence[int]) -> list[DeviceInfo]:
        """Facts about these devices (creating their CUDA contexts)."""
        ...

    def can_access_peer(self, device: int, peer: int) -> bool: ...

    def prepare(self, task: Task) -> Copy: ...

    def synchronize(self, devices: Sequence[int]) -> None: ...

    def spin(self, device: int, seconds: float) -> None: ...

    def record(self, device: int) -> Any: ...

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two recorded events, once the end one has happened."""
        ...

    def release(self) -> None:
        """Return cached device and pinned host memory after a task."""


@dataclass(frozen=True)
class Measured:
    seconds_per_copy: tuple[float, ...]  # one per sample
    verified: bool
    spin_short: int  # samples whose enqueue outlasted the spin kernel


def measure(
    prims: Primitives,
    copy: Copy,
    task: Task,
    plan: Plan,
    on_warm: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
) -> Measured:
    """Warm up, time ``plan.samples`` samples and verify, on buffers already prepared."""
    devices = task.devices
    for _ in range(plan.warmup):
        copy.run()
    prims.synchronize(devices)
    on_warm()
    copy.clear()
    prims.synchronize(devices)
    seconds: list[float] = []
    spin_seconds, short = MIN_SPIN_SECONDS, 0
    for _ in range(plan.samples):
        if task.mode.timed_with_events:
            prims.spin(task.device, spin_seconds)
            began = clock()
            start = prims.record(task.device)
            copy.start_sample()
            for _ in range(plan.iters):
                copy.run()
            copy.end_sample()
            end = prims.record(task.device)
            enqueue = clock() - began
            if enqueue >= spin_seconds or not prims.spin_kernel:
                short += 1
            spin_seconds = max(spin_seconds, 2 * enqueue)
            seconds.append(prims.elapsed(start, end) / plan.iters)
        else:
            total = 0.0
            for _ in range(plan.iters):
                began = clock()
                copy.run()
                prims.synchronize(devices)
                total += clock() - began
            seconds.append(total / plan.iters)
    prims.synchronize(devices)
    return Measured(tuple(seconds), copy.verify(), short)


def describe(exc: BaseException) -> str:
    """One line for an exception raised while copying (OOM, a CUDA error)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    name = type(exc).__name__
    if "out of memory" in text.lower() or name == "OutOfMemoryError":
        name = "out of memory"
    out = f"{name}: {text}" if text else name
    return out if len(out) <= 200 else out[:197] + "..."


Emit = Callable[[dict[str, Any]], None]


def run_tasks(
    prims: Primitives,
    plan: Plan,
    tasks: Sequence[Task],
    devices: dict[int, DeviceInfo],
    numa_nodes: dict[int, int | None],
    host_nodes: dict[int, set[int]],
    emit: Emit,
    on_task: Callable[[Task | None], None] = lambda task: None,
    clock: Callable[[], float] = time.perf_counter,
    place: Callable[..., Any] = placed_on,
) -> None:
    """Measure every task in turn and emit its events: start, warm, result.

    A task that fails (out of memory, a CUDA error) is reported and the next one runs.
    ``on_task`` sees each task as it starts (and None at the end): the child's watchdog.
    """
    from gpudiag.bench.plan import does_not_fit

    for task in tasks:
        on_task(task)
        emit({"kind": "start", "task": task.index})
        result: dict[str, Any] = {"kind": "result", "task": task.index}
        why = does_not_fit(task, devices)
        if why:
            emit({**result, "error": why})
            continue
        with place(numa_nodes.get(task.device), host_nodes) as placed:
            result["placement"] = _placed(placed)
            try:
                copy = prims.prepare(task)
                try:
                    warm = functools.partial(emit, {"kind": "warm", "task": task.index})
                    measured = measure(prims, copy, task, plan, warm, clock)
                finally:
                    copy.close()
                result.update(
                    seconds_per_copy=list(measured.seconds_per_copy),
                    verified=measured.verified,
                    spin_short=measured.spin_short,
                )
            except Exception as exc:  # a failing copy is a finding about this task, not the end
                result["error"] = describe(exc)
            finally:
                prims.release()
        emit(result)
    on_task(None)


def _placed(placed: Placed) -> dict[str, Any]:
    return {"placement": placed.placement.value, "gpu_node": placed.gpu_node, "detail": placed.detail}
