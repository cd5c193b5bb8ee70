"""The Slurm prolog example works as documented against replayed machines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_scontrol import FakeSlurm, install

ROOT = Path(__file__).resolve().parent.parent


def install_gpudiag(bindir: Path) -> None:
    gpudiag = bindir / "gpudiag"
    gpudiag.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpudiag "$@"\n')
    gpudiag.chmod(0o755)


@pytest.fixture
def slurm(tmp_path: Path) -> FakeSlurm:
    fake = install(tmp_path, {"node1": ("IDLE", ""), "node2": ("IDLE", "admin: new DIMMs [ticket 42]")})
    install_gpudiag(fake.bindir)
    return fake


def run_prolog(slurm: FakeSlurm, machine: str, expect: str = "", node: str = "node1") -> int:
    env = {
        **os.environ,
        "PATH": f"{slurm.bindir}:{os.environ['PATH']}",
        "GPUDIAG_REPLAY": machine,
        "GPUDIAG_EXPECT_GPUS": expect,
        "GPUDIAG_PROLOG_CONF": "/nonexistent",
        "SLURMD_NODENAME": node,
    }
    return subprocess.run(["bash", str(ROOT / "deploy" / "slurm" / "slurm-prolog.sh")], env=env, timeout=120).returncode


needs_shell = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout"
)


@pytest.mark.slow
@needs_shell
def test_prolog_drains_a_broken_node_with_the_reason(slurm: FakeSlurm) -> None:
    assert run_prolog(slurm, "a100-ecc-errors") == 1
    node = slurm.nodes()["node1"]
    assert (node["state"], node["reason"]) == (
        "IDLE+DRAIN",
        "gpudiag prolog: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)",
    )


@pytest.mark.slow
@needs_shell
def test_prolog_passes_a_healthy_node(slurm: FakeSlurm) -> None:
    assert run_prolog(slurm, "h100x8-healthy", "8") == 0
    assert slurm.updates() == []
    assert run_prolog(slurm, "h100x8-healthy", "4") == 1
    reason = "gpudiag prolog: nvml.gpu_count: NVML sees 8 GPU(s), expected 4; fix config"
    assert slurm.nodes()["node1"]["reason"] == reason


@pytest.mark.slow
@needs_shell
def test_prolog_never_overwrites_someone_elses_reason(slurm: FakeSlurm) -> None:
    assert run_prolog(slurm, "a100-ecc-errors", node="node2") == 1  # the job still stays off the node
    assert slurm.updates() == []
    assert slurm.nodes()["node2"]["reason"] == "admin: new DIMMs [ticket 42]"


@pytest.mark.slow
@needs_shell
@pytest.mark.parametrize("name", ["ALL", "all", "Default"])
def test_prolog_never_passes_a_keyword_as_the_node(slurm: FakeSlurm, name: str) -> None:
    """`scontrol update NodeName=ALL` would drain every node: the name is refused, the job kept off."""
    assert run_prolog(slurm, "a100-ecc-errors", node=name) == 1
    assert slurm.updates() == [] and slurm.nodes()["node1"]["reason"] == ""


@pytest.mark.slow
@needs_shell
def test_prolog_treats_a_missed_deadline_as_unknown(slurm: FakeSlurm, tmp_path: Path) -> None:
    conf = tmp_path / "gpudiag-prolog"
    conf.write_text("GPUDIAG_DEADLINE=0.001\n")
    env_conf = {"GPUDIAG_PROLOG_CONF": str(conf)}
    env = {**os.environ, "PATH": f"{slurm.bindir}:{os.environ['PATH']}", "GPUDIAG_REPLAY": "h100x8-healthy"}
    env |= {"SLURMD_NODENAME": "node1", **env_conf}
    done = subprocess.run(["bash", str(ROOT / "deploy" / "slurm" / "slurm-prolog.sh")], env=env, timeout=120)
    assert done.returncode == 1
    assert slurm.nodes()["node1"]["reason"].startswith("gpudiag prolog: no verdict within 0.001 s")
