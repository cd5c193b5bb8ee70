"""The scheduler examples do what their comments say: NHC lines and the Slurm prolog's exit paths."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
NHC = ROOT / "examples" / "nhc-gpudiag.conf"
PROLOG = ROOT / "examples" / "slurm-prolog.sh"


def nhc_lines() -> list[list[str]]:
    """The gpudiag arguments of each check_cmd_status line."""
    out = []
    for line in NHC.read_text().splitlines():
        if line.startswith("#") or "check_cmd_status" not in line:
            continue
        words = shlex.split(line.split("||", 1)[1])
        assert words[:2] == ["check_cmd_status", "-t"] and words[3:5] == ["-r", "0"], line
        assert int(words[2]) <= 10, line  # NHC's default is 5 s; HealthCheckProgram is killed after 60 s
        assert words[5].endswith("/gpudiag"), line
        out.append(words[6:])
    return out


def test_the_nhc_lines_exist_and_parse() -> None:
    lines = nhc_lines()
    assert len(lines) == 2
    assert all(args[:3] == ["check", "--mode", "health-check"] for args in lines)


@pytest.mark.parametrize("index", [0, 1])
def test_nhc_lines_pass_a_healthy_node_and_fail_a_broken_one(cli: Cli, index: int) -> None:
    args = nhc_lines()[index]
    assert cli("--replay", "h100x8-healthy", *args)[0] == 0
    assert cli("--replay", "a100-ecc-errors", *args)[0] == 1
    assert cli("--replay", "gpu-lost", *args)[0] == 1


needs_shell = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout"
)


def fake_bin(tmp_path: Path, gpudiag_body: str) -> tuple[Path, Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    for name in ("scontrol", "logger"):
        script = bindir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n')
        script.chmod(0o755)
    gpudiag = bindir / "gpudiag"
    gpudiag.write_text("#!/bin/sh\n" + gpudiag_body)
    gpudiag.chmod(0o755)
    return bindir, log


def run_prolog(bindir: Path, **env: str) -> int:
    conf = str(bindir / "no-such-conf")  # never the machine's /etc/default/gpudiag-prolog
    full = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "GPUDIAG_PROLOG_CONF": conf, **env}
    return subprocess.run(["bash", str(PROLOG)], env=full, timeout=120).returncode


@pytest.mark.slow
@needs_shell
def test_prolog_drains_with_the_failing_checks_from_a_real_run(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, f'exec {sys.executable} -m gpudiag --replay misconfigured-node "$@"\n')
    assert run_prolog(bindir) == 1
    text = log.read_text()
    update = next(line for line in text.splitlines() if line.startswith("scontrol update NodeName="))
    assert "State=DRAIN" in update
    assert "compat" not in update  # no torch in a prolog: the job's torch is not the node's business
    assert "Reason=gpudiag: env.visible_devices,config.compute_mode" in update
    assert len(update.split("Reason=", 1)[1]) <= 200


COULD_NOT_RUN = """echo "gpudiag: UNKNOWN: could not run: the torch probe could not start: x" >&2
exit 5
"""


@pytest.mark.slow
@needs_shell
def test_prolog_drains_when_gpudiag_could_not_run(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, COULD_NOT_RUN)
    assert run_prolog(bindir) == 1
    assert "Reason=gpudiag: could not run: the torch probe could not start: x (exit 5)" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_can_let_jobs_run_when_gpudiag_could_not_run(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, COULD_NOT_RUN)
    assert run_prolog(bindir, GPUDIAG_ON_UNKNOWN="pass") == 0
    text = log.read_text()
    assert "scontrol update" not in text and "logger -t gpudiag-prolog" in text


@pytest.mark.slow
@needs_shell
def test_prolog_treats_a_hang_as_a_drain(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, "exec sleep 30\n")
    assert run_prolog(bindir, GPUDIAG_TIMEOUT="1") == 1
    assert "timed out after 1 s" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_passes_the_expected_gpu_count(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, f'exec {sys.executable} -m gpudiag --replay h100x8-healthy "$@"\n')
    assert run_prolog(bindir, GPUDIAG_EXPECT_GPUS="8") == 0
    assert not log.exists()  # a ready node: not even a look at Slurm
    assert run_prolog(bindir, GPUDIAG_EXPECT_GPUS="7") == 1
    assert "Reason=gpudiag: nvml.gpu_count" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_reads_its_settings_file(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, f'exec {sys.executable} -m gpudiag --replay h100x8-healthy "$@"\n')
    conf = tmp_path / "gpudiag-prolog"
    conf.write_text("GPUDIAG_EXPECT_GPUS=4\n")
    assert run_prolog(bindir, GPUDIAG_PROLOG_CONF=str(conf)) == 1
    assert "Reason=gpudiag: nvml.gpu_count" in log.read_text()
