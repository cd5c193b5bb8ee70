"""`gpudiag list` end to end on the shipped example machines, at a fixed width."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpudiag.cli.app import app
from gpudiag.exitcodes import ExitCode
from gpudiag.replay.fixtures import example_names, machine_from_data
from tests import golden

GOLDEN = golden.GOLDEN / "list"


def run(*args: str, width: int = 120, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(app, ["--color", "never", *args], env={"COLUMNS": str(width), **(env or {})})
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", example_names())
def test_every_example_renders_like_its_golden_file(name: str) -> None:
    code, out, err = run("--replay", name, "list")
    golden.assert_matches_golden(GOLDEN / f"{name}.txt", golden.command_output(code, out, err))


def test_healthy_node_shows_na_for_unsupported_fan_and_every_gpu() -> None:
    code, out, _ = run("--replay", "h100x8-healthy", "list", width=160)
    assert code == 0
    rows = [line for line in out.splitlines() if "NVIDIA H100 80GB HBM3" in line]
    assert len(rows) == 8
    assert all(" N/A " in row for row in rows)  # SXM boards have no fan reading
    assert "CUDA Version: 12.4" in out and "Driver Version: 550.54.15" in out


def test_narrow_terminal_keeps_essentials_and_drops_detail_columns() -> None:
    _, wide, _ = run("--replay", "h100x8-healthy", "list", width=160)
    _, narrow, _ = run("--replay", "h100x8-healthy", "list", width=70)
    assert "Bus-Id" in wide and "Bus-Id" not in narrow
    assert "Memory-Usage" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 70


def test_csv_query_matches_nvidia_smi_format() -> None:
    code, out, _ = run(
        "--replay",
        "h100x8-healthy",
        "list",
        "--query",
        "index,name,memory.used,fan.speed",
        "--format",
        "csv",
        "--id",
        "1",
    )
    assert code == 0
    assert out == "index, name, memory.used [MiB], fan.speed [%]\n1, NVIDIA H100 80GB HBM3, 0 MiB, [N/A]\n"
    _, bare, _ = run("--replay", "h100x8-healthy", "list", "--query", "power.draw", "--format", "csv,noheader,nounits")
    assert bare.splitlines()[0] == "69.50"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query", "name,bogus"], "unknown field 'bogus'"),
        (["--query", "name", "--format", "xml"], "only csv"),
        (["--format", "csv"], "--format goes with --query"),
        (["--id", "9"], "no GPU with index 9"),
        (["--id", "GPU-ffff"], "no GPU with UUID"),
        (["--id", "zz:00.0"], "not a GPU index"),
    ],
)
def test_bad_input_is_a_usage_error(args: list[str], message: str) -> None:
    code, _, err = run("--replay", "h100x8-healthy", "list", *args)
    assert code == ExitCode.USAGE
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_id_accepts_uuid_prefix_and_short_bus_id_in_given_order() -> None:
    code, out, _ = run(
        "--replay", "h100x8-healthy", "list", "--json", "--id", "db:00.0,GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2002"
    )
    assert code == 0
    assert [g["index"] for g in json.loads(out)["gpus"]] == [7, 2]


def test_json_is_versioned_numeric_and_replayable(tmp_path: Path) -> None:
    code, out, _ = run("--replay", "h100x8-healthy", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "gpudiag.machine/1"
    gpu = data["gpus"][0]
    assert gpu["memory"]["total_bytes"] == 85520809984
    assert gpu["power_limit_w"] == 700.0
    assert gpu["fan_percent"] == {"unavailable": "not_supported"}
    # What list --json prints is itself a snapshot: it replays to the same machine.
    snap = tmp_path / "snap.json"
    snap.write_text(out)
    code2, out2, _ = run("--replay", str(snap), "list", "--json")
    assert code2 == 0
    assert machine_from_data(json.loads(out2)).gpus == machine_from_data(data).gpus


def test_no_processes_omits_the_table() -> None:
    _, out, _ = run("--replay", "h100x8-healthy", "list", "--no-processes")
    assert "Processes" not in out


def test_color_always_colours_even_with_no_color_set() -> None:
    """NO_COLOR sets the default; an explicit --color always is the user's later, stronger word."""
    runner = CliRunner()
    for env in ({"COLUMNS": "160"}, {"COLUMNS": "160", "NO_COLOR": "1"}):
        coloured = runner.invoke(app, ["--color", "always", "--replay", "h100x8-healthy", "list"], env=env)
        assert "\x1b[32m" in coloured.stdout, env  # green memory cell
    plain = runner.invoke(app, ["--color", "never", "--replay", "h100x8-healthy", "list"], env={"COLUMNS": "160"})
    assert "\x1b[" not in plain.stdout


def test_unknown_replay_name_is_a_usage_error() -> None:
    code, _, err = run("--replay", "no-such-machine", "list")
    assert code == ExitCode.USAGE
    assert "no example machine named 'no-such-machine'" in err


