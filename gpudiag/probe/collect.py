"""Builds a Machine from the sources: live (NVML, psutil, /proc) or replayed from a file."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from msgspec.structs import replace

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import (
    ALL_GROUPS,
    MACHINE_SCHEMA,
    FactGroup,
    HostInfo,
    Machine,
    Reading,
    Reason,
    TorchBuild,
    TorchRuntime,
)
from gpudiag.probe.nvml import HostResolver, NvmlSession, no_process_stats

REPLAY_ENV = "GPUDIAG_REPLAY"


@dataclass
class MachineSource:
    """An open source of machine readings. ``read()`` may be called many times (watch).

    ``facts``: the groups of GPU facts each read asks NVML for (a command asks for what it shows
    or judges; the rest stay ``Reason.NOT_READ``).
    """

    name: str
    # pynvml; on a replay, pynvml's own functions on a loader state of their own whose library is the
    # replay's fake (gpudiag.replay.c_boundary): the real module is never changed, two replays can be open.
    lib: Any
    host: HostResolver
    host_info: HostInfo
    env: tuple[tuple[str, str], ...]
    torch_build: Reading[TorchBuild]
    kernel_module_version: Reading[str]
    description: str = ""
    facts: frozenset[FactGroup] = ALL_GROUPS
    # The readings (gpudiag.readings rows' keys) each read asks for of those groups, when a command
    # shows only some (`list --query`): the rest of the groups' rows are not asked. None: all of them.
    only: frozenset[str] | None = None
    # Recorded in snapshots; a live source leaves it to the commands that start torch.
    torch_runtime: Reading[TorchRuntime] = field(
        default_factory=lambda: Reading.missing(Reason.UNAVAILABLE, "torch runtime not probed")
    )
    # The replayed machine: GPUs it holds without details keep saying "not recorded".
    recorded: Machine | None = None
    # NVML indices of a snapshot of some GPUs (`list --json --id 3`): the fake enumerates
    # them from 0, the readings keep their real numbers. Empty: indices are positions.
    indices: tuple[int, ...] = ()
    replay: str = ""  # the example name or snapshot file replayed ("" live)
    session: NvmlSession = field(init=False)
    # A replay playing its recorded series (gpudiag.replay.series): the sample the fake NVML answers.
    series: Any = None
    sample: int = 0

    def __post_init__(self) -> None:
        self.session = NvmlSession(self.lib, self.host)
        self.session.open(self.kernel_module_version)

    def read(self, facts: frozenset[FactGroup] | None = None, only: frozenset[str] | None = None) -> Machine:
        """One reading: ``facts`` overrides the source's groups for this read (e.g. a re-read of the link),
        and ``only`` its rows (see ``only`` above)."""
        wanted = self.facts if facts is None else facts
        rows = self.only if only is None else only
        if FactGroup.DETAILS in wanted and self.session.process_stats is no_process_stats:
            self.session.process_stats = _process_stats(self.recorded)
        gpus = self.session.read_gpus(wanted, rows) if self.session.opened else ()
        if self.indices:
            gpus = tuple(replace(g, index=self.indices[g.index]) for g in gpus)
        return Machine(
            schema=MACHINE_SCHEMA,
            source=self.name,
            # A replay holds one moment: the time its snapshot was taken (0: the file does not say).
            collected_at=self.recorded.collected_at if self.recorded is not None else time.time(),
            nvml=self.session.info,
            gpus=gpus,
            host=self.host_info,
            env=self.env,
            torch_build=self.torch_build,
            torch_runtime=self.torch_runtime,
        )

    def play(self) -> int:
        """Have a replay answer with its recorded series (gpudiag/machines/series/), from its first
        sample: monitors print what the machine read over time, never one snapshot again and again.
        Returns how many samples it holds: 1 for a snapshot without a series; 0 live (no end)."""
        if self.recorded is None:
            return 0
        from gpudiag.replay import series

        self.series = series.load_for(self.replay, self.recorded)
        if self.series is None:
            return 1
        self.seek(0)
        return len(self.series)

    def seek(self, n: int) -> None:
        """Answer from sample ``n`` of the series being played."""
        self.sample = n
        self.lib.set_machine(self.series.machine_at(self.recorded, n))

    def sample_time(self) -> float:
        """When the sample being read was taken: now live; the series' own time on a replay."""
        if self.series is not None:
            return float(self.series.time_of(self.sample))
        if self.recorded is not None:
            return self.recorded.collected_at  # a snapshot's one moment
        return time.time()

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> MachineSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process_stats(recorded: Machine | None) -> Any:
    if recorded is None:
        from gpudiag.probe.details import PsutilProcessStats

        return PsutilProcessStats()
    from gpudiag.replay.fake_details import RecordedProcessStats

    return RecordedProcessStats(recorded)


def open_source(
    replay: str | None = None,
    environ: Mapping[str, str] | None = None,
    facts: frozenset[FactGroup] = ALL_GROUPS,
    only: frozenset[str] | None = None,
) -> MachineSource:
    """Open the live machine, or replay an example name / snapshot file, to read ``facts`` (of their
    rows ``only`` these keys, when given)."""
    environ = os.environ if environ is None else environ
    source = _replay_source(replay) if replay else _live_source(environ)
    source.facts = facts
    source.only = only
    return source


def _import_pynvml() -> Any:
    """nvidia-ml-py's module, refusing the stale copy that the deprecated `pynvml` package ships."""
    try:
        import pynvml  # loads libnvidia-ml only in nvmlInit
    except ImportError as exc:
        raise GpudiagError(
            f"cannot import pynvml ({exc}): install nvidia-ml-py (`pip install nvidia-ml-py`)", ExitCode.NVML_ERROR
        ) from None
    if not hasattr(pynvml, "nvmlDeviceGetComputeRunningProcesses_v3"):
        raise GpudiagError(
            f"the pynvml module at {getattr(pynvml, '__file__', '?')} is an outdated copy (the deprecated 'pynvml' "
            "package shadows nvidia-ml-py): `pip uninstall pynvml && pip install --force-reinstall nvidia-ml-py`",
            ExitCode.NVML_ERROR,
        )
    return pynvml


def _live_source(environ: Mapping[str, str]) -> MachineSource:
    # The host's probes only here: a replay reads its host from the file (socket, pathlib, ast: ~4 ms).
    from gpudiag.probe import env as env_probe
    from gpudiag.probe.host import PsutilHost, host_info, kernel_module_version
    from gpudiag.probe.torch_static import torch_build

    pynvml = _import_pynvml()
    info = host_info()
    return MachineSource(
        name="live",
        lib=pynvml,
        host=PsutilHost(info.in_container),
        host_info=info,
        env=env_probe.relevant_env(environ),
        torch_build=torch_build(),
        kernel_module_version=kernel_module_version(),
    )


def _replay_source(spec: str) -> MachineSource:
    from gpudiag.replay import fixtures
    from gpudiag.replay.fake_host import RecordedHost
    from gpudiag.replay.fake_nvml import FakeNvml, ReplayTime

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
