"""deploy/nhc/gpudiag.nhc under the real NHC (tests/nhc/, run by tests/nhc_harness.sh): NHC resets
PATH to /sbin:/usr/sbin:/bin:/usr/bin before it runs a check, so `check_gpudiag` finds gpudiag the
way the docs install it (GPUDIAG from nhc.conf, NHC's PATH, the usual install places), and a gpudiag
it cannot find or run fails the check with a reason that says so and how to fix it. Here NHC marks
nothing offline (MARK_OFFLINE=0, or `-e`); tests/test_slurm.py runs it against a real Slurm."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "tests" / "nhc_harness.sh"
CONF = ROOT / "deploy" / "nhc" / "nhc-gpudiag.conf"
NHC_PATH = "/sbin:/usr/sbin:/bin:/usr/bin"


def fake_gpudiag(path: Path, code: int, line: str) -> Path:
    """A gpudiag that says ``line`` on stderr and exits ``code``; it logs its PATH and arguments."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$PATH $*" >> {path}.calls\necho "{line}" >&2\nexit {code}\n')
    path.chmod(0o755)
    return path


def nhc(tmp_path: Path, conf: str, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The real NHC over ``conf`` (nhc.conf's text), marking nothing offline, as root runs it from a
    login shell whose PATH has /usr/local/bin and a venv on it (NHC drops them)."""
    confdir = tmp_path / "nhc"
    confdir.mkdir(exist_ok=True)
    (confdir / "nhc.conf").write_text(conf)
    caller = {**os.environ, "PATH": f"{tmp_path / 'venv' / 'bin'}:/usr/local/bin:{NHC_PATH}", **env}
    command = ["bash", str(HARNESS), str(confdir), "node1", *options, "MARK_OFFLINE=0"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=caller)


def documented_conf(gpudiag: str | None) -> str:
    """deploy/nhc/nhc-gpudiag.conf's lines for every node, GPUDIAG pointed at ``gpudiag`` (or left out)."""
    lines = [line for line in CONF.read_text().splitlines() if line.startswith("* ||")]
    assert lines[0] == "* || export GPUDIAG=/opt/gpudiag/bin/gpudiag"
    assert lines[1:] == ["* || check_gpudiag --skip health.processes"]
    head = [] if gpudiag is None else [lines[0].replace("/opt/gpudiag/bin/gpudiag", gpudiag)]
    return "\n".join([*head, *lines[1:]]) + "\n"


def test_the_documented_conf_finds_a_gpudiag_nhcs_path_does_not_have(tmp_path: Path) -> None:
    """gpudiag in a venv, on the caller's PATH but not NHC's: the conf line's GPUDIAG finds it, and a
    ready node passes (with the old check: `gpudiag: command not found`, exit 127, every node drained)."""
    gpudiag = fake_gpudiag(tmp_path / "venv" / "bin" / "gpudiag", 0, "gpudiag: READY (40 passed, 3 skipped)")
    done = nhc(tmp_path, documented_conf(str(gpudiag)))
    assert done.returncode == 0, done.stdout + done.stderr
    path, args = Path(f"{gpudiag}.calls").read_text().split(" ", 1)
    assert path == NHC_PATH and args == "check --mode health-check --skip health.processes\n"


def test_a_failure_is_gpudiags_reason(tmp_path: Path) -> None:
    line = "gpudiag: NOT READY: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)"
    gpudiag = fake_gpudiag(tmp_path / "venv" / "bin" / "gpudiag", 1, line)
    done = nhc(tmp_path, documented_conf(str(gpudiag)))
    assert done.returncode == 1
    assert "Health check failed:  check_gpudiag:  health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors" in done.stdout


def test_without_gpudiag_set_it_looks_where_pip_and_the_docs_install_it(tmp_path: Path) -> None:
    """No GPUDIAG: NHC's PATH, then GPUDIAG_SEARCH (/usr/local/bin/gpudiag, /opt/gpudiag/bin/gpudiag, …)."""
    local = fake_gpudiag(tmp_path / "usr-local-bin" / "gpudiag", 0, "gpudiag: READY (40 passed, 3 skipped)")
    search = f"{tmp_path}/nowhere/gpudiag {local}"
    done = nhc(tmp_path, documented_conf(None), GPUDIAG_SEARCH=search)
    assert done.returncode == 0, done.stdout + done.stderr
    assert Path(f"{local}.calls").exists()


def test_a_gpudiag_that_cannot_be_found_is_reported_as_that_with_the_fix(tmp_path: Path) -> None:
    fake_gpudiag(tmp_path / "venv" / "bin" / "gpudiag", 0, "gpudiag: READY")  # on the caller's PATH only
    done = nhc(tmp_path, documented_conf(None), GPUDIAG_SEARCH=f"{tmp_path}/nowhere/gpudiag")
    assert done.returncode == 1
    assert (
        f"check_gpudiag:  gpudiag not found on the PATH NHC sets ({NHC_PATH}) nor as {tmp_path}/nowhere/gpudiag: "
        "add `* || export GPUDIAG=/path/to/gpudiag` to nhc.conf"
    ) in done.stdout, done.stdout + done.stderr
    done = nhc(tmp_path, documented_conf(str(tmp_path / "nowhere" / "gpudiag")))
    assert done.returncode == 1 and f"GPUDIAG={tmp_path}/nowhere/gpudiag is not an executable file" in done.stdout
    done = nhc(tmp_path, documented_conf("gpudiag-nowhere"))
    assert done.returncode == 1 and "GPUDIAG=gpudiag-nowhere is not on the PATH NHC sets" in done.stdout


def test_a_gpudiag_that_cannot_run_is_reported_as_that(tmp_path: Path) -> None:
    """A venv whose interpreter is gone: the shell's exit 127 and its words, and the fix."""
    broken = tmp_path / "venv" / "bin" / "gpudiag"
    broken.parent.mkdir(parents=True)
    broken.write_text(f"#!{tmp_path}/venv/bin/python-gone\n")
    broken.chmod(0o755)
    done = nhc(tmp_path, documented_conf(str(broken)))
    assert done.returncode == 1
    assert f"check_gpudiag:  {broken} cannot run (exit 127: " in done.stdout, done.stdout
    assert "reinstall gpudiag or set GPUDIAG in nhc.conf" in done.stdout


@pytest.mark.slow
def test_the_real_gpudiag_keeps_a_healthy_node_up_under_nhcs_path(tmp_path: Path) -> None:
    """gpudiag itself (a replayed healthy node), installed in a venv-like place NHC's PATH lacks."""
    gpudiag = tmp_path / "venv" / "bin" / "gpudiag"
    gpudiag.parent.mkdir(parents=True)
    gpudiag.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {os.path.abspath(sys.executable)} -m gpudiag "$@"\n')
    gpudiag.chmod(0o755)
    done = nhc(tmp_path, documented_conf(str(gpudiag)), GPUDIAG_REPLAY="h100x8-healthy")
    assert done.returncode == 0, done.stdout + done.stderr
    done = nhc(tmp_path, documented_conf(str(gpudiag)), GPUDIAG_REPLAY="a100-ecc-errors")
    assert (
        done.returncode == 1 and "check_gpudiag:  health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors" in done.stdout
    )