@pytest.mark.slow
def test_list_never_imports_torch() -> None:
    probe = (
        "import sys\n"
        "from gpudiag.cli.app import app\n"
        "try:\n"
        "    app(['--replay', 'h100x8-healthy', 'list', '--json'], prog_name='gpudiag')\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('torch' in sys.modules and 'IMPORTED' or 'clean')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stderr.strip().endswith("clean")


@pytest.mark.slow
def test_version_and_module_entry_point() -> None:
    result = subprocess.run([sys.executable, "-m", "gpudiag", "--version"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.startswith("gpudiag ")


def _piped(
    *args: str, columns: str | None = None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "gpudiag", *args],
        capture_output=True,
        text=True,
        env={**env, **(extra_env or {})},
        timeout=60,
    )


@pytest.mark.slow
def test_output_to_a_pipe_or_file_keeps_every_column_unless_columns_is_set() -> None:
    piped = _piped("--replay", "v100x4-tutorial", "list")
    assert piped.returncode == 0 and piped.stderr == ""
    header = next(line for line in piped.stdout.splitlines() if line.startswith("GPU   Name"))
    for column in ("Bus-Id", "Persist", "Fan", "Temp", "Perf", "Pwr:Usage/Cap", "Memory-Usage", "Compute M.", "MIG M."):
        assert column in header, column
    assert header.rstrip().endswith("ECC") and "…" not in piped.stdout
    assert piped.stdout.splitlines()[0].endswith("torch 1.4.0 (CUDA 10.1)")  # the first line is not wrapped
    narrow = _piped("--replay", "v100x4-tutorial", "list", columns="80")
    assert "Bus-Id" not in narrow.stdout and max(len(line) for line in narrow.stdout.splitlines()) <= 80


@pytest.mark.slow
def test_global_options_also_work_after_the_command() -> None:
    after = _piped("list", "--replay", "v100x4-tutorial", "--color", "never", "--debug", "--no-processes")
    before = _piped("--replay", "v100x4-tutorial", "--color", "never", "--debug", "list", "--no-processes")
    assert after.returncode == 0 and (after.stdout, after.stderr) == (before.stdout, before.stderr)
    coloured = _piped("list", "--color=always", "--replay=v100x4-tutorial", extra_env={"NO_COLOR": "1"})
    assert coloured.returncode == 0 and "\x1b[" in coloured.stdout


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["list", "--debug"], ["--debug", "list"]),
        (["list", "--id", "0", "--replay", "x", "--json"], ["--replay", "x", "list", "--id", "0", "--json"]),
        (["--color", "never", "memory", "--color=always"], ["--color", "never", "--color=always", "memory"]),
        (["visible", "--value", "0", "--debug"], ["--debug", "visible", "--value", "0"]),
        (["check", "--", "--debug"], ["check", "--", "--debug"]),
        (["--version"], ["--version"]),
        (["nonsense", "--debug"], ["nonsense", "--debug"]),
    ],
)
def test_hoisting_moves_only_global_options(argv: list[str], expected: list[str]) -> None:
    from gpudiag import argv as command_line

    assert command_line.read(argv).args == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "absent"),
    [
        (["list", "--query", "name,memory.used", "--format", "csv"], ("torch", "rich.console", "json")),
        (["list", "--json"], ("torch", "rich.console")),
        (["list"], ("torch", "json")),
        (["visible"], ("torch", "json")),
    ],
)
def test_start_up_imports_only_what_the_output_needs(args: list[str], absent: tuple[str, ...]) -> None:
    """Each module here was measured on the start-up path (issue 16: json ~1.5 ms, rich ~30 ms)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpudiag", "--replay", "h100x8-healthy", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert len(imported) > 50  # the -X importtime report was read
    assert [m for m in absent if m in imported] == []


def test_json_validates_the_inforom_only_with_details(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvmlDeviceValidateInforom checksums the InfoROM (70 ms a GPU on the H200, more than the rest of
    an 8-GPU document): `--json` leaves it not read, `--json --details` (everything) asks it."""
    import json

    from gpudiag.replay.fake_nvml import FakeNvml

    asked: list[int] = []
    validate = FakeNvml.nvmlDeviceValidateInforom

    def counted(self: FakeNvml, handle: object) -> None:
        asked.append(1)
        return validate(self, handle)  # type: ignore[arg-type]

    monkeypatch.setattr(FakeNvml, "nvmlDeviceValidateInforom", counted)
    _, out, _ = run("--replay", "h100x8-healthy", "list", "--json")
    assert {json.dumps(g["inforom_valid"]) for g in json.loads(out)["gpus"]} == {'{"unavailable": "not_read"}'}
    assert asked == []
    _, out, _ = run("--replay", "h100x8-healthy", "list", "--json", "--details")
    assert [g["inforom_valid"] for g in json.loads(out)["gpus"]] == [True] * 8
    assert len(asked) == 8
