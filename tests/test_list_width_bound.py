"""`list` skips measuring a table that surely fits (a start-up cut): the output must not change."""

from __future__ import annotations

import io

import pytest

from gpudiag.cli.common import make_console
from gpudiag.probe.collect import collect
from gpudiag.render import list_view
from gpudiag.replay.fixtures import example_names

WIDTHS = (40, 60, 80, 100, 120, 160, 250)


def _render(name: str, width: int) -> str:
    out = io.StringIO()
    console = make_console(file=out)
    console.width = width
    machine = collect(name)
    console.print(list_view.render(machine, machine.gpus, console, show_processes=True))
    return out.getvalue()


@pytest.mark.slow  # ~1 s an example: 14 renders
@pytest.mark.parametrize("name", example_names())
def test_the_shortcut_renders_what_measuring_renders(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = {width: _render(name, width) for width in WIDTHS}
    monkeypatch.setattr(list_view, "width_bound", lambda table: None)  # always measure
    assert fast == {width: _render(name, width) for width in WIDTHS}


@pytest.mark.parametrize("name", example_names())
def test_the_bound_is_never_below_the_natural_width(name: str) -> None:
    machine = collect(name)
    console = make_console(file=io.StringIO())
    tables = [list_view._gpu_table(machine.gpus, list(list_view._COLUMNS))]
    rows = list_view._process_rows(machine.gpus)
    if rows:
        tables.append(list_view._process_table(rows, [], command=True, command_width=1000))
    for table in tables:
        bound = list_view.width_bound(table)
        assert bound is not None
        assert bound >= list_view._natural_width(console, table)
