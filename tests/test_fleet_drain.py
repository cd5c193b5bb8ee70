"""`gpudiag drain`: one node per command, node-scope failures only, others' reasons kept, resume only
on newer evidence; against a fake `scontrol` on PATH (the real one: tests/test_slurm.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import drain, faults
from gpudiag.fleet.drain import Current, Step, Target, Verb
from tests import fleet_files as ff
from tests.conftest import Cli
from tests.fake_scontrol import FakeSlurm, install

# `scontrol show node` of Slurm 22.05 (Debian's slurm-wlm), two nodes: one drained by gpudiag (a
# reason with brackets of its own, then Slurm's [user@time], then a Comment line), one idle.
SHOW_NODES = """\
NodeName=vm Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=4.45
   AvailableFeatures=(null)
   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=gpudiag: x [a@b] [root@2026-11-25T12:35:32]
   Comment=hello

NodeName=vm2 Arch=x86_64 CoresPerSocket=1
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug

"""

ECC = "gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)"


def _local(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def test_every_node_is_read_from_one_show_node() -> None:
    nodes = drain.parse_nodes(SHOW_NODES)
    assert nodes == {
        "vm": Current("IDLE+DRAIN", "gpudiag: x [a@b]", _local("2026-11-25T12:35:32")),
        "vm2": Current("MIXED", "", None),
    }
    assert drain.parse_nodes("") == {}


def failure(check: str = "health.ecc", scope: str = "node", action: str = "reset") -> faults.Failed:
    return faults.Failed(check, "GPU 0", "2 uncorrected ECC error(s) since the driver loaded", scope, action, "GPU-1")


def test_the_plan() -> None:
    drained_at = _local("2026-11-23T07:19:25")
    ecc = (failure(),)
    wanted = faults.reason(ecc)
    targets = [
        Target("fresh", "not_ready", ecc),
        Target("admin", "not_ready", ecc),
        Target("admin-up", "not_ready", ecc),
        Target("ours-same", "not_ready", ecc),
        Target("ours-old", "not_ready", ecc),
        Target("job-only", "not_ready", (failure("env.visible_devices", "job", "fix_job"),)),
        Target("strict", "not_ready", (), problem="NOT READY"),
        Target("unknown", "not_ready", ecc),
        Target("gpu[1-3]", "not_ready", ecc),
        Target("a,b", "ready"),
        Target("lost", "unreadable", problem="nodes/lost.json: empty file"),
        Target("gone", "missing"),
        Target("fine", "ready"),
    ]
    current = {
        "fresh": Current("IDLE", ""),
        "admin": Current("IDLE+DRAIN", "bad DIMM, ticket 42"),
        "admin-up": Current("IDLE", "stale note"),
        "ours-same": Current("MIXED+DRAIN", wanted, drained_at),
        "ours-old": Current("IDLE+DRAIN", "gpudiag prolog: nvml.gpu_lost GPU2: GPU is lost; reboot", drained_at),
        "job-only": Current("IDLE", ""),
        "strict": Current("IDLE", ""),
        "fine": Current("IDLE", ""),
    }
    steps = {s.node: (s.verb, s.note) for s in drain.plan(targets, current, resume=False)}
    assert steps == {
        "fresh": (Verb.DRAIN, wanted),
        "admin": (Verb.KEEP, "not drained: reason set by someone else: bad DIMM, ticket 42"),
        "admin-up": (Verb.SKIP, "not drained, IDLE with someone else's reason: stale note"),
        "ours-same": (Verb.KEEP, f"already drained: {wanted}"),
        "ours-old": (Verb.DRAIN, wanted),  # any gpudiag reason is gpudiag's to update
        "job-only": (Verb.KEEP, "left in service: job-scope failures only (env.visible_devices)"),
        "strict": (Verb.DRAIN, "gpudiag: not ready: verdict NOT READY, no failed check listed"),
        "unknown": (Verb.SKIP, "not drained: Slurm does not know this node"),
        "gpu[1-3]": (Verb.SKIP, "not one Slurm node name: never passed to scontrol"),
        "a,b": (Verb.SKIP, "not one Slurm node name: never passed to scontrol"),
        "lost": (Verb.SKIP, "unreadable, not judged, not drained: nodes/lost.json: empty file"),
        "gone": (Verb.SKIP, "missing, not judged, not drained: no file"),
    }
    # Without Slurm's view (dry run, no scontrol): every not-ready node with a node name is listed.
    blind = {s.node for s in drain.plan(targets, None, resume=True) if s.verb is Verb.DRAIN}
    assert blind == {"fresh", "admin", "admin-up", "ours-same", "ours-old", "strict", "unknown"}


def test_resume_needs_a_gpudiag_reason_and_files_newer_than_the_drain(tmp_path: Path) -> None:
    drained_at = _local("2026-11-23T07:19:25")
    passed = {"checks": [{"id": "health.ecc", "status": "PASS", "target": "GPU 0"}]}
    old, new = ff.write(tmp_path, "old.json", json.dumps(passed)), ff.write(tmp_path, "new.json", json.dumps(passed))
    os.utime(old, (drained_at - 60, drained_at - 60))
    os.utime(new, (drained_at + 60, drained_at + 60))
    stamped = ff.write(tmp_path, "stamped.json", json.dumps({**passed, "collected_at": drained_at + 5}))
    os.utime(stamped, (drained_at - 60, drained_at - 60))  # the document's own time wins over the file's
    ours = Current("IDLE+DRAIN", "gpudiag health-check: health.ecc GPU0: uncorrected ECC errors; reset", drained_at)

    def ready(node: str, *files: Path) -> Target:
        return Target(node, "ready", files=tuple(map(str, files)), verified=tuple(map(str, files)))

    targets = [
        ready("healed", new),
        ready("stale", old),
        ready("stamped", stamped),
        ready("gone-file", tmp_path / "nosuch.json"),
        ready("undated", new),
        ready("admin", new),
        ready("up", new),
        Target("unverified", "ready", files=(str(new),)),  # no node-scope check passed in it
        Target("old-report", "ready", files=(str(new),), verified=None),  # a report from before they were listed
    ]
    current = {
        "healed": ours,
        "stale": ours,
        "stamped": ours,
        "gone-file": ours,
        "undated": Current("IDLE+DRAIN", ours.reason, None),
        "admin": Current("IDLE+DRAIN", "new DIMMs", drained_at),
        "up": Current("IDLE", ""),
        "unverified": ours,
        "old-report": ours,
    }
    steps = {s.node: s for s in drain.plan(targets, current, resume=True)}
    assert steps["unverified"].verb is Verb.KEEP and "no check of the node itself ran" in steps["unverified"].note
    assert steps["old-report"].verb is Verb.KEEP and "run report again" in steps["old-report"].note
    assert steps["healed"].verb is Verb.RESUME and steps["stamped"].verb is Verb.RESUME
    assert steps["stale"].verb is Verb.KEEP and "is older than the drain" in steps["stale"].note
    assert steps["gone-file"].verb is Verb.KEEP and steps["undated"].verb is Verb.KEEP
    assert steps["admin"].note == "ready, left drained: reason set by someone else: new DIMMs"
    assert "up" not in steps
    assert drain.plan(targets, current, resume=False) == []


def test_resume_needs_the_check_that_drained_the_node_to_have_run_and_passed(tmp_path: Path) -> None:
    """`check --only nvml.init` passes on a GPU with ECC errors: it says nothing about the fault that
    drained the node, so it resumes nothing; the same check passing on the GPU it named does."""
    drained_at = _local("2026-11-23T07:19:25")
    sick = ff.check("a100-ecc-errors", "gpu1", "--only", "nvml.init")
    assert sick["verdict"] == "READY"  # what a node that never ran health.ecc sends
    results = {
        "init-only": sick["checks"],
        "ecc-skipped": [*sick["checks"], {"id": "health.ecc", "status": "SKIP", "target": "GPU 0"}],
        "other-gpu": [*sick["checks"], {"id": "health.ecc", "status": "PASS", "target": "GPU 1"}],
        "healed": [*sick["checks"], {"id": "health.ecc", "status": "PASS", "target": "GPU 0"}],
    }
    targets = []
    for node, checks in results.items():
        path = ff.write(
            tmp_path, f"{node}.json", json.dumps({**sick, "checks": checks, "collected_at": drained_at + 60})
        )
        targets.append(Target(node, "ready", files=(str(path),), verified=(str(path),)))
    ecc = Current(
        "IDLE+DRAIN", "gpudiag prolog: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset", drained_at
    )
    steps = {s.node: s for s in drain.plan(targets, dict.fromkeys(results, ecc), resume=True)}
    assert {node: s.verb for node, s in steps.items()} == {
        "init-only": Verb.KEEP,
        "ecc-skipped": Verb.KEEP,
        "other-gpu": Verb.KEEP,
        "healed": Verb.RESUME,
    }
    assert "health.ecc on GPU0, which drained it, did not run and pass" in steps["init-only"].note
    # A check that fails on a GPU and passes for the whole node: its node-wide pass clears it.
    lost = Current("IDLE+DRAIN", "gpudiag health-check: nvml.gpu_lost GPU0: GPU is lost; reboot", drained_at)
    assert drain.plan(targets[:1], {"init-only": lost}, resume=True)[0].verb is Verb.KEEP
    found = {
        **sick,
        "checks": [{"id": "nvml.gpu_lost", "status": "PASS", "target": None}],
        "collected_at": drained_at + 60,
    }
    path = ff.write(tmp_path, "found.json", json.dumps(found))
    target = Target("found", "ready", files=(str(path),), verified=(str(path),))
    assert drain.plan([target], {"found": lost}, resume=True)[0].verb is Verb.RESUME
    # A reason that names no check (a verdict without a failed check) needs a passing check file only.
    generic = Current("IDLE+DRAIN", "gpudiag: not ready: verdict NOT READY, no failed check listed", drained_at)
    assert drain.plan(targets[:1], {"init-only": generic}, resume=True)[0].verb is Verb.RESUME
    assert drain.drained_for(ECC) == ("health.ecc", "GPU0")
    assert drain.drained_for("gpudiag health-check: host.nouveau: nouveau loaded; fix config") == ("host.nouveau", "")
    assert drain.drained_for("gpudiag: bench-transfer cuda:0: slow") is None


def test_the_printed_line_is_the_argv_shell_quoted() -> None:
    step = Step("gpu003", Verb.DRAIN, "gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset")
    assert step.line() == (
        "scontrol update NodeName=gpu003 State=DRAIN "
        "'Reason=gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset'"
    )
    assert shlex.split(step.line()) == step.argv()
    assert Step("gpu003", Verb.RESUME, "").line() == "scontrol update NodeName=gpu003 State=RESUME"
    assert Step("x\n;rm", Verb.SKIP, "a\x1b[2Jb").line() == "# x\\n;rm: a\\x1b[2Jb"  # a comment stays one line


# --- the command, with a fake scontrol --------------------------------------------------------


@pytest.fixture
def nodes(tmp_path: Path) -> Path:
    directory = tmp_path / "nodes"
    for node, machine in {"gpu1": "h100x8-healthy", "gpu2": "a100-ecc-errors", "gpu3": "a100-ecc-errors"}.items():
        ff.write(directory, f"{node}.json", ff.check(machine, node))
    return directory


@pytest.fixture
def report_file(cli: Cli, tmp_path: Path, nodes: Path) -> Path:
    ff.write(nodes, "gpu4.json", b"")  # unreadable: named, not drained
    code, out, _ = cli("report", str(nodes), "--json")
    assert code == ExitCode.FAILED
    return ff.write(tmp_path, "report.json", out)


def run(cli: Cli, slurm: FakeSlurm, *args: str) -> tuple[int, str, str]:
    return cli("drain", *args, env={"PATH": slurm.path})


@pytest.mark.slow
def test_dry_run_prints_and_changes_nothing(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(tmp_path, {"gpu1": ("IDLE", ""), "gpu2": ("IDLE", ""), "gpu3": ("ALLOCATED+DRAIN", "admin: keep")})
    code, out, err = run(cli, slurm, str(report_file))
    assert code == ExitCode.FAILED  # gpu4 needs a look
    assert out.splitlines() == [
        f"scontrol update NodeName=gpu2 State=DRAIN 'Reason={ECC}'",
        "# gpu3: not drained: reason set by someone else: admin: keep",
        "# gpu4: unreadable, not judged, not drained: "
        f"{report_file.parent}/nodes/gpu4.json: empty file (the node wrote nothing: crashed, killed or timed out?)",
    ]
    assert err == "# 4 node(s): 1 to drain, 0 to resume, 1 left as they are, 1 to look at (not acted on)\n"
    assert slurm.updates() == []
    assert slurm.calls() == [["show", "node", "--all"]]  # one call for the whole cluster


@pytest.mark.slow
def test_the_dry_run_through_a_shell_runs_what_execute_runs(cli: Cli, tmp_path: Path, nodes: Path) -> None:
    """The printed lines, run by sh, pass scontrol the very argv that --execute passes."""
    ff.write(nodes, "gpu5.json", ff.check("gpu-lost", "gpu5"))
    states = {f"gpu{i}": ("IDLE", "") for i in range(1, 6)}
    executed, printed = install(tmp_path / "a", states), install(tmp_path / "b", states)
    assert run(cli, executed, str(nodes), "--execute")[0] == 0
    code, out, _ = run(cli, printed, str(nodes))
    assert code == 0
    subprocess.run(["sh", "-e"], input=out, text=True, check=True, env={**os.environ, "PATH": printed.path})
    assert printed.updates() == executed.updates() != []
    states = {n: (v["state"], v["reason"]) for n, v in executed.nodes().items()}
    assert {n: (v["state"], v["reason"]) for n, v in printed.nodes().items()} == states
    assert executed.nodes()["gpu5"]["reason"] == (
        "gpudiag: nvml.gpu_lost GPU2: GPU is lost (fallen off the bus, XID 79); reboot"
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpu[1-3]", "gpu1,gpu2", "gpu1 State=RESUME", "gpu1\nx", "-gpu1"])
def test_a_node_name_is_never_syntax(cli: Cli, tmp_path: Path, name: str) -> None:
    directory = tmp_path / "nodes"
    ff.write(directory, "x.json", ff.check("a100-ecc-errors", name))
    slurm = install(tmp_path, {f"gpu{i}": ("IDLE", "") for i in range(1, 4)})
    for args in ((), ("--execute",)):
        code, out, _ = run(cli, slurm, str(directory), *args)
        assert code == ExitCode.FAILED
        # `report` already finds the file unreadable for its name; drain names it and never acts on it.
        assert out.startswith("# x: unreadable, not judged, not drained: ") and "invalid node name" in out
        assert "\n" not in out.rstrip("\n") and "scontrol" not in out
    assert slurm.updates() == [] and all(n["reason"] == "" for n in slurm.nodes().values())


@pytest.mark.slow
def test_an_unreadable_node_file_is_named_not_nothing_to_do(cli: Cli, tmp_path: Path) -> None:
    directory = tmp_path / "nodes"
    ff.write(directory, "gpu1.json", ff.check("h100x8-healthy", "gpu1"))
    unreadable = ff.write(directory, "gpu2.json", ff.check("a100-ecc-errors", "gpu2"))
    if os.geteuid() == 0:  # root reads a file whatever its mode: cut it short instead
        unreadable.write_text(unreadable.read_text()[:100])
    else:
        unreadable.chmod(0)
    slurm = install(tmp_path, {"gpu1": ("IDLE", ""), "gpu2": ("IDLE", "")})
    code, out, err = run(cli, slurm, str(directory), "--execute")
    assert code == ExitCode.FAILED
    assert out.startswith("# gpu2: unreadable, not judged, not drained: ") and "1 to look at" in err
    assert slurm.updates() == []


@pytest.mark.slow
def test_execute_drains_and_resume_needs_newer_files(cli: Cli, tmp_path: Path, nodes: Path) -> None:
    slurm = install(tmp_path, {"gpu1": ("IDLE", ""), "gpu2": ("IDLE", ""), "gpu3": ("IDLE", "")})
    code, out, _ = run(cli, slurm, str(nodes), "--execute")
    assert code == 0, out
    drained = {n: (v["state"], v["reason"]) for n, v in slurm.nodes().items()}
    assert drained == {"gpu1": ("IDLE", ""), "gpu2": ("IDLE+DRAIN", ECC), "gpu3": ("IDLE+DRAIN", ECC)}
    assert run(cli, slurm, str(nodes), "--execute")[1].count("already drained") == 2  # steady: nothing re-drained
    assert len(slurm.updates()) == 2

    # gpu2 is repaired and checked again; gpu3's old file still says what it said.
    ff.write(nodes, "gpu2.json", ff.check("h100x8-healthy", "gpu2"))
    later = time.time() + 5  # Slurm's drain time has whole seconds: the new file is a later one
    os.utime(nodes / "gpu2.json", (later, later))
    code, out, _ = run(cli, slurm, str(nodes), "--execute", "--resume")
    assert code == 0 and f"resume gpu2: ready again (was: {ECC})" in out
    assert slurm.nodes()["gpu2"]["state"] == "IDLE" and slurm.nodes()["gpu3"]["reason"] == ECC


@pytest.mark.slow
def test_a_stale_ready_file_does_not_resume(cli: Cli, tmp_path: Path, nodes: Path) -> None:
    """A READY file from before the drain says nothing about the fault that drained the node."""
    ours = "gpudiag prolog: health.ecc GPU0: uncorrected ECC errors; reset"
    slurm = install(tmp_path, {"gpu1": ("IDLE+DRAIN", ours)}, since=time.strftime("%Y-%m-%dT%H:%M:%S"))
    os.utime(nodes / "gpu1.json", (time.time() - 600, time.time() - 600))
    code, out, _ = run(cli, slurm, str(nodes / "gpu1.json"), "--execute", "--resume")
    assert code == 0 and "is older than the drain" in out and slurm.updates() == []


@pytest.mark.slow
def test_only_job_scope_failures_leave_the_node_in_service(cli: Cli, tmp_path: Path) -> None:
    directory = tmp_path / "nodes"
    ff.write(directory, "gpu1.json", ff.check("h100x8-healthy", "gpu1"))
    doc = ff.check("misconfigured-node", "gpu2")  # env.visible_devices (job) and compute mode (node)
    doc["checks"] = [c for c in doc["checks"] if c["id"] != "config.compute_mode"]
    doc["checks"] = [c for c in doc["checks"] if c["id"] != "health.processes"]
    doc["summary"] = {s.lower(): sum(c["status"] == s for c in doc["checks"]) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    ff.write(directory, "gpu2.json", doc)
    slurm = install(tmp_path, {"gpu1": ("IDLE", ""), "gpu2": ("IDLE", "")})
    code, out, _ = run(cli, slurm, str(directory), "--execute")
    assert code == 0 and out == "# gpu2: left in service: job-scope failures only (env.visible_devices)\n"
    assert slurm.updates() == []


@pytest.mark.slow
def test_a_report_without_scopes_drains_conservatively(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    """A report from before scopes were recorded: every failure is taken as the node's."""
    data = json.loads(report_file.read_text())
    for node in data["nodes"]:
        for f in node["failures"]:
            for key in ("scope", "action", "uuid"):
                f.pop(key, None)
    old = ff.write(tmp_path, "old-report.json", data)
    slurm = install(tmp_path, {"gpu2": ("IDLE", ""), "gpu3": ("IDLE", "")})
    _, out, _ = run(cli, slurm, str(old))
    assert out.count("State=DRAIN") == 2
    assert "'Reason=gpudiag: health.ecc GPU0: uncorrected ECC errors (+3 more)'" in out


