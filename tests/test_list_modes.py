"""`list`'s nvidia-smi modes held to the H100 captures: -q -d (sections), -q -x (the XML schema), -L,
-f FILE, the list queries (retired pages, remapped rows, supported clocks), replay timestamps, and the
option combinations nvidia-smi refuses."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpudiag.replay import fixtures
from tests.conftest import Cli

CAPTURE = Path(__file__).resolve().parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
IDLE = "h100-driver580-idle"
UUID = "GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e"  # the idle capture's board


def _q_blocks(text: str, headings: tuple[str, ...]) -> list[str]:
    """The lines of these top-level -q sections (4-space headings) with their contents."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("    ") and not line.startswith("     "):
            inside = line.split(":")[0].strip() in headings
        if inside:
            out.append(line.rstrip())
    return out


def test_display_memory_prints_the_captured_memory_sections_and_nothing_else(cli: Cli) -> None:
    code, out, err = cli.replay(IDLE, "list", "-q", "-d", "MEMORY", width=160)
    assert (code, err) == (0, "")
    memory = ("FB Memory Usage", "BAR1 Memory Usage", "Conf Compute Protected Memory Usage")
    captured = _q_blocks((CAPTURE / "nvidia-smi-q.txt").read_text(), memory)
    assert len(captured) == 13  # three headings, 10 lines: the figures nvidia-smi printed, rounding included
    body = out.split("GPU 00000000:00:06.0\n", 1)[1]
    assert [line.rstrip() for line in body.splitlines() if line.strip()] == captured


def test_display_takes_several_sections_in_nvidia_smis_order_and_refuses_an_unknown_one(cli: Cli) -> None:
    _, both, _ = cli.replay(IDLE, "list", "-q", "-d", "power,MEMORY", width=160)
    assert both.index("FB Memory Usage") < both.index("GPU Power Readings")
    assert "Temperature" not in both and "Clocks" not in both
    code, out, err = cli.replay(IDLE, "list", "-q", "-d", "MEMORY,BOGUS")
    assert code == 2 and out == ""
    assert "unknown BOGUS" in err and "ROW_REMAPPER" in err and len(err.splitlines()) == 1


def test_xml_has_nvidia_smis_elements_in_its_order(cli: Cli) -> None:
    code, out, err = cli.replay(IDLE, "list", "-q", "-x")
    assert (code, err) == (0, "")

    def paths(root: ET.Element) -> list[str]:
        found: list[str] = []

        def walk(e: ET.Element, at: str) -> None:
            found.append(f"{at}/{e.tag}")
            for child in e:
                walk(child, f"{at}/{e.tag}")

        walk(root, "")
        return found

    captured = (CAPTURE / "nvidia-smi-q.xml").read_text()
    assert out.splitlines()[:2] == captured.splitlines()[:2]  # the declaration and the DOCTYPE
    mine, theirs = ET.fromstring(out), ET.fromstring(captured)
    assert paths(mine) == paths(theirs)
    assert len(paths(mine)) > 480
    for path in ("gpu/fb_memory_usage/free", "gpu/bar1_memory_usage/free", "gpu/uuid", "gpu/display_mode"):
        assert mine.findtext(path) == theirs.findtext(path), path


def test_list_gpus_is_nvidia_smi_l(cli: Cli) -> None:
    code, out, _ = cli.replay(IDLE, "list", "-L")
    assert (code, out) == (0, f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {UUID})\n")
    _, mig, _ = cli.replay("a100-mig", "list", "-L")
    lines = mig.splitlines()
    assert lines[0].startswith("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-")
    assert lines[1].startswith("  MIG 3g.20gb     Device  0: (UUID: MIG-")
    assert len(lines) == 4
    _, document, _ = cli.replay("a100-mig", "list", "-L", "--json")
    data = json.loads(document)
    assert data["schema"] == "gpudiag.gpus/1"
    assert [m["index"] for m in data["gpus"][0]["mig_devices"]] == [0, 1, 2]


def test_filename_writes_the_output_whole_and_nothing_to_stdout(cli: Cli, tmp_path: Path) -> None:
    _, shown, _ = cli.replay(IDLE, "list", "-q", width=160)
    target = tmp_path / "q.txt"
    code, out, err = cli.replay(IDLE, "list", "-q", "-f", str(target), width=160)
    assert (code, out, err) == (0, "", "")
    assert target.read_text() == shown
    code, _, err = cli.replay(IDLE, "list", "-L", "-f", str(tmp_path / "missing" / "gpus.txt"))
    assert code != 0 and err.count("\n") == 1  # one line, no traceback (Cli checks)


