"""A consumer names the readings it uses (``READS``) and reads the groups derived from them: traced,
each view looks at no other reading, and reading only those groups shows what reading all does."""

from __future__ import annotations

import io

import msgspec
import pytest
from rich.console import Console

from gpudiag.cli import stat_watch
from gpudiag.memory import view as memory
from gpudiag.memory.build import build
from gpudiag.model import ALL_GROUPS, Gpu, Machine
from gpudiag.probe.collect import collect
from gpudiag.readings import GPU_READINGS
from gpudiag.render import list_view, memory_view, stat_view, visible_view
from gpudiag.visibility import code_hints, request
from gpudiag.visibility.rules import resolve

# What any view may look at besides its readings: which GPU it is and its identity (always read).
_ALWAYS = {"index", "state", "state_detail", "label"} | {s.key for s in GPU_READINGS if s.group is None}
MACHINES = ["h100x8-healthy", "a100-ecc-errors", "a100-mig", "misconfigured-node", "gpu-lost"]


class _Traced:
    """A GPU that notes each reading a view asks it for."""

    def __init__(self, gpu: Gpu, seen: set[str]) -> None:
        object.__setattr__(self, "_gpu", gpu)
        object.__setattr__(self, "_seen", seen)

    def __getattr__(self, name: str) -> object:
        self._seen.add(name)
        return getattr(self._gpu, name)


def _list_text(machine: Machine) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(list_view.render(machine, machine.gpus, console, show_processes=True))
    return console.file.getvalue()  # type: ignore[attr-defined]


def _stat_text(machine: Machine) -> str:
    return stat_view.block(machine, machine.gpus) + repr(stat_view.to_json(machine, machine.gpus))


def _memory_text(machine: Machine) -> str:
    return repr(memory_view.to_json(build(machine, {}), 0.0))


def _visible_text(machine: Machine) -> str:
    resolutions = [resolve(machine, value) for value in (None, "1,0", "GPU-x")]
    return repr([visible_view.to_json(r, "environment", code_hints(r), None) for r in resolutions])


VIEWS = [
    (list_view.READS, list_view.GROUPS, _list_text),
    (stat_watch.READS, stat_watch.GROUPS, _stat_text),
    (memory.READS, memory.GROUPS, _memory_text),
    (request.READS, request.GROUPS, _visible_text),
]


@pytest.mark.parametrize("name", MACHINES)
@pytest.mark.parametrize("view", range(len(VIEWS)), ids=["list", "stat", "memory", "visible"])
def test_a_view_reads_the_readings_it_names_and_no_other(name: str, view: int) -> None:
    reads, groups, render = VIEWS[view]
    machine = collect(name, facts=ALL_GROUPS)
    seen: set[str] = set()
    traced = msgspec.structs.replace(machine, gpus=tuple(_Traced(g, seen) for g in machine.gpus))  # type: ignore[misc]
    assert render(traced) == render(machine)
    named = {key.split(".")[0] for key in reads}
    assert sorted(seen - _ALWAYS - named) == []  # a reading looked at but not named: add it to READS
    assert groups < ALL_GROUPS
    assert render(collect(name, facts=groups)) == render(machine)
