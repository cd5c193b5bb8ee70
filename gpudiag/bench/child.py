"""The benchmark runs in a child process; the parent reads NVML and shows the progress.

Why a child: gpudiag itself never imports torch or initialises CUDA (see probe/child.py).
One child both answers "can torch use CUDA here?" and measures, so torch is imported once
(a separate probe would cost a second import and CUDA initialisation). A hung copy cannot
take gpudiag down: the child's watchdog ends it when a task overruns its budget, and the
parent's timeout is the backstop. The child stops when the parent goes away (Ctrl-C).

The child prints one JSON event per line, each after ``EVENT_MARKER``:
``devices`` (what torch sees, peer access), ``tasks`` (the plan on these devices), then per
task ``start``, ``warm`` (after the warm-up: the parent reads the PCIe link under load) and
``result``; ``hung`` if the watchdog fires. Its final answer (``emit``) is ``{"done": true}``,
``{"no_cuda": why}`` or ``{"usage": why}``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from gpudiag.bench.engine import NoCudaError, Primitives, run_tasks
from gpudiag.bench.link import Link
from gpudiag.bench.placement import Placed, Placement, nodes_with_cpus
from gpudiag.bench.plan import (
    DeviceInfo,
    Mode,
    Plan,
    Task,
    overall_budget_seconds,
    task_budget_seconds,
    tasks,
    unknown_devices,
)
from gpudiag.probe.child import ChildOutcome, ChildResult, run_python

EVENT_MARKER = "@@GPUDIAG_BENCH@@"
TORCH_PRIMITIVES = "gpudiag.bench.torch_prims:TorchPrimitives"
HUNG_EXIT = 3
PARENT_GONE_EXIT = 4


# --- child side ----------------------------------------------------------------------


def load_primitives(spec: str) -> Primitives:
    module_name, _, attr = spec.partition(":")
    factory: Callable[[], Primitives] = getattr(importlib.import_module(module_name), attr)
    return factory()


class Watchdog:
    """Ends the child when a task overruns its budget, or when the parent has gone."""

    def __init__(
        self,
        plan: Plan,
        event: Callable[[dict[str, Any]], None],
        exit: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.monotonic,
        parent: Callable[[], int] = os.getppid,
    ) -> None:
        self.plan, self.event, self.exit, self.clock, self.parent = plan, event, exit, clock, parent
        self.parent_pid = parent()
        self.task: Task | None = None
        self.deadline: float | None = None
        self.budget = 0.0

    def on_task(self, task: Task | None) -> None:
        self.task = task
        self.budget = task_budget_seconds(self.plan, task) if task is not None else 0.0
        self.deadline = self.clock() + self.budget if task is not None else None

    def check(self) -> bool:
        """One look; True when it ended the child (``exit`` returns only in tests)."""
        if self.parent() != self.parent_pid:
            self.exit(PARENT_GONE_EXIT)
            return True
        if self.task is not None and self.deadline is not None and self.clock() > self.deadline:
            self.event({"kind": "hung", "task": self.task.index, "seconds": self.budget})
            self.exit(HUNG_EXIT)
            return True
        return False

    def start(self, interval: float = 0.5) -> threading.Thread:
        def loop() -> None:
            while True:
                time.sleep(interval)
                if self.check():
                    return

        thread = threading.Thread(target=loop, name="gpudiag-bench-watchdog", daemon=True)
        thread.start()
        return thread


def child_main(config_text: str, final: Callable[[dict[str, Any]], None]) -> None:
    """The child's whole job. ``final`` is run_python's ``emit``."""
    config = json.loads(config_text)
    lock = threading.Lock()

    def event(obj: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(EVENT_MARKER + json.dumps(obj) + "\n")
            sys.stdout.flush()

    plan = Plan.from_data(config["plan"])
    watchdog = Watchdog(plan, event)
    watchdog.start()  # from now on the child ends if gpudiag goes away
    try:
        prims = load_primitives(config.get("primitives", TORCH_PRIMITIVES))
    except NoCudaError as exc:
        final({"no_cuda": str(exc)})
        return
    count = prims.device_count()
    bad = unknown_devices(plan, count)
    if bad:
        final({"usage": bad})
        return
    ordinals = list(plan.devices) if plan.devices is not None else list(range(count))
    devices = prims.devices(ordinals)
    peer_access: list[list[Any]] = []
    if any(m.is_peer for m in plan.modes):
        peer_access = [[a, b, prims.can_access_peer(a, b)] for a in ordinals for b in ordinals if a != b]
    numa = {d.ordinal: numa_node_for(d, config.get("numa_by_uuid", {}), config.get("numa_by_pci", {})) for d in devices}
    event(
        {
            "kind": "devices",
            "devices": [asdict(d) for d in devices],
            "peer_access": peer_access,
            "numa_nodes": {str(k): v for k, v in numa.items()},
            "spin_kernel": prims.spin_kernel,
            "version": str(getattr(prims, "version", "")),
        }
    )
    todo = tasks(plan, devices)
    event({"kind": "tasks", "tasks": [_task_data(t) for t in todo]})
    clock: Callable[[], float] = getattr(prims, "clock", time.perf_counter)  # fakes bring a virtual one
    run_tasks(
        prims, plan, todo, {d.ordinal: d for d in devices}, numa, nodes_with_cpus(), event, watchdog.on_task, clock
    )
    final({"done": True})


def numa_node_for(device: DeviceInfo, by_uuid: dict[str, int | None], by_pci: dict[str, int | None]) -> int | None:
    key = device.uuid.lower().removeprefix("gpu-")
    if key in by_uuid:
        return by_uuid[key]
    return by_pci.get((device.pci_bus_id or "").lower())


def _task_data(task: Task) -> dict[str, Any]:
    return {
        "index": task.index,
        "mode": task.mode.value,
        "device": task.device,
        "peer": task.peer,
        "nbytes": task.nbytes,
    }


# --- parent side ---------------------------------------------------------------------


@dataclass(frozen=True)
class TaskOutcome:
    seconds_per_copy: tuple[float, ...]
    verified: bool | None
    spin_short: int
    placement: Placed | None
    error: str


@dataclass
class Outcome:
    """Everything the child said, and what the parent read while it ran."""

    devices: list[DeviceInfo] = field(default_factory=list)
    peer_access: dict[tuple[int, int], bool] = field(default_factory=dict)
    numa_nodes: dict[int, int | None] = field(default_factory=dict)
    spin_kernel: bool = True
    version: str = ""
    tasks: list[Task] = field(default_factory=list)
    results: dict[int, TaskOutcome] = field(default_factory=dict)
    links: dict[int, Link | None] = field(default_factory=dict)  # per task, read after its warm-up
    hung: tuple[int, float] | None = None
    no_cuda: str = ""
    usage: str = ""
    failure: str = ""  # the child hung, crashed or failed; what it measured before stays


class Collector:
    """Turns the child's event lines into an :class:`Outcome`, calling back as they come."""

    def __init__(
        self,
        read_link: Callable[[DeviceInfo], Link | None],
        on_tasks: Callable[[list[Task]], None] = lambda tasks: None,
        on_start: Callable[[Task], None] = lambda task: None,
    ) -> None:
        self.outcome = Outcome()
        self.read_link, self.on_tasks, self.on_start = read_link, on_tasks, on_start

    def line(self, text: str) -> None:
        if not text.startswith(EVENT_MARKER):
            return
        try:
            data = json.loads(text[len(EVENT_MARKER) :])
        except json.JSONDecodeError:
            return
        if isinstance(data, dict):
            self.event(data)

    def event(self, data: dict[str, Any]) -> None:
        out = self.outcome
        kind = data.get("kind")
        if kind == "devices":
            out.devices = [DeviceInfo(**d) for d in data["devices"]]
            out.peer_access = {(int(a), int(b)): bool(ok) for a, b, ok in data["peer_access"]}
            out.numa_nodes = {int(k): v for k, v in data["numa_nodes"].items()}
            out.spin_kernel = bool(data["spin_kernel"])
            out.version = str(data.get("version", ""))
        elif kind == "tasks":
            out.tasks = [
                Task(int(t["index"]), Mode(t["mode"]), int(t["device"]), t["peer"], int(t["nbytes"]))
                for t in data["tasks"]
            ]
            self.on_tasks(out.tasks)
        elif kind == "start":
            self.on_start(out.tasks[int(data["task"])])
        elif kind == "warm":
            task = out.tasks[int(data["task"])]
            device = next((d for d in out.devices if d.ordinal == task.device), None)
            out.links[task.index] = self.read_link(device) if device is not None else None
        elif kind == "result":
            placement = data.get("placement")
            out.results[int(data["task"])] = TaskOutcome(
                seconds_per_copy=tuple(float(s) for s in data.get("seconds_per_copy", ())),
                verified=data.get("verified"),
                spin_short=int(data.get("spin_short", 0)),
                placement=Placed(Placement(placement["placement"]), placement["gpu_node"], placement["detail"])
                if placement
                else None,
                error=str(data.get("error", "")),
            )
        elif kind == "hung":
            out.hung = (int(data["task"]), float(data["seconds"]))

    def finish(self, result: ChildResult, timeout: float) -> Outcome:
        out = self.outcome
        if result.ok:
            out.no_cuda = str(result.data.get("no_cuda", ""))
            out.usage = str(result.data.get("usage", ""))
            if not (out.no_cuda or out.usage or result.data.get("done")):
                out.failure = "the benchmark process ended without finishing"
            return out
        if out.hung is not None:
            task = out.tasks[out.hung[0]]
            out.failure = (
                f"{task.label()} did not finish within {out.hung[1]:.0f} s: the copy hung "
                "(see `dmesg` for Xid errors; the GPU may need a reset)"
            )
        elif result.outcome is ChildOutcome.TIMEOUT:
            out.failure = f"the benchmark process did not finish within {timeout:.0f} s (hung in CUDA?)"
        elif result.outcome is ChildOutcome.CRASHED:
            out.failure = f"the benchmark process {result.detail}"
        else:
            out.failure = f"the benchmark process failed: {result.detail}"
        return out


def child_code(config: dict[str, Any]) -> str:
    return f"from gpudiag.bench.child import child_main\nchild_main({json.dumps(config)!r}, emit)\n"


def run_child(
    plan: Plan,
    collector: Collector,
    *,
    gpu_count: int,
    numa_by_uuid: dict[str, int | None],
    numa_by_pci: dict[str, int | None],
    primitives: str = TORCH_PRIMITIVES,
    launcher: Callable[..., ChildResult] = run_python,
    timeout: float | None = None,
) -> Outcome:
    """Run the benchmark in a child with a timeout; the collector sees every line as it comes."""
    config = {
        "plan": plan.to_data(),
        "numa_by_uuid": numa_by_uuid,
        "numa_by_pci": numa_by_pci,
        "primitives": primitives,
    }
    limit = timeout if timeout is not None else overall_budget_seconds(plan, gpu_count)
    result = launcher(child_code(config), timeout=limit, on_line=collector.line)
    return collector.finish(result, limit)
