"""Narrow terminals, pipes and the environment values that size output (issue 23).

At COLUMNS' floor of 40 the identity columns (each GPU's index and memory, each process's GPU, MIG
instance, PID and memory) are the last to go: they stay whole while detail columns, then
utilization and temperature, then the name and the command give way. COLUMNS, LINES and typer's
TERMINAL_WIDTH are clamped (cli/terminal_env.py); into a pipe no line ends in padding.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from gpudiag.cli.terminal_env import COLUMNS_RANGE, LINES_RANGE, sanitize, terminal_size
from gpudiag.model import GpuState, Machine
from gpudiag.render.format import mib_text
from gpudiag.sources import collect
from tests.conftest import Cli, every_example

NARROW = (40, 50)


def _working(name: str) -> Machine | None:
    machine = collect(name)
    return machine if machine.nvml.status.value == "ok" else None


def _process_cells(machine: Machine) -> list[list[str]]:
    rows = []
    for gpu in machine.gpus:
        for proc in gpu.processes.get(()):
            cells = [str(gpu.index), str(proc.pid)]
            if proc.used_memory_bytes.value is not None:
                cells.append(mib_text(proc.used_memory_bytes.value))
            rows.append(cells)
    return rows


@pytest.mark.parametrize("width", NARROW)
@pytest.mark.parametrize("name", every_example())
def test_list_keeps_identity_columns_whole_at_the_narrowest_width(cli: Cli, name: str, width: int) -> None:
    machine = _working(name)
    _, out, _ = cli.replay(name, "list", width=width)
    if machine is None or not machine.gpus:
        return
    lines = out.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("GPU "))) :]
    assert all(len(line) <= width for line in table), [line for line in table if len(line) > width]
    for gpu in machine.gpus:
        if gpu.state is GpuState.OK and gpu.memory.value is not None:
            used = f"{mib_text(gpu.memory.value.used_bytes)} / {mib_text(gpu.memory.value.total_bytes)}"
            assert any(line.split()[:1] == [str(gpu.index)] and used in line for line in table), (gpu.index, used)
    if "Processes" not in lines or not _process_cells(machine):
        return
    section = lines[lines.index("Processes") + 1 :]
    assert "PID" in section[0].split() and "…" not in section[0]
    for cells in _process_cells(machine):
        assert any(all(cell in line.split() for cell in cells) for line in section), (width, cells)


@pytest.mark.parametrize("width", NARROW)
@pytest.mark.parametrize("name", every_example())
def test_memory_keeps_identity_columns_whole_at_the_narrowest_width(cli: Cli, name: str, width: int) -> None:
    machine = _working(name)
    _, out, _ = cli.replay(name, "memory", width=width)
    if machine is None:
        return
    lines = out.splitlines()
    # What `memory` shows, from its own JSON: a recorded training run replays its recording's frame.
    shown = json.loads(cli.replay(name, "memory", "--json")[1])
    for gpu in shown["gpus"]:
        if isinstance(gpu.get("used_bytes"), int):
            used = f"{mib_text(gpu['used_bytes'])} / {mib_text(gpu['total_bytes'])}"
            assert any(line.split()[:1] == [str(gpu["index"])] and used in line for line in lines), (gpu, used)
    grid = [line for line in lines if re.match(r"\s*\d+\s", line) or line.startswith(("GPU ", "─"))]
    assert all(len(line) <= width for line in grid), [line for line in grid if len(line) > width]
    section = lines[lines.index("Processes") + 1 :]
    for proc in shown["processes"]:
        cells = [str(proc["gpu_index"]), str(proc["pid"])]
        if isinstance(proc.get("used_bytes"), int):
            cells.append(mib_text(proc["used_bytes"]))
        assert any(all(cell in line.split() for cell in cells) for line in section), (width, cells)


def test_the_least_important_columns_go_first(cli: Cli) -> None:
    _, at_60, _ = cli.replay("v100x4-tutorial", "list", width=60)
    _, at_45, _ = cli.replay("v100x4-tutorial", "list", width=45)
    _, at_40, _ = cli.replay("v100x4-tutorial", "list", width=40)
    assert "GPU-Util" in at_60 and "Temp" in at_60
    assert "GPU-Util" not in at_45 and "Temp" in at_45  # utilization goes before temperature
    header = next(line for line in at_40.splitlines() if line.startswith("GPU "))
    assert header.split() == ["GPU", "Name", "Memory-Usage"]
    processes = at_40.splitlines()[at_40.splitlines().index("Processes") + 1]
    assert processes.split() == ["GPU", "PID", "GPU", "Memory", "Process"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120),
        (" 80 ", 80),
        ("0", None),  # POSIX: not a positive decimal number, so unset
        ("-5", None),
        ("abc", None),
        ("", None),
        ("²", None),  # a digit to str.isdigit(), not to int()
        ("８０", None),  # fullwidth digits
        ("12", COLUMNS_RANGE[0]),
        ("99999999", COLUMNS_RANGE[1]),
        ("9" * 5000, COLUMNS_RANGE[1]),  # never a 5000-digit int()
    ],
)
def test_a_size_from_the_environment_is_clamped_or_ignored(value: str, expected: int | None) -> None:
    assert terminal_size(value, COLUMNS_RANGE) == expected


def test_sanitize_rewrites_the_environment_once() -> None:
    environ = {"COLUMNS": "0", "LINES": "99999", "TERMINAL_WIDTH": "abc", "HOME": "/root"}
    sanitize(environ)
    assert environ == {"LINES": str(LINES_RANGE[1]), "HOME": "/root"}


HOSTILE_SIZES = [
    {"COLUMNS": "99999999"},
    {"COLUMNS": "0"},
    {"COLUMNS": "²"},
    {"COLUMNS": "-3"},
    {"LINES": "²"},
    {"LINES": "0", "COLUMNS": "1"},
]


def _sane(text: str) -> bool:
    return bool(text.strip()) and max(len(line) for line in text.splitlines()) <= COLUMNS_RANGE[1]


@pytest.mark.parametrize("env", HOSTILE_SIZES, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()))
@pytest.mark.parametrize("args", [["--help"], ["--replay", "v100x4-tutorial", "list"], ["list", "--bogus"]])
def test_hostile_sizes_neither_hang_nor_silence_gpudiag(env: dict[str, str], args: list[str]) -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    result = CliRunner().invoke(app, args, env={"NO_COLOR": "1", **env})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == (2 if "--bogus" in args else 0), result.stderr
    assert _sane(result.stdout + result.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"COLUMNS": "99999999"}, {"TERMINAL_WIDTH": "abc"}, {"TERMINAL_WIDTH": "99999999"}])
def test_hostile_sizes_in_a_real_process(env: dict[str, str]) -> None:
    """typer reads TERMINAL_WIDTH when its help module is first imported: only a fresh process shows it.
    `COLUMNS=99999999 gpudiag --help` hung before (a hundred million cells of padding per line)."""
    result = subprocess.run(
        [sys.executable, "-m", "gpudiag", "--help"],
        env={**os.environ, "NO_COLOR": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert _sane(result.stdout)


def test_piped_output_has_no_padding_at_line_ends(cli: Cli) -> None:
    for args in (["list"], ["memory"], ["examples"], ["check", "--quick", "--no-torch"], ["visible"]):
        _, out, _ = cli.replay("v100x4-tutorial", *args)
        assert [line for line in out.splitlines() if line.endswith(" ")] == [], args