@pytest.mark.slow
def test_text_from_a_node_file_is_escaped(cli: Cli, tmp_path: Path) -> None:
    doc = ff.check("gpu-lost", "gpu2")
    for c in doc["checks"]:
        if c["status"] == "FAIL":
            c["finding"] = "bad\x1b[2J\nnews"
    directory = tmp_path / "nodes"
    ff.write(directory, "gpu2.json", doc)
    slurm = install(tmp_path, {"gpu2": ("IDLE", "")})
    code, out, _ = run(cli, slurm, str(directory), "--execute")
    assert code == 0 and "\x1b" not in out and out.count("\n") == 1
    assert slurm.nodes()["gpu2"]["reason"].startswith("gpudiag: nvml.gpu_lost GPU2: bad\\x1b[2J\\nnews")
    # A check id is data too: one that is not an id makes the file unreadable, never a reason.
    doc["checks"][0]["id"] = "health.ecc\x1b[2J"
    ff.write(directory, "gpu2.json", doc)
    code, out, _ = run(cli, slurm, str(directory))
    assert code == ExitCode.FAILED and out.startswith("# gpu2: unreadable") and "\x1b" not in out


@pytest.mark.slow
def test_a_failed_update_fails_the_command(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    slurm = install(tmp_path, {"gpu2": ("IDLE", ""), "gpu3": ("IDLE", "")}, fail_updates=True)
    code, _, err = run(cli, slurm, str(report_file), "--execute")
    assert code == ExitCode.FAILED and "drain gpu2 failed: slurm_update error: Invalid node name specified" in err


def test_without_scontrol(cli: Cli, tmp_path: Path, nodes: Path) -> None:
    """Slurm's view unread: the planned commands are comments, nothing that `| sh` would run, exit 1."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    code, out, err = cli("drain", str(nodes), env=env)
    assert code == ExitCode.FAILED and "scontrol not found on PATH" in err and "nothing here is fit to run" in err
    assert out.count("State=DRAIN") == 2 and all(line.startswith("# ") for line in out.splitlines())
    assert "# gpu2: not run, Slurm's view unread: scontrol update NodeName=gpu2 State=DRAIN" in out
    code, _, err = cli("drain", str(nodes), "--execute", env=env)
    assert code == ExitCode.FAILED and "scontrol not found" in err


@pytest.mark.slow
@pytest.mark.parametrize("execute", [False, True])
def test_when_slurms_view_cannot_be_read_nothing_is_fit_to_run(
    cli: Cli, tmp_path: Path, nodes: Path, execute: bool
) -> None:
    """`scontrol show node` failing (the controller unreachable): a reason someone set may be there,
    so no command is printed to run and none is run; the dry run piped to sh changes nothing."""
    slurm = install(tmp_path, {"gpu2": ("IDLE+DRAIN", "admin: new DIMMs"), "gpu3": ("IDLE", "")}, fail_show=True)
    code, out, err = run(cli, slurm, str(nodes), *(("--execute",) if execute else ()))
    assert code == ExitCode.FAILED, out + err
    assert "scontrol show node: slurm_load_node error: Unable to contact slurm controller" in err
    if not execute:
        assert out.count("State=DRAIN") == 2 and all(line.startswith("# ") for line in out.splitlines())
        subprocess.run(["sh", "-e"], input=out, text=True, check=True, env={**os.environ, "PATH": slurm.path})
    assert slurm.updates() == [] and slurm.nodes()["gpu2"]["reason"] == "admin: new DIMMs"


def test_a_file_that_is_not_a_report_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    bad = ff.write(tmp_path, "r.json", json.dumps({"schema": "gpudiag.report/1", "nodes": 3}))
    code, _, err = cli("drain", str(bad))
    assert code == ExitCode.USAGE and "not a `gpudiag report --json` output" in err
    assert cli("drain", str(tmp_path / "missing.json"))[0] == ExitCode.USAGE


@pytest.mark.slow
def test_the_drain_benchmark_runs() -> None:
    """benchmarks/bench_drain.py on a small fleet: its figures are reported, not asserted."""
    import sys

    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_drain.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--nodes", "60", "--runs", "1"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the target missed
    assert "gpudiag drain REPORT: median" in done.stdout and "2 lines" in done.stdout.split("REPORT:")[1].split("\n")[0]


def test_files_a_report_names_are_read_as_node_files_never_blocking(tmp_path: Path) -> None:
    """`verified_files` of a report --json are paths: a FIFO (or a device) there is no evidence, and
    reading it must not hang `drain --resume`."""
    import threading

    fifo = tmp_path / "gpu1.json"
    os.mkfifo(fifo)
    target = Target("gpu1", "ready", files=(str(fifo),), verified=(str(fifo),))
    now = {"gpu1": Current("IDLE+DRAIN", ECC, _local("2026-11-23T07:19:25"))}
    steps: list[Step] = []
    planning = threading.Thread(target=lambda: steps.extend(drain.plan([target], now, resume=True)), daemon=True)
    planning.start()
    planning.join(timeout=10)
    if planning.is_alive():  # blocked opening the FIFO: release it before failing
        with open(fifo, "wb"):
            pass
        planning.join(timeout=10)
        pytest.fail("drain --resume blocked on a FIFO named in the report")
    assert [(s.verb, s.note) for s in steps] == [
        (Verb.KEEP, "ready, left drained: cannot tell whether its files are newer than the drain")
    ]
    assert drain.newest(["/dev/zero"]) is None  # a device: never read (it has no end)


def test_a_report_from_a_pipe_is_read_and_a_device_never(cli: Cli, tmp_path: Path, report_file: Path) -> None:
    """`drain <(gpudiag report --json …)` reads the pipe; /dev/zero (no end) was read until memory ran
    out (exit 70), a terminal waited."""
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "drain", "/dev/stdin"],
        input=report_file.read_bytes(),
        capture_output=True,
        env={**os.environ, "PATH": "/nonexistent"},
        timeout=60,
    )
    assert b"State=DRAIN" in done.stdout, done.stderr
    code, out, err = cli("drain", "/dev/zero")
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == "gpudiag: /dev/zero: not a file nor a pipe: give a `gpudiag report --json` file or node files\n"
