"""The check run's gathering: every fact the rules judge, read in the order that costs least.

torch's import takes seconds (1.5–5 s on a GPU node), so the torch child is started
first and NVML, the host and the environment are read while it imports. Then the
functional test is asked for (in that same child, once torch has answered and NVML
says the GPUs are there), the GPUs are re-read under load as the child reports, and
the device nodes are read last (CUDA's start-up may have loaded nvidia_uvm and created
its node). :func:`run` (gather, then judge) is the one entry point; the command only parses
options and renders.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import msgspec
from msgspec.structs import replace

from gpudiag.checks import LOADED_GROUPS, CheckResult, Facts, FunctionalResult, Options, functional_runner
from gpudiag.checks.deep.levels import LEVELS, DeepPlan, Level
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import FactGroup, Machine, NvmlStatus, Reading, Reason, TorchRuntime
from gpudiag.probe.child import Running

if TYPE_CHECKING:  # imported when used: the torch child starts before NVML, psutil and the host modules load
    from gpudiag.checks.deep.facts import DeepFacts
    from gpudiag.checks.deep.progress import Progress
    from gpudiag.probe.collect import MachineSource


class Plan(msgspec.Struct, frozen=True):
    """What to gather. ``torch_off`` / ``functional_off``: why torch is not started / the
    functional test not run ("" to do it)."""

    replay: str | None
    torch_off: str
    functional_off: str
    python: str | None = None
    timeout: float = 90.0  # for torch to answer (import, libraries, CUDA start-up)
    level: Level = LEVELS[1]  # check --level: its checks run; 2-4 add the deep diagnostics
    deep: DeepPlan | None = None  # the deep tests to run (None: no deep check selected)


class Gathered(msgspec.Struct, frozen=True):
    facts: Facts
    notes: tuple[str, ...]  # what could not run


class CheckRun(msgspec.Struct, frozen=True):
    facts: Facts
    results: tuple[CheckResult, ...]
    notes: tuple[str, ...]  # what could not run


def run(
    plan: Plan,
    options: Options,
    only: tuple[str, ...] = (),
    skip: tuple[str, ...] = (),
    progress: Progress | None = None,
) -> CheckRun:
    """The whole check: gather the facts, then judge them with the selected rules."""
    from gpudiag.checks import rules

    gathered = gather(plan, progress)
    failed: list[str] = []  # rules that raised: each is a check that could not run
    results = rules.run(gathered.facts, options, only, skip, plan.level.number, failed)
    return CheckRun(gathered.facts, tuple(results), (*gathered.notes, *failed))


def gather(plan: Plan, progress: Progress | None = None) -> Gathered:
    """Read the machine, ask torch, run the functional test and the deep tests, read the device nodes."""
    started = time.monotonic()
    live = not plan.replay
    wants_functional = live and not plan.torch_off and not plan.functional_off
    running = _launch(plan, wants_functional) if live and not plan.torch_off else None
    if live and plan.torch_off:
        _drop_early()
    try:
        with _open(plan) as source:
            machine = source.read()
            if plan.python is not None:
                # gpudiag's own torch files say nothing about the environment being checked.
                machine = replace(
                    machine, torch_build=Reading.missing(Reason.NOT_FOUND, f"see the torch of {plan.python}")
                )
            why = _functional_off(plan, machine, live)
            functional: tuple[FunctionalResult, ...] | None = None
            notes: list[str] = []
            if running is not None and plan.deep is not None and not plan.deep.force:
                _refuse_busy(plan, machine, running)
            if running is None:
                torch = _recorded_torch(machine, plan.torch_off)
            else:
                torch, functional, why = _torch_child(plan, running, source, machine, why, notes)
            deep, deep_why = None, ""
            if plan.deep is not None:
                deep, deep_why = _deep(plan, plan.deep, source, machine, torch, live, started, progress, notes)
    except BaseException:
        if running is not None:
            running.kill()
        raise
    if running is not None and torch.reason is Reason.UNAVAILABLE:
        notes.append(f"the torch probe could not start: {torch.detail}")
    devices = None
    if live:  # after torch: CUDA's own start-up may have loaded nvidia_uvm and created its node
        from gpudiag.probe.devices import read_device_facts

        devices = read_device_facts(tuple(n for g in machine.gpus if (n := g.minor_number.value) is not None))
    facts = Facts(
        machine=machine,
        torch=torch,
        devices=devices,
        functional=functional,
        functional_skip_reason=why,
        deep=deep,
        deep_skip_reason=deep_why,
    )
    return Gathered(facts, tuple(notes))


def _launch(plan: Plan, wants_functional: bool) -> Running:
    from gpudiag.probe import torch_runtime

    early = torch_runtime.take_early()  # started by gpudiag.entry, asking: _torch_child answers it
    if early is not None and plan.python is None:
        return early
    if early is not None:
        early.kill()
    return torch_runtime.launch(plan.python, ask=wants_functional)


def _drop_early() -> None:
    """torch is not wanted after all (e.g. ``--skip compat``): stop a child started early."""
    from gpudiag.probe import torch_runtime

    early = torch_runtime.take_early()
    if early is not None:
        early.kill()


# What `check` reads besides what its rules look at (rules.GROUPS): the deep diagnostics refuse GPUs
# in use (deep.run.busy), and --json carries per-GPU figures (render.check_view.gpus_json).
OWN_GROUPS = frozenset(
    {FactGroup.PROCESSES, FactGroup.THERMAL, FactGroup.ECC, FactGroup.MEMORY_HEALTH, FactGroup.RECOVERY}
)


def _open(plan: Plan) -> MachineSource:
    from gpudiag.checks.rules import GROUPS
    from gpudiag.probe.collect import open_source

    try:
        return open_source(plan.replay, facts=GROUPS | OWN_GROUPS)
    except UsageError:
        raise
    except GpudiagError as exc:  # e.g. the pynvml module is missing or stale: gpudiag cannot look
        raise GpudiagError(f"check could not run: {exc.message}", ExitCode.CHECK_INCOMPLETE) from None


def _functional_off(plan: Plan, machine: Machine, live: bool) -> str:
    if plan.functional_off:
        return plan.functional_off
    if not live:
        return "not run on a replayed machine"
    if machine.nvml.status is not NvmlStatus.OK:
        return "NVML unavailable (see nvml.init)"
    if plan.torch_off:
        return "needs torch (see compat.torch)"
    return ""


def _refuse_busy(plan: Plan, machine: Machine, running: Running) -> None:
    """The deep tests take most of every GPU's memory and all its compute: not beside someone's job."""
    from gpudiag.checks.deep.run import busy

    found = busy(machine, own=(running.proc.pid,) if running.proc is not None else ())
    if found:
        raise GpudiagError(
            f"check --level {plan.level.number}: other processes use {'; '.join(found)}: the deep tests would take "
            "their memory and compute; stop them (see `gpudiag list`) or pass --force",
            ExitCode.GPU_BUSY,
        )


def _deep(
    plan: Plan,
    deep: DeepPlan,
    source: MachineSource,
    machine: Machine,
    torch: Reading[TorchRuntime],
    live: bool,
    started: float,
    progress: Progress | None,
    notes: list[str],
) -> tuple[DeepFacts | None, str]:
    """Run the deep tests (check --level 2-4) once torch has answered; None and why when they cannot."""
    from gpudiag.checks.deep.run import run as run_deep

    why = ""
    if not live:
        why = "not run on a replayed machine"
    elif machine.nvml.status is not NvmlStatus.OK:
        why = "NVML unavailable (see nvml.init)"
    elif torch.value is None or not torch.value.cuda_available:
        why = "needs a torch that can use CUDA (see compat.torch)"
    if why or torch.value is None:  # asked for and not run: never READY on the checks that could run
        notes.append(f"the deep tests of --level {deep.level.number}: {why}")
        return None, why
    facts, found = run_deep(deep, source, machine, torch.value, plan.python, started, progress)
    notes.extend(found)
    return facts, ""


def _recorded_torch(machine: Machine, torch_off: str) -> Reading[TorchRuntime]:
    if torch_off:
        return Reading.missing(Reason.UNAVAILABLE, torch_off)
    if machine.torch_runtime.reason is Reason.UNAVAILABLE:
        return Reading.missing(Reason.UNAVAILABLE, "torch runtime not recorded in this snapshot")
    return machine.torch_runtime


def _torch_child(
    plan: Plan, running: Running, source: MachineSource, machine: Machine, why: str, notes: list[str]
) -> tuple[Reading[TorchRuntime], tuple[FunctionalResult, ...] | None, str]:
    """Tell the child whether to run the functional test, then read it to its end."""
    from gpudiag.probe import torch_runtime

    if why:
        running.send("")  # no test: the child reports torch's facts and ends
        torch, _ = torch_runtime.finish(running, plan.timeout)
        return torch, None, why
    running.send(json.dumps(functional_runner.settings()))
    collector = _collector(source, machine)
    torch, child = torch_runtime.finish(
        running, plan.timeout, collector.on_line, functional_runner.budget(len(machine.gpus))
    )
    if torch.value is None or not torch.value.cuda_available:
        return torch, None, "needs a torch that can use CUDA (see compat.torch)"
    functional, why = collector.finish(child)
    if why:
        notes.append(why)
    return torch, functional, why


def _collector(source: MachineSource, machine: Machine) -> functional_runner.Collector:
    """Collects the functional test's lines; re-reads a GPU's link and clock events when it is busy."""
    uuids = {(g.uuid.value or "").removeprefix("GPU-").lower(): g.index for g in machine.gpus if g.uuid.ok}

    def nvml_index_of(uuid: str) -> int | None:
        return uuids.get(uuid.removeprefix("GPU-").lower())

    def read_loaded(index: int) -> tuple[tuple[int, int] | None, int | None]:
        gpu = source.read(LOADED_GROUPS).gpu(index)
        gen, width = gpu.pcie.gen_current.value, gpu.pcie.width_current.value
        return (gen, width) if gen is not None and width is not None else None, gpu.clock_event_reasons.value

    return functional_runner.Collector(nvml_index_of, read_loaded)
