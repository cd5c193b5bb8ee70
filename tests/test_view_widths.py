"""Which views fit the terminal and which never wrap, decided per view and held here at fixed widths.

`list` and `memory` fit `COLUMNS` (tests/test_list_widths.py, tests/test_narrow_output.py). The
nvidia-smi views and `stat` follow their references, which do not wrap (nvidia-smi's -q, dmon, pmon,
topo, nvlink, mig; gpustat's line): each prints the same bytes at 40 columns as at 200, and the docs
say so for each, so that a reader of a 282-column `stat` line at COLUMNS=40 knows it is meant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
NEVER_WRAPPED = {
    "stat": ("h100x8-training-64procs", ["stat", "-c", "-p", "-P"]),
    "topo": ("h100x8-nvswitch", ["topo"]),
    "topo -p2p": ("h100x8-nvswitch", ["topo", "-p2p", "r"]),
    "dmon": ("h100x8-nvswitch", ["dmon", "-s", "pucvmet", "-c", "1"]),
    "pmon": ("h100x8-training-64procs", ["pmon", "-s", "um", "-c", "1"]),
    "nvlink": ("h100x8-nvswitch", ["nvlink", "-e"]),
    "mig": ("a100-mig", ["mig", "-lgip"]),
    "list -q": ("h100x8-nvswitch", ["list", "-q"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("view", sorted(NEVER_WRAPPED))
def test_a_view_that_never_wraps_prints_the_same_bytes_at_any_width(cli: Cli, view: str) -> None:
    name, args = NEVER_WRAPPED[view]
    narrow, wide = (cli.replay(name, *args, width=width) for width in (40, 200))
    assert narrow == wide and narrow[0] == 0
    if view in ("stat", "list -q"):  # wider than 40: the width is really not honoured, by decision
        assert max(len(line) for line in narrow[1].splitlines()) > 40


def _sentence_about_columns(page: str) -> str:
    text = " ".join((ROOT / page).read_text().split())
    found = re.search(r"[^.]*ignores? `COLUMNS` and never wraps?[^.]*\.", text)
    assert found, f"{page} says nothing of COLUMNS"
    return found.group(0)


def test_the_docs_say_which_views_never_wrap() -> None:
    smi = _sentence_about_columns("docs/commands/nvidia-smi.md")
    for view in ("dmon", "pmon", "stat", "topo", "nvlink", "mig"):
        assert f"`{view}`" in smi, view
    assert "-q" in _sentence_about_columns("docs/commands/list.md")
    conventions = _sentence_about_columns("docs/conventions.md")
    for view in ("dmon", "pmon", "topo", "nvlink", "mig", "stat", "list -q"):
        assert f"`{view}`" in conventions, view
