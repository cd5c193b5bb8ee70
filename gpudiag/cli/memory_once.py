"""One sample of `gpudiag memory`: read, then JSON, node_exporter's textfile or the tables. The Typer
command (cli.memory_cmd) and the plain front (cli.plain_front) both run it; the watch is the
command's. No typer or rich here: the tables import them when they are printed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudiag.cli import plain
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.cli.plain import Settings
    from gpudiag.memory.request import Request
    from gpudiag.memory.view import MemoryView
    from gpudiag.model import Machine
    from gpudiag.selection import GpuSelection


def first_read(s: Settings, gpus: GpuSelection | None, source: Any) -> tuple[Machine, set[int] | None, Any]:
    """The first sample, NVML's failure ended here; the indices of the GPUs ``gpus`` names (None:
    every GPU); the replay's recording."""
    from gpudiag.memory.tracked import recording_for
    from gpudiag.selection import select_gpus

    first = source.read()
    plain.require_nvml(first.nvml)
    wanted = {g.index for g in select_gpus(first.gpus, gpus)} if gpus is not None else None
    return first, wanted, recording_for(s.replay)


def run(s: Settings, r: Request, wall: Callable[[], float] = time.time) -> None:
    """One sample of what ``r`` asks (no watch: cli.memory_cmd runs those); ``wall``: the clock of a
    live sample's timestamp."""
    from gpudiag.memory.request import prepare

    prepared = prepare(r)  # the usage errors first; a watch is not run here
    if prepared.watch is not None:
        raise AssertionError("a memory watch runs in cli.memory_cmd")
    sample(s, r, prepared.gpus, wall)


def sample(s: Settings, r: Request, gpus: GpuSelection | None, wall: Callable[[], float]) -> None:
    """Read and show one sample of ``gpus`` (None: every GPU), as ``r`` asks it shown."""
    from gpudiag.memory.tracked import one_sample
    from gpudiag.memory.view import GROUPS
    from gpudiag.sources import open_source

    with open_source(s.replay, facts=GROUPS) as source:
        first, wanted, recording = first_read(s, gpus, source)
        view = one_sample(first, wanted, s.replay is not None, recording)
    show(s, r, view, wall)


def show(s: Settings, r: Request, view: MemoryView, wall: Callable[[], float]) -> None:
    """One sample: node_exporter's textfile, JSON or the tables; a lost GPU's line and exit code."""
    replayed = s.replay is not None
    if r.textfile is not None:
        from gpudiag.export.textfile import write_memory

        write_memory(r.textfile, view, live=not replayed)
    elif r.json_output:
        import json  # only with --json: ~1.5 ms of start-up otherwise

        from gpudiag.fleet.identity import slurm_node
        from gpudiag.render import memory_json

        stamp = 0.0 if replayed else wall()  # a replay's one-shot is deterministic, as in `list`
        plain.write(json.dumps(memory_json.to_json(view, stamp, slurm_node=slurm_node()), indent=2) + "\n")
    else:
        from gpudiag.cli.common import make_console
        from gpudiag.render import memory_view

        make_console(s).print(memory_view.render(view))
    line = plain.lost_line(row.gpu for row in view.gpus)
    if line is not None:
        plain.say(line)
        raise SystemExit(int(ExitCode.GPU_LOST))