def test_remapped_rows_and_supported_clocks_rows(cli: Cli) -> None:
    _, rows, _ = cli.replay(
        "a100-ecc-errors",
        "list",
        "--query-remapped-rows",
        "gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure",
    )
    remapped = fixtures.load("a100-ecc-errors")[0].gpus[0].remapped_rows.value
    assert remapped is not None
    want = f"{remapped.correctable}, {remapped.uncorrectable}, {int(remapped.pending)}, {int(remapped.failure)}"
    assert rows.splitlines()[1].endswith(want)
    code, clocks, _ = cli.replay(IDLE, "list", "--query-supported-clocks", "memory,graphics", "--format", "csv,nounits")
    lines = clocks.splitlines()
    assert code == 0 and lines[:2] == ["memory [MHz], graphics [MHz]", "2619, 1980"]
    # -q -x's supported_clocks of the same board: each memory clock with its graphics clocks.
    tree = ET.fromstring((CAPTURE / "nvidia-smi-q.xml").read_text())
    captured = [
        f"{m.findtext('value', '').split()[0]}, {g.text.split()[0]}"
        for m in tree.iter("supported_mem_clock")
        for g in m.iter("supported_graphics_clock")
        if g.text
    ]
    assert lines[1:] == captured


def test_retired_pages_lists_each_page_with_its_cause(cli: Cli, tmp_path: Path) -> None:
    document = json.loads(Path(fixtures.EXAMPLES_DIR, f"{IDLE}.json").read_text())
    gpu = document["gpus"][0]
    gpu["retired_pages"] = {"single_bit": 2, "double_bit": 1, "pending": True}
    health = gpu["details"]["memory_health"]
    health["retired_single_bit_addresses"] = [0x4A2B000, 0x4A2C000]
    health["retired_double_bit_addresses"] = [0x7F000]
    snapshot = tmp_path / "retired.json"
    snapshot.write_text(json.dumps(document))
    code, out, _ = cli.replay(str(snapshot), "list", "--query-retired-pages", "gpu_uuid,addr,cause")
    assert code == 0
    assert out.splitlines() == [
        "gpu_uuid, addr, cause",
        f"{UUID}, 0x0000000004A2B000, Single Bit ECC",
        f"{UUID}, 0x0000000004A2C000, Single Bit ECC",
        f"{UUID}, 0x000000000007F000, Double Bit ECC",
    ]
    _, q, _ = cli.replay(str(snapshot), "list", "-q", "-d", "PAGE_RETIREMENT", width=160)
    assert [line.split(":")[1].strip() for line in q.splitlines() if "Bit ECC" in line or "Pending Page" in line] == [
        "2",
        "1",
        "Yes",
    ]
    _, empty, _ = cli.replay(IDLE, "list", "--query-retired-pages", "gpu_uuid,retired_pages.address")
    assert empty == "gpu_uuid, retired_pages.address\n"  # the H100 retires no pages (it remaps rows)


def test_a_replay_shows_the_time_its_snapshot_was_taken(cli: Cli) -> None:
    _, q, _ = cli.replay(IDLE, "list", "-q", width=160)
    assert "Timestamp                                              : Sun Nov 22 23:46:10 2026" in q  # TZ=UTC
    _, csv, _ = cli.replay(IDLE, "list", "--query-gpu", "timestamp", "--format", "csv,noheader")
    assert csv.startswith("2026/11/22 23:46:10.")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("-x",), "--xml-format goes with --details"),
        (("-d", "MEMORY"), "--display goes with --details"),
        (("-q", "-x", "-d", "MEMORY"), "--display filters the -q text"),
        (("-q", "-x", "--json"), "choose one of --xml-format and --json"),
        (("-L", "-q"), "choose one of --list-gpus and --details"),
        (("--query-remapped-rows", "gpu_uuid", "--query-supported-clocks", "memory"), "choose one of"),
        (("-L", "--format", "csv"), "--format goes with"),
        (("-L", "-w", "-f", "out.txt"), "--filename writes one sample"),
        (("--query-retired-pages", "gpu_uuid,adress"), "did you mean 'addr"),
    ],
)
def test_options_nvidia_smi_refuses_are_usage_errors(cli: Cli, args: tuple[str, ...], says: str) -> None:
    code, out, err = cli.replay(IDLE, "list", *args)
    assert (code, out) == (2, "")
    assert says in err and len(err.splitlines()) == 1


def test_the_watch_loop_does_not_import_the_command() -> None:
    """list_cmd parses and hands over to list_watch; what both need lives in list_modes (no cycle)."""
    import ast

    import gpudiag.cli

    package = Path(gpudiag.cli.__file__).parent

    def imported(name: str) -> set[str]:
        tree = ast.parse((package / f"{name}.py").read_text())
        return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }

    assert "gpudiag.cli.list_cmd" not in imported("list_watch")
    assert "gpudiag.cli.list_cmd" not in imported("list_modes")
    assert "gpudiag.cli.list_watch" not in imported("list_modes")
