"""MiB as nvidia-smi prints them, held against the H100 capture (bytes and MiB of the same moment)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpudiag.units import mib
from tests.conftest import Cli

CAPTURE = Path(__file__).resolve().parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
BUSY = str(CAPTURE / "gpudiag-snapshot-busy.json")


def _smi_fb_memory() -> dict[str, int]:
    """nvidia-smi -q -x's <fb_memory_usage> of the busy moment, in MiB."""
    xml = (CAPTURE / "nvidia-smi-q-busy.xml").read_text()
    block = xml[xml.index("<fb_memory_usage>") : xml.index("</fb_memory_usage>")]
    return {k: int(v) for k, v in re.findall(r"<(\w+)>(\d+) MiB</\1>", block)}


def _snapshot_memory() -> dict[str, int]:
    memory = json.loads(Path(BUSY).read_text())["gpus"][0]["memory"]
    return {
        "total": memory["total_bytes"],
        "reserved": memory["reserved_bytes"],
        "used": memory["used_bytes"],
        "free": memory["free_bytes"],
    }


def test_nvidia_smi_rounds_every_figure_up() -> None:
    smi, raw = _smi_fb_memory(), _snapshot_memory()
    assert raw["used"] == 13_437_304_832 and smi["used"] == 12815  # 12814.81 MiB
    assert smi["free"] == 68265  # 68264.19 MiB: rounding to nearest would give 68264
    assert {k: mib(v) for k, v in raw.items()} == smi


@pytest.mark.parametrize(
    ("n_bytes", "shown"), [(0, 0), (1, 1), (1024 * 1024, 1), (1024 * 1024 + 1, 2), (13_428_064_256, 12806)]
)
def test_mib_edges(n_bytes: int, shown: int) -> None:
    assert mib(n_bytes) == shown


def test_list_memory_and_query_show_what_nvidia_smi_showed(cli: Cli) -> None:
    smi = _smi_fb_memory()
    _, listed, _ = cli.replay(BUSY, "list", width=200)
    assert f"{smi['used']}MiB / {smi['total']}MiB" in listed and "12806MiB" in listed  # the process, as -q says
    _, memory, _ = cli.replay(BUSY, "memory", width=200)
    assert "12815MiB / 81559MiB" in memory and "68265MiB" in memory
    code, csv, _ = cli.replay(
        BUSY, "list", "--query", "memory.used,memory.free,memory.reserved,memory.total", "--format", "csv,noheader"
    )
    assert code == 0 and csv == f"{smi['used']} MiB, {smi['free']} MiB, {smi['reserved']} MiB, {smi['total']} MiB\n"
