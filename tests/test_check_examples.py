"""The scheduler examples do what their comments say, every exit path, against fake Slurm commands:
the Prolog, the HealthCheckProgram and NHC's check_gpudiag (the real Slurm: tests/test_slurm.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.replay import fixtures
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
NHC_CONF = ROOT / "deploy" / "nhc" / "nhc-gpudiag.conf"
NHC_CHECK = ROOT / "deploy" / "nhc" / "gpudiag.nhc"
PROLOG = ROOT / "deploy" / "slurm" / "slurm-prolog.sh"
HEALTHCHECK = ROOT / "deploy" / "slurm" / "slurm-healthcheck.sh"
MACHINES = Path(fixtures.__file__).resolve().parent.parent / "machines"
ECC = "health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)"

needs_shell = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout"
)


def nhc_lines() -> list[list[str]]:
    """The gpudiag check options of each check_gpudiag line of the example nhc.conf."""
    out = []
    for line in NHC_CONF.read_text().splitlines():
        if line.startswith("#") or "check_gpudiag" not in line:
            continue
        words = shlex.split(line.split("||", 1)[1])
        assert words[0] == "check_gpudiag", line
        out.append(words[1:])
    return out


def test_the_nhc_lines_exist_and_parse() -> None:
    assert len(nhc_lines()) == 2


@pytest.mark.parametrize("index", [0, 1])
def test_nhc_lines_pass_a_healthy_node_and_fail_a_broken_one(cli: Cli, index: int) -> None:
    args = ["check", "--mode", "health-check", *nhc_lines()[index]]
    assert cli("--replay", "h100x8-healthy", *args)[0] == 0
    assert cli("--replay", "a100-ecc-errors", *args)[0] == 1
    assert cli("--replay", "gpu-lost", *args)[0] == 1


def fake_bin(tmp_path: Path, gpudiag_body: str, node_reason: str = "", admin_comment: str = "") -> tuple[Path, Path]:
    """scontrol, scancel and logger that log their arguments (one line per call); scontrol answers
    `show node` with ``node_reason`` and `show job` with ``admin_comment``, as Slurm 22.05 prints them."""
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    show_node = f"   Reason={node_reason} [root@2026-11-23T07:19:25]" if node_reason else "   State=IDLE"
    show_job = f"   AdminComment={admin_comment} " if admin_comment else "   JobState=RUNNING"
    scripts = {
        "scontrol": f"""echo "scontrol $*" >> {log}
case "$1 $2" in
    "show node") printf '%s\\n' "NodeName=$3 Arch=x86_64" {shlex.quote(show_node)} ;;
    "show job") printf '%s\\n' "JobId=$3 JobName=train" {shlex.quote(show_job)} ;;
