"""`check --mode prolog|health-check`: exit status and one stderr line, no torch, a hard deadline."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli


@pytest.mark.parametrize("mode", ["prolog", "health-check"])
def test_a_healthy_node_is_ready_in_one_line(cli: Cli, mode: str) -> None:
    code, out, err = cli.replay("h100x8-healthy", "check", "--mode", mode)
    assert (code, out) == (0, "")
    assert re.fullmatch(r"gpudiag: READY \(\d+ passed, \d+ skipped\)\n", err), err


def test_a_broken_node_names_its_checks_and_the_reset(cli: Cli) -> None:
    code, out, err = cli.replay("a100-ecc-errors", "check", "--mode", "prolog")
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == (
        "gpudiag: NOT READY: health.ecc,health.row_remap,health.recovery_action,health.clock_events; GPU reset needed\n"
    )
    assert cli.replay("gpu-lost", "check", "--mode", "health-check")[2] == "gpudiag: NOT READY: nvml.gpu_lost\n"


def test_strict_counts_warnings(cli: Cli) -> None:
    code, _, err = cli.replay("h100x8-training-64procs", "check", "--mode", "prolog", "--allow-processes", "--strict")
    assert code == ExitCode.FAILED and err.startswith("gpudiag: NOT READY: ") and "health.processes" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "epilog"], "--mode 'epilog': use prolog or health-check"),
        (["--mode", "prolog", "--json"], "leave out --json and --junit"),
        (["--deadline", "3"], "--deadline goes with --mode"),
        (["--mode", "prolog", "--deadline", "0"], "--deadline 0.0: expected seconds"),
    ],
)
def test_usage(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli.replay("h100x8-healthy", "check", *args)
    assert code == ExitCode.USAGE and message in err


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from gpudiag.cli.app import main\n"
        f"sys.argv = ['gpudiag', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    print('torch' in sys.modules); raise\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)


@pytest.mark.slow
def test_no_torch_is_imported() -> None:
    done = _run("--replay", "h100x8-healthy", "check", "--mode", "prolog")
    assert (done.returncode, done.stdout) == (0, "False\n")


@pytest.mark.slow
def test_a_missed_deadline_is_an_unknown_verdict() -> None:
    done = _run("--replay", "h100x8-healthy", "check", "--mode", "health-check", "--deadline", "0.001")
    assert done.returncode == ExitCode.CHECK_INCOMPLETE
    assert done.stderr == "gpudiag: UNKNOWN: no verdict within 0.001 s (--mode health-check; driver hung?)\n"
