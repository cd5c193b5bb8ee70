"""Child: the transfer benchmark, run by gpudiag's own interpreter (it uses gpudiag's engine).

``python child.py CONFIG_JSON``: the plan, the NUMA maps and the primitives to time with. It
prints one event per line after ``protocol.EVENT`` (see :mod:`gpudiag.bench.runner`, the parent
side) and ends with one result: ``{"done": true}``, ``{"no_cuda": why}`` or ``{"usage": why}``.
A watchdog ends it when a task overruns its budget or when gpudiag goes away.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from gpudiag.bench.engine import NoCudaError, Primitives, run_tasks
from gpudiag.bench.placement import nodes_with_cpus
from gpudiag.bench.plan import DeviceInfo, Plan, Task, task_budget_seconds, tasks, unknown_devices
from gpudiag.children import protocol

TORCH_PRIMITIVES = "gpudiag.bench.torch_prims:TorchPrimitives"
HUNG_EXIT = 3
PARENT_GONE_EXIT = 4


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
    """The child's whole job. ``final`` is :func:`protocol.emit` (tests pass a list's append)."""
    config = json.loads(config_text)
    lock = threading.Lock()

    def event(obj: dict[str, Any]) -> None:
        with lock:
            protocol.write(protocol.EVENT, json.dumps(obj))

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


if __name__ == "__main__":
    # Run by path, this folder is first on sys.path: its modules (plan, report, stats, ...) must not
    # answer for others of those names that torch imports.
    if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
        del sys.path[0]
    child_main(sys.argv[1], protocol.emit)
