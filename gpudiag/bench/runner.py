"""The benchmark's parent side: start the child, read its events, read NVML while it runs.

Why a child (:mod:`gpudiag.bench.child`): gpudiag itself never imports torch or initialises
CUDA. One child both answers "can torch use CUDA here?" and measures, so torch is imported once
(a separate probe would cost a second import and CUDA initialisation). A hung copy cannot
take gpudiag down: the child's watchdog ends it when a task overruns its budget, and the
parent's timeout is the backstop. The child stops when the parent goes away (Ctrl-C).

The child prints one JSON event per line after ``protocol.EVENT``: ``devices`` (what torch
sees, peer access), ``tasks`` (the plan on these devices), then per task ``start``, ``warm``
(after the warm-up: the parent reads the PCIe link under load) and ``result``; ``hung`` if the
watchdog fires. Its final answer is ``{"done": true}``, ``{"no_cuda": why}`` or ``{"usage": why}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudiag.bench.link import Link
from gpudiag.bench.placement import Placed, Placement
from gpudiag.bench.plan import DeviceInfo, Mode, Plan, Task, overall_budget_seconds
from gpudiag.children import protocol
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.probe.child import run_child as run_program

if TYPE_CHECKING:
    from gpudiag.model import Gpu
    from gpudiag.probe.collect import MachineSource

TORCH_PRIMITIVES = "gpudiag.bench.torch_prims:TorchPrimitives"
CHILD = Path(__file__).resolve().with_name("child.py")  # run by path with gpudiag's own interpreter


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
        data = protocol.payload(text, protocol.EVENT)
        if data is not None:
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


def child_args(config: dict[str, Any]) -> list[str]:
    """The command line after the interpreter: the child's path and its configuration."""
    return [str(CHILD), json.dumps(config)]


def run_child(
    plan: Plan,
    collector: Collector,
    *,
    gpu_count: int,
    numa_by_uuid: dict[str, int | None],
    numa_by_pci: dict[str, int | None],
    primitives: str = TORCH_PRIMITIVES,
    launcher: Callable[..., ChildResult] = run_program,
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
    result = launcher(child_args(config), python=sys.executable, timeout=limit, on_line=collector.line)
    return collector.finish(result, limit)


def no_device(message: str) -> GpudiagError:
    return GpudiagError(f"no usable CUDA device: {message}", ExitCode.NO_CUDA_DEVICE)


def measure(
    plan: Plan,
    source: MachineSource,
    gpus: Sequence[Gpu],
    on_tasks: Callable[[list[Task]], None] = lambda tasks: None,
    on_start: Callable[[Task], None] = lambda task: None,
) -> Outcome:
    """`bench-transfer`'s run: the child measures, this process reads each GPU's PCIe link from
    ``source`` under load; no usable device (or a usage error torch found) is raised, not returned."""
    from gpudiag.bench.placement import pci_numa_node
    from gpudiag.bench.preflight import match_gpu, numa_maps
    from gpudiag.model import FactGroup

    def read_link(device: DeviceInfo) -> Link | None:
        # Right after the warm-up the GPU is busy: an idle link downshifts, a loaded one shows its speed.
        gpu = match_gpu(device.uuid, device.pci_bus_id, gpus)
        if gpu is None:
            return None
        pcie = source.read(frozenset({FactGroup.PCIE})).gpu(gpu.index).pcie
        gen, width = pcie.gen_current.value, pcie.width_current.value
        return Link(gen, width) if gen and width else None

    by_uuid, by_pci = numa_maps(gpus, pci_numa_node)
    outcome = run_child(
        plan,
        Collector(read_link, on_tasks, on_start),
        gpu_count=len(gpus),
        numa_by_uuid=by_uuid,
        numa_by_pci=by_pci,
    )
    if outcome.no_cuda:
        raise no_device(outcome.no_cuda)
    if outcome.usage:
        raise UsageError(outcome.usage)
    if not outcome.devices and outcome.failure:
        raise no_device(f"torch could not start CUDA: {outcome.failure}")
    return outcome
