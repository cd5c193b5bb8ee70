"""`gpudiag drain`: NHC's rules against a fake `scontrol` on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import drain
from gpudiag.fleet.drain import Action, Current, Target, Verb
from tests import fleet_files as ff
from tests.conftest import Cli
from tests.fake_scontrol import FakeSlurm, install

# `scontrol show node vm` of Slurm 22.05 (Debian's slurm-wlm), drained by gpudiag.
SHOW_NODE = """\
NodeName=vm Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=2.79
   AvailableFeatures=(null)
   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug
   Reason=gpudiag: health.ecc; GPU reset needed [root@2026-11-23T07:19:25]
"""

ECC = "gpudiag: health.ecc,health.row_remap,health.recovery_action,health.clock_events; GPU reset needed"


def test_show_node_is_parsed() -> None:
    assert drain.parse_show_node(SHOW_NODE) == Current("IDLE+DRAIN", "gpudiag: health.ecc; GPU reset needed")
    idle = SHOW_NODE.replace("IDLE+DRAIN", "IDLE").replace("   Reason=gpudiag: health.ecc; GPU reset needed", "")
    assert drain.parse_show_node(idle.replace(" [root@2026-11-23T07:19:25]", "")) == Current("IDLE", "")
    assert drain.parse_show_node("Node nosuch not found") is None


def test_the_reason_names_the_checks_and_a_needed_reset() -> None:
    assert drain.reason(Target("n", False, ("health.ecc",), "GPU reset needed")) == "gpudiag: health.ecc"
    target = Target("n", False, ("health.ecc", "health.row_remap"), "GPU reset needed")
    assert drain.reason(target) == "gpudiag: health.ecc,health.row_remap; GPU reset needed"
    long = drain.reason(Target("n", False, tuple(f"check.number_{i}" for i in range(40))))
    assert len(long) == drain.MAX_REASON and long.endswith("…")


def test_the_plan_follows_nhcs_rules() -> None:
    targets = [
        Target("fresh", False, ("health.ecc",)),
        Target("admin", False, ("health.ecc",)),
        Target("ours-same", False, ("health.ecc",)),
        Target("ours-old", False, ("health.ecc",)),
        Target("healed", True, ()),
        Target("healed-admin", True, ()),
        Target("fine", True, ()),
        Target("unknown", False, ("nvml.gpu_lost",)),
    ]
    current = {
        "fresh": Current("IDLE", ""),
        "admin": Current("IDLE+DRAIN", "bad DIMM, ticket 42"),
        "ours-same": Current("MIXED+DRAIN", "gpudiag: health.ecc"),
        "ours-old": Current("IDLE+DRAIN", "gpudiag: nvml.gpu_lost"),
        "healed": Current("IDLE+DRAIN", "gpudiag: health.ecc"),
        "healed-admin": Current("DOWN+DRAIN", "Not responding"),
        "fine": Current("IDLE", ""),
        "unknown": None,
    }
    plan = {a.node: (a.verb, a.reason) for a in drain.plan(targets, current, resume=False)}
    assert plan == {
        "fresh": (Verb.DRAIN, "gpudiag: health.ecc"),
        "admin": (Verb.KEEP, "not drained: reason set by someone else: bad DIMM, ticket 42"),
        "ours-same": (Verb.KEEP, "already drained: gpudiag: health.ecc"),
        "ours-old": (Verb.DRAIN, "gpudiag: health.ecc"),  # our own reason is ours to update
        "unknown": (Verb.KEEP, "Slurm does not know this node"),
    }
    resumed = {a.node: a.verb for a in drain.plan(targets, current, resume=True)}
    assert resumed["healed"] is Verb.RESUME and resumed["healed-admin"] is Verb.KEEP and "fine" not in resumed


def test_commands_read_like_nhcs() -> None:
    action = Action("gpu003", Verb.DRAIN, "gpudiag: health.ecc; GPU reset needed")
    assert (
        action.shell() == 'scontrol update NodeName=gpu003 State=DRAIN Reason="gpudiag: health.ecc; GPU reset needed"'
    )
    assert action.command()[-1] == "Reason=gpudiag: health.ecc; GPU reset needed"
    assert Action("gpu003", Verb.RESUME, "").shell() == "scontrol update NodeName=gpu003 State=RESUME"


# --- the command, with a fake scontrol --------------------------------------------------------


@pytest.fixture
def report_file(cli: Cli, tmp_path: Path) -> Path:
    nodes = tmp_path / "nodes"
    for node, machine in {"gpu1": "h100x8-healthy", "gpu2": "a100-ecc-errors", "gpu3": "a100-ecc-errors"}.items():
        ff.write(nodes, f"{node}.json", ff.check(machine, node))
    ff.write(nodes, "gpu4.json", b"")  # unreadable: not drained, gpudiag does not know what is wrong
    code, out, _ = cli("report", str(nodes), "--json")
    assert code == ExitCode.FAILED
    return ff.write(tmp_path, "report.json", out)


def run(cli: Cli, slurm: FakeSlurm, *args: str) -> tuple[int, str, str]:
    return cli("drain", *args, env={"PATH": f"{slurm.bindir}:{os.environ['PATH']}"})


@pytest.mark.slow
def test_dry_run_prints_and_changes_nothing(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(tmp_path, {"gpu1": ("IDLE", ""), "gpu2": ("IDLE", ""), "gpu3": ("ALLOCATED", "admin: keep")})
    code, out, _ = run(cli, slurm, str(report_file))
    assert code == 0
    assert out.splitlines() == [
        f'scontrol update NodeName=gpu2 State=DRAIN Reason="{ECC}"',
        "# gpu3: not drained: reason set by someone else: admin: keep",
    ]
    assert slurm.updates() == []


@pytest.mark.slow
def test_execute_drains_and_resume_undrains_only_ours(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(
        tmp_path,
        {
            "gpu1": ("IDLE+DRAIN", "gpudiag: health.ecc"),
            "gpu2": ("IDLE", ""),
            "gpu3": ("IDLE", ""),
            "gpu4": ("IDLE", ""),
        },
    )
    code, out, _ = run(cli, slurm, str(report_file), "--execute")
    assert code == 0, out
    nodes = slurm.nodes()
    assert nodes["gpu2"] == nodes["gpu3"] == {"state": "IDLE+DRAIN", "reason": ECC}
    assert nodes["gpu4"] == {"state": "IDLE", "reason": ""}  # unreadable: left alone
    assert nodes["gpu1"]["state"] == "IDLE+DRAIN"  # ready again, but no --resume
    assert run(cli, slurm, str(report_file), "--execute")[1].count("already drained") == 2  # idempotent
    code, out, _ = run(cli, slurm, str(report_file), "--execute", "--resume")
    assert code == 0 and "resume gpu1: ready again (was: gpudiag: health.ecc)" in out
    assert slurm.nodes()["gpu1"] == {"state": "IDLE", "reason": ""}


@pytest.mark.slow
def test_drain_takes_node_files_directly(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(tmp_path, {"gpu2": ("IDLE", ""), "gpu3": ("IDLE", "")})
    _, out, _ = run(cli, slurm, str(tmp_path / "nodes"))
    assert out.count("State=DRAIN") == 2


@pytest.mark.slow
def test_a_failed_update_fails_the_command(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(tmp_path, {"gpu2": ("IDLE", ""), "gpu3": ("IDLE", "")}, fail_updates=True)
    code, _, err = run(cli, slurm, str(report_file), "--execute")
    assert code == ExitCode.FAILED and "drain gpu2 failed: slurm_update error: Invalid node name specified" in err


def test_without_scontrol(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    code, out, err = cli("drain", str(report_file), env=env)
    assert code == 0 and "scontrol not found on PATH" in err and out.count("State=DRAIN") == 2
    code, _, err = cli("drain", str(report_file), "--execute", env=env)
    assert code == ExitCode.FAILED and "scontrol not found" in err


def test_a_file_that_is_not_a_report_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    bad = ff.write(tmp_path, "r.json", json.dumps({"schema": "gpudiag.report/1", "nodes": 3}))
    code, _, err = cli("drain", str(bad))
    assert code == ExitCode.USAGE and "not a `gpudiag report --json` output" in err
    assert cli("drain", str(tmp_path / "missing.json"))[0] == ExitCode.USAGE