esac
""",
        "scancel": f'echo "scancel $*" >> {log}\n',
        "logger": f'echo "logger $*" >> {log}\n',
        "gpudiag": gpudiag_body,
    }
    for name, body in scripts.items():
        script = bindir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    return bindir, log


def replaying(machine: str) -> str:
    return f'exec {sys.executable} -m gpudiag --replay {machine} "$@"\n'


def run_script(script: Path, bindir: Path, conf_var: str, **env: str) -> int:
    conf = str(bindir / "no-such-conf")  # never the machine's /etc/default/gpudiag-*
    full = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", conf_var: conf, "SLURMD_NODENAME": "gpu7", **env}
    return subprocess.run(["bash", str(script)], env=full, timeout=120).returncode


def run_prolog(bindir: Path, **env: str) -> int:
    return run_script(PROLOG, bindir, "GPUDIAG_PROLOG_CONF", SLURM_JOB_ID="4242", **env)


def calls(log: Path, command: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith(command)] if log.exists() else []


def job_env_machine(tmp_path: Path, *env: tuple[str, str]) -> str:
    """The healthy 8-GPU node as a job with this environment sees it."""
    data = json.loads((MACHINES / "h100x8-healthy.json").read_text())
    data["env"] = [list(pair) for pair in env]
    path = tmp_path / "job-env.json"
    path.write_text(json.dumps(data))
    return str(path)


# --- the Prolog ------------------------------------------------------------------------------


@pytest.mark.slow
@needs_shell
def test_prolog_drains_for_a_node_fault_with_the_reason(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, replaying("misconfigured-node"))
    assert run_prolog(bindir) == 1
    (update,) = calls(log, "scontrol update")
    assert update == (
        "scontrol update NodeName=gpu7 State=DRAIN "
        "Reason=gpudiag prolog: config.compute_mode GPU1 GPU-a40a40a4: compute mode Prohibited; fix config"
    )  # env.visible_devices (job scope) failed too: not a reason to drain; health.processes is skipped
    assert calls(log, "scancel") == []


@pytest.mark.slow
@needs_shell
def test_prolog_cancels_a_job_whose_own_environment_fails_and_keeps_the_node(tmp_path: Path) -> None:
    machine = job_env_machine(tmp_path, ("CUDA_VISIBLE_DEVICES", "-1"))
    bindir, log = fake_bin(tmp_path, replaying(machine))
    assert run_prolog(bindir) == 0  # a non-zero exit would make Slurm drain the node
    reason = "gpudiag prolog: env.visible_devices: CUDA_VISIBLE_DEVICES='-1' leaves no device"
    assert calls(log, "scontrol") == [
        "scontrol show job 4242",
        calls(log, "scontrol update")[0],
    ]
    assert calls(log, "scontrol update")[0].startswith(f"scontrol update JobId=4242 AdminComment={reason}")
    assert calls(log, "scontrol update")[0].endswith("; fix job")
    assert calls(log, "scancel") == ["scancel 4242"]


@pytest.mark.slow
@needs_shell
def test_prolog_keeps_someone_elses_admin_comment(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, replaying("h100x8-healthy"), admin_comment="ticket 7")
    assert run_prolog(bindir, GPUDIAG_ARGS="--min-free 1000GiB") == 0
    assert calls(log, "scontrol update") == [] and calls(log, "scancel") == ["scancel 4242"]


@pytest.mark.slow
@needs_shell
def test_prolog_never_overwrites_someone_elses_reason(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, BROKEN, node_reason="admin: new DIMMs")
    assert run_prolog(bindir) == 1  # Slurm drains the node for the failed prolog; the admin's reason stays
    assert calls(log, "scontrol update") == []
    bindir, log = fake_bin(tmp_path / "ours", BROKEN, node_reason="gpudiag: nvml.gpu_lost")
    assert run_prolog(bindir) == 1
    assert calls(log, "scontrol update") == [f"scontrol update NodeName=gpu7 State=DRAIN Reason=gpudiag prolog: {ECC}"]


COULD_NOT_RUN = """echo "gpudiag: UNKNOWN: could not run: the torch probe could not start: x" >&2
exit 5
"""
# What `check --mode` says on the example machines, for the tests about the scripts' own logic.
READY = 'echo "gpudiag: READY (91 passed, 12 skipped)" >&2\n'
BROKEN = f'echo "gpudiag: NOT READY: {ECC}" >&2\nexit 1\n'


@pytest.mark.slow
@needs_shell
def test_prolog_drains_when_gpudiag_could_not_run(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, COULD_NOT_RUN)
    assert run_prolog(bindir) == 1
    assert "Reason=gpudiag prolog: could not run: the torch probe could not start: x (exit 5)" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_can_let_jobs_run_when_gpudiag_could_not_run(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, COULD_NOT_RUN)
    assert run_prolog(bindir, GPUDIAG_ON_UNKNOWN="pass") == 0
    assert calls(log, "scontrol update") == [] and calls(log, "logger -t gpudiag-prolog")


@pytest.mark.slow
@needs_shell
def test_prolog_treats_a_hang_as_a_drain(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, "exec sleep 30\n")
    assert run_prolog(bindir, GPUDIAG_TIMEOUT="1") == 1
    assert "timed out after 1 s" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_passes_the_expected_gpu_count(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, replaying("h100x8-healthy"))
    assert run_prolog(bindir, GPUDIAG_EXPECT_GPUS="8") == 0
    assert calls(log, "scontrol") == []  # a ready node: not even a look at Slurm
    assert run_prolog(bindir, GPUDIAG_EXPECT_GPUS="7") == 1
    assert "Reason=gpudiag prolog: nvml.gpu_count: NVML sees 8 GPU(s), expected 7; fix config" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_reads_its_settings_file(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, replaying("h100x8-healthy"))
    conf = tmp_path / "gpudiag-prolog"
    conf.write_text("GPUDIAG_EXPECT_GPUS=9\n")
    assert run_prolog(bindir, GPUDIAG_PROLOG_CONF=str(conf)) == 1
    assert "Reason=gpudiag prolog: nvml.gpu_count: NVML sees 8 GPU(s), expected 9; reseat" in log.read_text()


@pytest.mark.slow
@needs_shell
def test_prolog_never_passes_a_node_name_that_is_syntax(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, BROKEN)
    assert run_prolog(bindir, SLURMD_NODENAME="gpu[1-3]") == 1
    assert calls(log, "scontrol") == []


# --- HealthCheckProgram ------------------------------------------------------------------------


def run_healthcheck(bindir: Path, **env: str) -> int:
    return run_script(HEALTHCHECK, bindir, "GPUDIAG_HEALTHCHECK_CONF", **env)


@pytest.mark.slow
@needs_shell
def test_healthcheck_drains_a_broken_node_once(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, replaying("a100-ecc-errors"))
    assert run_healthcheck(bindir) == 1
    assert calls(log, "scontrol update") == [
        f"scontrol update NodeName=gpu7 State=DRAIN Reason=gpudiag health-check: {ECC}"
    ]
    # Drained already for this very fault: not drained again (sinfo -R keeps the time it began).
    bindir, log = fake_bin(tmp_path / "again", BROKEN, f"gpudiag health-check: {ECC}")
    assert run_healthcheck(bindir) == 1 and calls(log, "scontrol update") == []


@pytest.mark.parametrize(
    ("reason", "resumed"),
    [
        (f"gpudiag health-check: {ECC}", True),
        ("", False),
        (f"gpudiag prolog: {ECC}", False),  # the Prolog's options and checks are not the health check's
        (f"gpudiag: {ECC}", False),  # nor a fleet check's (its functional test)
        ("NHC: check_gpudiag:  x", False),
        ("admin: new DIMMs", False),
    ],
)
@needs_shell
def test_healthcheck_resumes_only_what_it_drained(tmp_path: Path, reason: str, resumed: bool) -> None:
    bindir, log = fake_bin(tmp_path, READY, reason)
    assert run_healthcheck(bindir) == 0
    assert calls(log, "scontrol update") == (["scontrol update NodeName=gpu7 State=RESUME"] if resumed else [])


@needs_shell
def test_healthcheck_leaves_someone_elses_reason(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, BROKEN, "admin: new DIMMs")
    assert run_healthcheck(bindir) == 1 and calls(log, "scontrol update") == []


@pytest.mark.slow
@needs_shell
def test_healthcheck_judges_the_node_only(tmp_path: Path) -> None:
    machine = job_env_machine(tmp_path, ("CUDA_VISIBLE_DEVICES", "-1"))
    bindir, log = fake_bin(tmp_path, replaying(machine))
    assert run_healthcheck(bindir) == 0 and calls(log, "scontrol update") == []


@pytest.mark.slow
@needs_shell
def test_healthcheck_unknown_drains_or_passes(tmp_path: Path) -> None:
    bindir, log = fake_bin(tmp_path, COULD_NOT_RUN)
    assert run_healthcheck(bindir) == 5
    assert calls(log, "scontrol update") == [
        "scontrol update NodeName=gpu7 State=DRAIN "
        "Reason=gpudiag health-check: could not run: the torch probe could not start: x (exit 5)"
    ]
    bindir, log = fake_bin(tmp_path / "pass", COULD_NOT_RUN)
    assert run_healthcheck(bindir, GPUDIAG_ON_UNKNOWN="pass") == 5 and calls(log, "scontrol update") == []


# --- NHC's check_gpudiag -------------------------------------------------------------------------


def run_check_gpudiag(bindir: Path, *args: str) -> tuple[int, str]:
    """check_gpudiag sourced as NHC sources it, with a `die` that records its message and exits."""
    code = f'die() {{ echo "$2" > "$DIED"; exit "$1"; }}; source {NHC_CHECK}; check_gpudiag "$@"'
    died = bindir.parent / "died"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "DIED": str(died)}
    done = subprocess.run(["bash", "-c", code, "nhc", *args], env=env, timeout=120)
    return done.returncode, died.read_text().rstrip("\n") if died.exists() else ""


@pytest.mark.slow
@needs_shell
def test_check_gpudiag_dies_with_the_failing_check(tmp_path: Path) -> None:
    bindir, _ = fake_bin(tmp_path, replaying("a100-ecc-errors"))
    assert run_check_gpudiag(bindir, "--skip", "health.processes") == (1, f"check_gpudiag:  {ECC}")
    bindir, _ = fake_bin(tmp_path / "ok", READY)
    assert run_check_gpudiag(bindir, "--skip", "health.processes") == (0, "")
    bindir, _ = fake_bin(tmp_path / "unknown", COULD_NOT_RUN)
    assert run_check_gpudiag(bindir) == (
        1,
        "check_gpudiag:  gpudiag UNKNOWN: could not run: the torch probe could not start: x (exit 5)",
    )
    bindir, _ = fake_bin(tmp_path / "usage", replaying("h100x8-healthy"))
    rc, message = run_check_gpudiag(bindir, "--min-free", "1GiB")
    assert rc == 1 and message.startswith("check_gpudiag:  gpudiag --min-free is judged by a job-scope check")
    assert message.endswith("(exit 2)") and "'" not in message
