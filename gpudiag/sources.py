"""The machine a command reads: the live one (:mod:`gpudiag.probe`) or a replayed file
(:mod:`gpudiag.replay`: an example name or a snapshot, answered by the fake NVML), chosen here,
above both, so that neither imports the other."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from gpudiag.model import ALL_GROUPS, FactGroup, Machine, Reading, Reason
from gpudiag.probe import collect as live
from gpudiag.probe.collect import MachineSource

REPLAY_ENV = "GPUDIAG_REPLAY"


def open_source(
    replay: str | None = None,
    environ: Mapping[str, str] | None = None,
    facts: frozenset[FactGroup] = ALL_GROUPS,
    only: frozenset[str] | None = None,
) -> MachineSource:
    """Open the live machine, or replay an example name / snapshot file, to read ``facts`` (of their
    rows ``only`` these keys, when given)."""
    environ = os.environ if environ is None else environ
    source = replay_source(replay) if replay else live.live_source(environ)
    source.facts = facts
    source.only = only
    return source


def replay_source(spec: str) -> MachineSource:
    """A machine file replayed: the fake NVML answers from it, its host and environment as recorded."""
    from gpudiag.replay import fixtures
    from gpudiag.replay.fake_host import RecordedHost
    from gpudiag.replay.fake_nvml import FakeNvml
    from gpudiag.replay.replay_time import ReplayTime

    machine, description = fixtures.load(spec)
    indices = tuple(g.index for g in machine.gpus)
    lib = FakeNvml(machine)
    source = MachineSource(
        name=f"replay:{spec}",
        lib=lib,
        host=RecordedHost(machine),
        host_info=machine.host,
        env=machine.env,
        torch_build=machine.torch_build,
        kernel_module_version=machine.nvml.kernel_module_version,
        description=description,
        torch_runtime=machine.torch_runtime,
        recorded=machine,
        indices=indices if indices != tuple(range(len(indices))) else (),
        replay=spec,
        load_series=lambda: _recorded_series(spec, machine),
        process_stats=lambda: _recorded_process_stats(machine),
    )
    source.session.cpu_count = 1024  # the recorded machine's CPUs, not this host's, size its affinity masks
    # A one-shot GPM read has nothing to wait for in a replay, and each GPU's window is the recorded one.
    time = ReplayTime(
        {
            position: gpu.profiling.value.window_s
            for position, gpu in enumerate(machine.gpus)
            if gpu.profiling.value is not None
        }
    )
    lib.replay_time = time
    source.session.gpm_clock, source.session.gpm_sleep = time.now, time.sleep
    source.session.unrecorded_details = {  # by position: the fake enumerates a snapshot's GPUs from 0
        position: (
            Reading.missing(Reason.NOT_RECORDED)
            if gpu.details.reason is Reason.NOT_READ  # the file holds none (an older gpudiag, or not read)
            else gpu.details
        )
        for position, gpu in enumerate(machine.gpus)
        if gpu.details.reason is not None
    }
    return source


def _recorded_series(spec: str, machine: Machine) -> Any:
    from gpudiag.replay import series  # only where a monitor plays it

    return series.load_for(spec, machine)


def _recorded_process_stats(machine: Machine) -> Any:
    from gpudiag.replay.fake_details import RecordedProcessStats  # only where the details are read

    return RecordedProcessStats(machine)


def collect(
    replay: str | None = None,
    environ: Mapping[str, str] | None = None,
    facts: frozenset[FactGroup] = ALL_GROUPS,
    only: frozenset[str] | None = None,
) -> Machine:
    """One reading of the machine's ``facts`` (every group unless a command asks for fewer; of their
    rows only the keys ``only`` names, when given)."""
    with open_source(replay, environ, facts, only) as source:
        return source.read()
