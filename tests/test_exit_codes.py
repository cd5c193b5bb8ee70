"""Exit codes that can gate a job (issue 23): docs/exit-codes.md's table is the code's, a run that checked
nothing is never READY, and bad input is one line and a documented code, never 70."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gpudiag import argv, edge
from gpudiag.cli.app import COMMANDS
from gpudiag.exitcodes import DESCRIPTIONS, ExitCode
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
EXIT_CODES = (ROOT / "docs" / "exit-codes.md").read_text()
MACHINES = ROOT / "gpudiag" / "machines"
EXAMPLE = "h100x8-healthy"


def _readme_exit_codes() -> dict[int, str]:
    """The rows of the table in docs/exit-codes.md, as {code: meaning}."""
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", EXIT_CODES, flags=re.MULTILINE)
    assert rows, "no exit-code table in docs/exit-codes.md"
    table = {int(code): meaning for code, meaning in rows}
    assert len(table) == len(rows), "a code appears twice"
    return table


def test_the_readme_table_has_every_code_with_its_meaning_and_no_other() -> None:
    assert _readme_exit_codes() == {int(code): DESCRIPTIONS[code] for code in ExitCode}


def test_every_code_has_a_meaning_and_a_distinct_number() -> None:
    assert set(DESCRIPTIONS) == set(ExitCode)
    assert len({int(c) for c in ExitCode}) == len(ExitCode)


def test_the_light_modules_agree_with_the_table() -> None:
    """gpudiag.edge and gpudiag.argv stay free of heavy imports, so they spell some facts again."""
    assert (edge.USAGE, edge.OUTPUT_ERROR) == (ExitCode.USAGE, ExitCode.OUTPUT_ERROR)
    assert set(argv.COMMANDS) == set(COMMANDS)


def test_the_entry_point_loads_nothing_heavy_before_the_cli() -> None:
    """The early torch start (gpudiag.entry) must not wait for typing, enum or the CLI to load."""
    code = (
        "import sys, gpudiag.entry; print(sorted(m for m in sys.modules if m.startswith(('typing', 'enum', 'typer'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "[]"


# --- nothing checked is never READY -----------------------------------------------------------------


def test_a_check_in_which_every_selected_check_skipped_is_unknown_with_its_own_code(cli: Cli) -> None:
    code, out, err = cli.replay(EXAMPLE, "check", "--only", "func")
    assert code == ExitCode.NOTHING_CHECKED == 7
    assert out.rstrip().endswith(
        "UNKNOWN: 0 pass, 0 warn, 0 fail, 1 skip; nothing was checked: every selected check was skipped"
    )
    assert err == (
        "gpudiag: nothing was checked: every selected check was skipped: func.gpu (not run on a replayed machine)\n"
    )


def test_nothing_checked_in_every_output(cli: Cli, tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    code, out, _ = cli.replay(EXAMPLE, "check", "--only", "compat.torch", "--no-torch", "--json", "--junit", str(junit))
    data = json.loads(out)
    assert code == data["exit_code"] == ExitCode.NOTHING_CHECKED and data["verdict"] == "UNKNOWN"
    errors = [c for c in ElementTree.parse(junit).iter("testcase") if c.find("error") is not None]
    assert [c.get("name") for c in errors] == ["gpudiag.nothing_checked"]  # a suite of skips is green in CI
    code, out, _ = cli.replay(EXAMPLE, "check", "--only", "compat.torch", "--no-torch", "--npd")
    assert (code, out) == (2, "unknown: nothing checked: every selected check was skipped\n")
    code, _, err = cli.replay(EXAMPLE, "check", "--only", "func", "--mode", "prolog", "--python", sys.executable)
    assert code == ExitCode.USAGE  # --python asks a live torch; a replay has its own
    code, _, err = cli.replay(EXAMPLE, "check", "--only", "host", "--mode", "health-check")  # not replayed: SKIP
    assert code == ExitCode.NOTHING_CHECKED
    assert err == (
        "gpudiag: UNKNOWN: nothing checked: every selected check was skipped "
        "(host.device_nodes,host.kernel_modules,host.nouveau)\n"
    )
    cli.replay(EXAMPLE, "check", "--only", "compat.torch", "--no-torch", "--textfile", str(tmp_path))
    assert "gpudiag_check_exit_code 7.0" in (tmp_path / "gpudiag_check.prom").read_text()


def test_a_check_that_verified_something_is_still_ready(cli: Cli) -> None:
    code, out, _ = cli.replay(EXAMPLE, "check", "--quick", "--no-torch", "--only", "health")
    assert code == ExitCode.OK and "READY: " in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "func", "--quick"], "--only func selects only the functional test, which --quick leaves out"),
        (["--only", "func.gpu", "--no-torch"], "which --no-torch leaves out"),
        (["--only", "func", "--mode", "prolog"], "which --mode prolog without --python leaves out"),
        (["--only", "nope"], "--only 'nope': no such check or area; ids: nvml.init,"),
        (["--skip", "nope"], "--skip 'nope': no such check or area"),
    ],
)
def test_a_selection_that_can_check_nothing_is_a_usage_error(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli.replay(EXAMPLE, "check", *args)
    assert code == ExitCode.USAGE and message in err and out == "" and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", "--id", "9"], "no GPU with index 9; GPUs here: 0-7 (`gpudiag list` shows their UUIDs and bus ids)"),
        (["memory", "--id", "GPU-ffff"], "no GPU with UUID 'GPU-ffff'; GPUs here: 0-7"),
        (["list", "--id", "ff:00.0"], "'ff:00.0' is not a GPU index, UUID (GPU-…) or PCI bus id; GPUs here: 0-7"),
        (["visible", "--select", "8"], "no GPU with index 8; GPUs here: 0-7"),
    ],
)
def test_an_id_that_matches_nothing_names_what_exists(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli.replay(EXAMPLE, *args)
    assert code == ExitCode.USAGE and err == f"gpudiag: {message}\n" if message.endswith(")") else message in err
    assert out == ""


def test_a_mig_uuid_that_matches_nothing_names_the_instances(cli: Cli) -> None:
    code, _, err = cli.replay("a100-mig", "visible", "--select", "MIG-ffff")
    assert code == ExitCode.USAGE and "matches 0 MIG instances; MIG instances here: MIG-" in err


# --- bad values: one line, exit 2 ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e20", "0", "-1", "31536001"])
@pytest.mark.parametrize(
    "args",
    [
        ["list", "--watch", "--count", "1", "--interval"],
        ["memory", "--count", "1", "--interval"],
        ["memory", "--until-free", "1GiB", "--timeout"],
        ["check", "--quick", "--timeout"],
        ["check", "--mode", "prolog", "--deadline"],
    ],
    ids=" ".join,
)
def test_seconds_must_be_finite_positive_and_at_most_a_year(cli: Cli, args: list[str], value: str) -> None:
    code, out, err = cli.replay(EXAMPLE, *args, value)
    assert code == ExitCode.USAGE and out == "" and len(err.splitlines()) == 1, err
    assert "internal error" not in err


def _latin1_name(text: str) -> bytes:
    return text.replace('"NVIDIA H100', '"NVIDIA H\xe9100').encode("latin-1")


def _absurd_draw(text: str) -> bytes:
    return re.sub(r'"power_draw_w": [0-9.]+', '"power_draw_w": 1e308', text).encode()


def _limit_past_32_bits(text: str) -> bytes:
    return re.sub(r'"power_limit_w": [0-9.]+', '"power_limit_w": 4294968.0', text).encode()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_latin1_name, "is not UTF-8 (byte 0xe9 at offset "),
        (_absurd_draw, "power_draw_w: 1e+308 W is beyond NVML's power readings (at most 4294967.295 W)"),
        (_limit_past_32_bits, "power_limit_w: 4294968 W is beyond NVML's power readings"),
    ],
)
@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["snapshot"], ["exporter", "--once"], ["memory"]])
def test_a_replay_file_nvml_could_not_have_written_is_a_usage_error(
    cli: Cli, tmp_path: Path, edit: Callable[[str], bytes], message: str, command: list[str]
) -> None:
    path = tmp_path / "edited.json"
    edited = edit((MACHINES / f"{EXAMPLE}.json").read_text())
    assert edited != (MACHINES / f"{EXAMPLE}.json").read_bytes()
    path.write_bytes(edited)
    code, out, err = cli.replay(str(path), *command)
    assert code == ExitCode.USAGE and out == ""
    assert message in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("name", ["x" * 300, "a/" * 3000, "x" * 5000, "GPU\0"])
def test_a_replay_name_too_long_to_be_a_path_is_a_usage_error(cli: Cli, name: str) -> None:
    if "\0" in name:  # an argument cannot carry NUL; the environment variable neither: the loader can
        from gpudiag.replay import fixtures

        with pytest.raises(fixtures.FixtureError):
            fixtures.resolve(name)
        return
    code, out, err = cli.replay(name, "list")
    assert code == ExitCode.USAGE and out == "" and len(err) < 200
    assert "too long to be a file name or an example name" in err


# --- a child's stray bytes ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_child_that_prints_non_utf8_is_read_with_replacement_at_once(tmp_path: Path) -> None:
    """A torch whose import prints Latin-1 on stdout and stderr: was a reader thread's traceback,
    and the check then waited for the whole --timeout (90 s by default)."""
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\n"
        "sys.stdout.buffer.write(b'caf\\xe9 \\xff\\n'); sys.stdout.flush()\n"
        "sys.stderr.buffer.write(b'warn\\xe9\\n'); sys.stderr.flush()\n"
        "raise ImportError('libcaf\\xe9.so: cannot open shared object file')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GPUDIAG_REPLAY"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH", "")])])
    begun = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "gpudiag", "check", "--quick", "--only", "compat.torch", "--json", "--timeout", "30"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert time.monotonic() - begun < 20  # not the deadline
    assert "Traceback" not in result.stderr and "UnicodeDecodeError" not in result.stderr
    finding = json.loads(result.stdout)["checks"][0]["finding"]
    assert finding == "torch fails to import: ImportError: libcafé.so: cannot open shared object file"
