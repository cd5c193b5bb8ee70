"""`check --mode prolog|health-check`: exit status and one stderr line, no torch, a hard deadline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.replay import fixtures
from tests.conftest import Cli

MACHINES = Path(fixtures.__file__).resolve().parent.parent / "machines"


@pytest.mark.parametrize("mode", ["prolog", "health-check"])
def test_a_healthy_node_is_ready_in_one_line(cli: Cli, mode: str) -> None:
    code, out, err = cli.replay("h100x8-healthy", "check", "--mode", mode)
    assert (code, out) == (0, "")
    assert re.fullmatch(r"gpudiag: READY \(\d+ passed, \d+ skipped\)\n", err), err


def test_a_broken_node_names_its_worst_failure_and_what_to_do(cli: Cli) -> None:
    code, out, err = cli.replay("a100-ecc-errors", "check", "--mode", "prolog")
    assert (code, out) == (ExitCode.FAILED, "")
    assert err == "gpudiag: NOT READY: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)\n"
    assert cli.replay("gpu-lost", "check", "--mode", "health-check")[2] == (
        "gpudiag: NOT READY: nvml.gpu_lost GPU2: GPU is lost (fallen off the bus, XID 79); reboot\n"
    )
    assert cli.replay("driver-mismatch", "check", "--mode", "health-check")[2] == (
        "gpudiag: NOT READY: nvml.init: NVIDIA driver/library version mismatch; reboot\n"
    )


def _job_env(tmp_path: Path, *env: tuple[str, str]) -> str:
    """The healthy 8-GPU node, recorded with this environment (what a job brings)."""
    data = json.loads((MACHINES / "h100x8-healthy.json").read_text())
    data["env"] = [list(pair) for pair in env]
    path = tmp_path / "job-env.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_job_scope_failures_fail_the_job_not_the_node(cli: Cli, tmp_path: Path) -> None:
    machine = _job_env(tmp_path, ("CUDA_VISIBLE_DEVICES", "-1"))
    code, _, err = cli("--replay", machine, "check", "--mode", "prolog")
    assert code == ExitCode.FAILED
    assert err.startswith("gpudiag: JOB NOT READY: env.visible_devices: CUDA_VISIBLE_DEVICES='-1' leaves no device")
    assert err.endswith("; fix job\n")
    # A node failure as well: the node's line, which names only node-scope failures.
    code, _, err = cli.replay("misconfigured-node", "check", "--mode", "prolog")
    assert err == (
        "gpudiag: NOT READY: config.compute_mode GPU1 GPU-a40a40a4: compute mode Prohibited; fix config (+1 more)\n"
    )
    code, _, err = cli.replay("h100x8-healthy", "check", "--mode", "prolog", "--min-free", "1000GiB")
    assert err.startswith("gpudiag: JOB NOT READY: health.free_memory GPU0 GPU-8e1f2a6c: less free memory")


def test_a_health_check_judges_the_node_only(cli: Cli, tmp_path: Path) -> None:
    """No job runs during a health check: the job's checks are not run, and asking for them is refused."""
    machine = _job_env(tmp_path, ("CUDA_VISIBLE_DEVICES", "-1"), ("CUDA_LAUNCH_BLOCKING", "1"))
    code, _, err = cli("--replay", machine, "check", "--mode", "health-check")
    assert code == 0 and err.startswith("gpudiag: READY"), err
    for args, message in (
        (["--min-free", "1GiB"], "--min-free is judged by a job-scope check"),
        (["--only", "env"], "--only env: job-scope checks"),
        (["--only", "compat"], "--only compat: job-scope checks"),
    ):
        code, _, err = cli("--replay", machine, "check", "--mode", "health-check", *args)
        assert code == ExitCode.USAGE and message in err, err
    assert cli.replay("h100x8-healthy", "check", "--mode", "health-check", "--only", "health")[0] == 0


@pytest.mark.parametrize("mode", ["prolog", "health-check"])
def test_in_a_scheduler_hook_a_requirement_is_the_sites_and_judges_the_node(cli: Cli, mode: str) -> None:
    """Only an admin gives the Prolog or the health check options: a node that cannot meet the site's
    requirement is drained, not left to fail every job sent to it (a black hole)."""
    code, _, err = cli.replay("h100x8-healthy", "check", "--mode", mode, "--require-driver", "999")
    assert code == ExitCode.FAILED and err.startswith("gpudiag: NOT READY: req.driver"), err
    code, _, err = cli.replay("h100x8-healthy", "check", "--mode", mode, "--require-gpu", "H100")
    assert code == 0, err


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
