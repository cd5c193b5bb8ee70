"""The Slurm prolog example works as documented against replayed machines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_scontrol(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "scontrol.log"
    script = tmp_path / "bin" / "scontrol"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    script.chmod(0o755)
    gpudiag = script.parent / "gpudiag"
    gpudiag.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpudiag "$@"\n')
    gpudiag.chmod(0o755)
    return script.parent, log


def run_prolog(bindir: Path, machine: str, expect: str = "") -> int:
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "GPUDIAG_REPLAY": machine,
        "GPUDIAG_EXPECT_GPUS": expect,
    }
    return subprocess.run(["bash", str(ROOT / "examples" / "slurm-prolog.sh")], env=env, timeout=120).returncode


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_prolog_drains_a_broken_node_with_the_reason(fake_scontrol: tuple[Path, Path]) -> None:
    bindir, log = fake_scontrol
    assert run_prolog(bindir, "a100-ecc-errors") == 1
    line = log.read_text()
    assert "State=DRAIN" in line and "health.ecc[GPU 0]: 2 uncorrected ECC error(s)" in line


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_prolog_passes_a_healthy_node(fake_scontrol: tuple[Path, Path]) -> None:
    bindir, log = fake_scontrol
    assert run_prolog(bindir, "h100x8-healthy", "8") == 0
    assert not log.exists()
    assert run_prolog(bindir, "h100x8-healthy", "4") == 1
    assert "nvml.gpu_count: NVML sees 8 GPU(s), expected 4" in log.read_text()
