"""`list` adds up a table's natural width from its cells' text instead of asking rich to measure it
(measuring costs as much as rendering): the width must be rich's, and the output unchanged."""

from __future__ import annotations

import io
import itertools

import pytest
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gpudiag.cli.common import make_console
from gpudiag.render import list_view
from gpudiag.replay.fixtures import example_names
from gpudiag.sources import collect
from tests.conftest import every_example

WIDTHS = (40, 60, 80, 100, 120, 160, 250)


def _render(name: str, width: int) -> str:
    out = io.StringIO()
    console = make_console(file=out)
    console.width = width
    machine = collect(name)
    console.print(list_view.render(machine, machine.gpus, console, show_processes=True))
    return out.getvalue()


def _measured(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(10_000), table).maximum


@pytest.mark.slow  # ~1 s an example: 14 renders
@pytest.mark.parametrize("name", example_names())
def test_adding_up_renders_what_measuring_renders(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = {width: _render(name, width) for width in WIDTHS}
    monkeypatch.setattr(list_view, "text_width", lambda console, table: None)  # rich measures every table
    assert fast == {width: _render(name, width) for width in WIDTHS}


@pytest.mark.parametrize("name", every_example())
def test_the_width_from_the_text_is_richs_measurement(name: str) -> None:
    """Every table `list` builds for the machine: each column left out, a cut name, the processes'
    tables with and without the command, its width capped or not."""
    machine = collect(name)
    console = make_console(file=io.StringIO())
    columns = list(list_view._COLUMNS)
    tables = [list_view._gpu_table(machine.gpus, [c for c in columns if c != gone]) for gone in (None, *columns)]
    tables += [list_view._gpu_table(machine.gpus, columns, name_width=width) for width in (8, 12, 30)]
    rows = list_view._process_rows(machine.gpus)
    if rows:
        for left_out, command, width in itertools.product(([], ["User"], ["User", "Type"]), (True, False), (20, 1000)):
            tables.append(list_view._process_table(rows, left_out, command=command, command_width=width))
    for table in tables:
        assert list_view.text_width(console, table) == _measured(console, table)


def test_the_width_is_richs_for_edges_padding_and_what_it_cannot_add_up() -> None:
    console = make_console(file=io.StringIO())
    cells = ["[b]x[/b] :smile:", Text("wide cell"), "", Text("\u4e2d\u6587")]  # markup, emoji: as written
    for pad_edge, show_edge, boxed in itertools.product((True, False), repeat=3):
        table = Table(box=box.SIMPLE_HEAD if boxed else None, pad_edge=pad_edge, show_edge=show_edge)
        for header in ("a", "bb", "ccc", "d"):
            table.add_column(header, max_width=5 if header == "bb" else None)
        table.add_row(*cells)
        assert list_view.text_width(console, table) == _measured(console, table), (pad_edge, show_edge, boxed)
    two_lines = Table()
    two_lines.add_column("a")
    two_lines.add_row(Text("one\ntwo"))
    for breaking in ("\u2028", "\x85", "\x1e"):  # str.splitlines breaks there, and so does rich
        split = Table()
        split.add_column("a")
        split.add_row(Text(f"one{breaking}three"))
        assert list_view.text_width(console, split) is None
        assert list_view._natural_width(console, split) == _measured(console, split)
    fixed = Table()
    fixed.add_column("a", width=7)
    assert list_view.text_width(console, two_lines) is None and list_view.text_width(console, fixed) is None
    assert list_view._natural_width(console, two_lines) == _measured(console, two_lines)
