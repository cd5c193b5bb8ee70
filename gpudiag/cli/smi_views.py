"""What the nvidia-smi views (`dmon`, `pmon`, `topo`, `nvlink`, `mig`, `stat`) share: one source opened,
its GPUs selected, and nvidia-smi's own one-line errors with its exit codes where NVML cannot serve.
No typer or rich here: the views' JSON runs without them (cli.plain_front)."""

from __future__ import annotations

from typing import Any

import msgspec

from gpudiag.cli.plain import Settings
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import FactGroup, Gpu, GpuState, Machine, NvmlStatus
from gpudiag.probe.collect import MachineSource
from gpudiag.render import smi_errors
from gpudiag.selection import GpuSelection, select_gpus
from gpudiag.sources import open_source


def say(line: str) -> None:
    """One line on stderr, as every gpudiag diagnostic (``gpudiag: ...``), outside text escaped."""
    from gpudiag.cli.plain import say

    say(line)


def fail(line: str, code: ExitCode) -> None:
    """nvidia-smi's line for what ends the view, and its exit code (typer takes a SystemExit as is)."""
    say(line)
    raise SystemExit(int(code))


class Opened(msgspec.Struct):
    source: MachineSource
    machine: Machine  # its first read (identity, and ``facts``)
    gpus: tuple[Gpu, ...]  # the selected GPUs NVML can read, in the order asked
    unusable: tuple[Gpu, ...]  # the selected GPUs it cannot (lost, no handle)

    def position(self, gpu: Gpu) -> int:
        """The GPU's place in the source's order (what the source's session reads by)."""
        return next(n for n, g in enumerate(self.machine.gpus) if g.index == gpu.index)

    def close(self) -> None:
        self.source.close()


def open_views(s: Settings, gpus: GpuSelection | None, facts: frozenset[FactGroup] = frozenset()) -> Opened:
    """Open the machine (live or replayed), read ``facts`` once, select ``gpus`` (the view's request parsed
    them: cli.smi_requests.selection; None: every GPU). NVML that cannot start, no GPU, or only unusable
    ones end the command here with nvidia-smi's line; a lost GPU among others is said on stderr now (the
    others are shown; :func:`finish` gives the exit code)."""
    source = open_source(s.replay, facts=facts)
    try:
        machine = source.read()
        if machine.nvml.status is not NvmlStatus.OK:
            fail(smi_errors.nvml_failure(machine.nvml), NVML_EXIT[machine.nvml.status])
        if not machine.gpus:
            fail(smi_errors.NO_DEVICES, ExitCode.NOT_FOUND)
        chosen = select_gpus(machine.gpus, gpus)
    except BaseException:
        source.close()
        raise
    usable = tuple(g for g in chosen if g.state is GpuState.OK)
    unusable = tuple(g for g in chosen if g.state is not GpuState.OK)
    for gpu in unusable:
        say(smi_errors.unusable_gpu(gpu))
    opened = Opened(source, machine, usable, unusable)
    if not usable:
        opened.close()
        finish(opened)
    return opened


def finish(opened: Opened, also: Any = ()) -> None:
    """The exit code for the GPUs that could not be shown (their lines are on stderr already): 15 for a
    lost one, 255 for another failure; nothing when every GPU was shown."""
    states = {g.state for g in (*opened.unusable, *also)}
    if GpuState.LOST in states:
        raise SystemExit(int(ExitCode.GPU_LOST))
    if states:
        raise SystemExit(int(ExitCode.NVML_ERROR))
