"""What every phase of the deep diagnostics shares: the run's context, a child run within the
budget (and ended when it stalls), and the reading of its ``protocol.DIAG`` events.

A deep child reports every second or so (progress, timed windows): one that says nothing for
:data:`~gpudiag.checks.deep.levels.STALL_SECONDS` is hung (a finding about the GPU under test),
while one still working when the run's ``--budget`` runs out is cut short (the test could not
finish: a note, exit 5, unless something failed). Either way its whole process group is killed,
which frees its GPU memory.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpudiag.checks.deep.progress import Progress
from gpudiag.children import protocol
from gpudiag.probe.child import ChildOutcome, ChildResult, start

if TYPE_CHECKING:
    from gpudiag.checks.deep.sampler import Sampler
    from gpudiag.model import Machine
    from gpudiag.probe.collect import MachineSource

BUDGET, STALLED = "budget", "stalled"


@dataclass
class Context:
    """The deep run's shared state: NVML (one reader at a time: the sampler reads beside the phases),
    the interpreter that runs the children, the budget, the notes of what could not run."""

    source: MachineSource
    machine: Machine
    python: str | None
    budget_end: float  # time.monotonic() when the run's --budget runs out
    budget: float
    overrides: dict[str, dict[str, Any]]  # per phase, settings that replace the level's (tests: the CPU)
    sampler: Sampler
    progress: Progress = field(default_factory=Progress)
    lock: threading.Lock = field(default_factory=threading.Lock)
    notes: list[str] = field(default_factory=list)
    _topology: Machine | None = None

    def read(self, groups: frozenset[Any]) -> Machine:
        with self.lock:
            return self.source.read(groups)

    def topology(self) -> Machine:
        """NVLinks and P2P status between every pair (read once: ~130 NVML calls per GPU)."""
        from gpudiag.model import FactGroup

        if self._topology is None:
            self._topology = self.read(frozenset({FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PCIE}))
        return self._topology

    def nvml_index_of(self, uuid: str) -> int | None:
        key = uuid.removeprefix("GPU-").lower()
        for gpu in self.machine.gpus:
            if gpu.uuid.value and gpu.uuid.value.removeprefix("GPU-").lower() == key:
                return gpu.index
        return None

    def gpu_of(self, uuid: str, device: int) -> int | None:
        """The NVML index of a child's device: by UUID; a CPU stand-in (tests) is the GPU at its position."""
        if uuid.startswith("cpu-"):
            gpus = self.machine.gpus
            return gpus[device].index if 0 <= device < len(gpus) else None
        return self.nvml_index_of(uuid)

    def remaining(self) -> float:
        return self.budget_end - time.monotonic()

    def budget_note(self, what: str) -> str:
        return f"{what}: the run's --budget of {self.budget:g} s ran out"


class Events:
    """A deep child's ``DIAG`` lines, kept by kind and device; ``on_event`` sees each as it comes."""

    def __init__(self, on_event: Callable[[dict[str, Any]], None] = lambda event: None) -> None:
        self.on_event = on_event
        self.devices: list[dict[str, Any]] = []
        self.started: list[int] = []
        self.results: dict[int, dict[str, Any]] = {}
        self.other: list[dict[str, Any]] = []
        self.last = time.monotonic()  # when the child last said anything
        self.heard = False  # the child has said something: its start-up is over

    def line(self, text: str) -> None:
        self.last, self.heard = time.monotonic(), True
        data = protocol.payload(text, protocol.DIAG)
        if data is None:
            return
        kind = data.get("kind")
        if kind == "devices" and isinstance(data.get("devices"), list):
            self.devices = [d for d in data["devices"] if isinstance(d, dict)]
        elif kind == "start" and isinstance(data.get("device"), int):
            self.started.append(data["device"])
        elif kind == "result" and isinstance(data.get("device"), int):
            self.results[data["device"]] = data
        else:
            self.other.append(data)
        self.on_event(data)

    def uuid(self, device: int) -> str:
        return next((str(d.get("uuid", "")) for d in self.devices if d.get("index") == device), "")

    def unfinished(self) -> list[int]:
        """Devices that started and never reported."""
        return [d for d in self.started if d not in self.results]


def run_child(
    ctx: Context,
    args: list[str],
    events: Events,
    *,
    python: str | None = None,
    stall: float | None = None,
    limit: float | None = None,
    start_seconds: float | None = None,
) -> tuple[ChildResult, str]:
    """Run a deep child to its end; (its result, ``BUDGET`` / ``STALLED`` / "" for how it ended).

    ``stall``: seconds of silence after which it is hung, once it has said anything (its start-up,
    torch's import and CUDA's, may take ``start_seconds``); ``limit``: seconds it may take in all after
    its start-up (a child that reports only at its end)."""
    from gpudiag.checks.deep.levels import STALL_SECONDS, START_SECONDS

    begun = time.monotonic()
    grace = START_SECONDS if start_seconds is None else start_seconds
    silence = STALL_SECONDS if stall is None else stall
    events.last = begun
    cause = [""]

    def own_deadline() -> float:
        if limit is not None:
            return begun + grace + limit
        return events.last + silence if events.heard else begun + grace

    def deadline() -> tuple[float, str]:
        own = own_deadline()
        if ctx.budget_end <= own:
            cause[0] = BUDGET
            return ctx.budget_end, ctx.budget_note("cut short")
        cause[0] = STALLED
        if limit is not None:
            return own, f"no answer within {grace + limit:g} s (hung, e.g. in a GPU kernel or a collective)"
        return own, f"no progress for {silence:g} s (hung, e.g. in a GPU kernel)"

    running = start(args, python=python)
    try:
        result = running.finish(events.line, deadline)
    except BaseException:  # Ctrl-C: the child and everything it started go too, freeing the GPUs
        running.kill()
        raise
    return result, cause[0] if result.outcome is ChildOutcome.TIMEOUT else ""


def describe(result: ChildResult, how: str) -> str:
    """One line for how a child ended badly (a crash, a hang), for the GPUs it was testing."""
    if result.outcome is ChildOutcome.TIMEOUT:
        return (
            f"the test process was ended: {result.detail}"
            if how == BUDGET
            else f"the test process stalled: {result.detail}"
        )
    if result.outcome is ChildOutcome.CRASHED:
        return f"the test process {result.detail}"
    return f"the test process failed: {result.detail}"


def settings_json(settings: dict[str, Any]) -> str:
    """A child's settings, with this process's id: the child ends itself once gpudiag is gone."""
    return json.dumps({**settings, "parent": os.getpid()}, separators=(",", ":"))
