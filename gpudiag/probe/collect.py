"""Builds a Machine from its sources: :class:`MachineSource` reads NVML (the live module or a fake one
handed in), the host and the environment; :func:`live_source` opens the live machine. A replay's
source is made by :mod:`gpudiag.sources`, which chooses between the two."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
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
from gpudiag.probe.nvml import NvmlSession
from gpudiag.probe.nvml_processes import HostResolver, no_process_stats


class MachineSource:
    """An open source of machine readings. ``read()`` may be called many times (watch).

    ``facts``: the groups of GPU facts each read asks NVML for (a command asks for what it shows
    or judges; the rest stay ``Reason.NOT_READ``). A plain class, not a dataclass: importing
    dataclasses and building one costs ~2 ms of every command's start (`list --query`'s floor).
    """

    def __init__(
        self,
        *,
        name: str,
        # pynvml; on a replay, pynvml's own functions on a loader state of their own whose library is the
        # replay's fake (gpudiag.replay.c_boundary): the real module is never changed, two replays can be open.
        lib: Any,
        host: HostResolver,
        host_info: HostInfo,
        env: tuple[tuple[str, str], ...],
        torch_build: Reading[TorchBuild],
        kernel_module_version: Reading[str],
        description: str = "",
        facts: frozenset[FactGroup] = ALL_GROUPS,
        # The readings (gpudiag.readings rows' keys) each read asks for of those groups, when a command
        # shows only some (`list --query`): the rest of the groups' rows are not asked. None: all of them.
        only: frozenset[str] | None = None,
        # Recorded in snapshots; a live source leaves it to the commands that start torch.
        torch_runtime: Reading[TorchRuntime] | None = None,
        # The replayed machine: GPUs it holds without details keep saying "not recorded".
        recorded: Machine | None = None,
        # NVML indices of a snapshot of some GPUs (`list --json --id 3`): the fake enumerates
        # them from 0, the readings keep their real numbers. Empty: indices are positions.
        indices: tuple[int, ...] = (),
        replay: str = "",  # the example name or snapshot file replayed ("" live)
        # A replay's recorded series (gpudiag/machines/series/), loaded when played; None: it has none.
        load_series: Callable[[], Any] | None = None,
        # What answers the details' per-process statistics: psutil live, the recorded machine on a replay.
        process_stats: Callable[[], Any] | None = None,
    ) -> None:
        self.name = name
        self.lib = lib
        self.host = host
        self.host_info = host_info
        self.env = env
        self.torch_build = torch_build
        self.kernel_module_version = kernel_module_version
        self.description = description
        self.facts = facts
        self.only = only
        self.torch_runtime: Reading[TorchRuntime] = (
            Reading.missing(Reason.UNAVAILABLE, "torch runtime not probed") if torch_runtime is None else torch_runtime
        )
        self.recorded = recorded
        self.indices = indices
        self.replay = replay
        self.load_series = load_series
        self.process_stats: Callable[[], Any] = _live_process_stats if process_stats is None else process_stats
        # A replay playing its recorded series (gpudiag.replay.series): the sample the fake NVML answers.
        self.series: Any = None
        self.sample = 0
        self.session = NvmlSession(self.lib, self.host)
        self.session.open(self.kernel_module_version)

    def read(self, facts: frozenset[FactGroup] | None = None, only: frozenset[str] | None = None) -> Machine:
        """One reading: ``facts`` overrides the source's groups for this read (e.g. a re-read of the link),
        and ``only`` its rows (see ``only`` above)."""
        wanted = self.facts if facts is None else facts
        rows = self.only if only is None else only
        if FactGroup.DETAILS in wanted and self.session.process_stats is no_process_stats:
            self.session.process_stats = self.process_stats()
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
        self.series = self.load_series() if self.load_series is not None else None
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


def _live_process_stats() -> Any:
    from gpudiag.probe.details import PsutilProcessStats

    return PsutilProcessStats()


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


def live_source(environ: Mapping[str, str]) -> MachineSource:
    """The live machine: NVML through nvidia-ml-py, psutil and /proc, the environment given."""
    # The host's probes only here: a replay reads its host from the file.
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
