"""gpudiag against a real Slurm (Debian's slurm-wlm 22.05 and munge): a single-node cluster started
here (tests/slurm_cluster.py), with 8 GPUs as GRES and replayed machines instead of GPUs.

What each test proves on the real slurmctld/slurmd: docs/slurm.md's srun recipe run line by line;
deploy/slurm/slurm-fleet-check.sh, then `gpudiag drain` (dry run through a shell, --execute, --resume)
with its rules; the Prolog draining for a node fault and cancelling the job, not the node, for a
job fault; the HealthCheckProgram draining and resuming on its own; NHC's check_gpudiag under the
real NHC (tests/nhc/, run by tests/nhc_harness.sh) with the real scontrol and sinfo.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpudiag.fleet.drain import parse_nodes
from gpudiag.replay import fixtures
from tests.slurm_cluster import ROOT, Cluster, needs_slurm, running, wait, write_settings

pytestmark = needs_slurm

HEALTHY = "h100x8-healthy"
MACHINES = Path(fixtures.__file__).resolve().parent.parent / "machines"
# The 8-GPU node with uncorrected ECC errors on GPU 3 (GPU-8e1f2a6c-…-2003).
ECC = "health.ecc GPU3 GPU-8e1f2a6c: uncorrected ECC errors; reset"


def broken_machine(root: Path) -> str:
    data = json.loads((MACHINES / f"{HEALTHY}.json").read_text())
    data["gpus"][3]["ecc_errors"] = {"volatile_uncorrected": 4, "aggregate_uncorrected": 4}
    path = root / "broken-h100x8.json"
    path.write_text(json.dumps(data))
    return str(path)


def job_env_machine(root: Path) -> str:
    """The healthy node, as a job whose CUDA_VISIBLE_DEVICES names no GPU sees it."""
    data = json.loads((MACHINES / f"{HEALTHY}.json").read_text())
    data["env"] = [["CUDA_VISIBLE_DEVICES", "-1"]]
    path = root / "job-env.json"
    path.write_text(json.dumps(data))
    return str(path)


def prolog(root: Path) -> str:
    """The example Prolog, installed as slurm.conf's Prolog, reading its settings file."""
    script = root / "etc" / "prolog.sh"
    script.write_text(
        f"#!/bin/sh\nGPUDIAG_PROLOG_CONF={root}/etc/gpudiag-prolog exec bash {ROOT}/deploy/slurm/slurm-prolog.sh\n"
    )
    script.chmod(0o755)
    return f"Prolog={script}\nPrologFlags=Alloc\n"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A plain cluster, for what does not involve the Prolog. With PrologFlags=Alloc, salloc polls
    for the Prolog's end every 3 s (Slurm's salloc POLL_SLEEP): 3 s more per allocation."""
    with running() as c:
        yield c


@pytest.fixture(scope="module")
def prolog_cluster() -> Iterator[Cluster]:
    with running(prolog) as c:
        c.settings("gpudiag-prolog", GPUDIAG=str(c.root / "bin" / "gpudiag"), GPUDIAG_REPLAY=HEALTHY)
        yield c


def job(cluster: Cluster, job_id: str) -> dict[str, str]:
    """JobState, Reason and AdminComment of `scontrol show job` (the comment is a line of its own)."""
    text = cluster.run("scontrol", "show", "job", job_id).stdout
    found = dict(re.findall(r"\b(JobState|Reason)=(\S+)", text))
    found.update(re.findall(r"^ *(AdminComment)=(.*?) ?$", text, re.M))
    return found


def since(cluster: Cluster) -> float | None:
    return parse_nodes(cluster.run("scontrol", "show", "node").stdout)[cluster.node].since


# --- docs/slurm.md's srun recipe and the fleet script ---------------------------------------------


def slurm_recipe() -> list[str]:
    text = (ROOT / "docs" / "slurm.md").read_text()
    block = text.split("<!-- tests/test_slurm.py runs this block", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_the_documented_recipe_line_by_line(cluster: Cluster) -> None:
    """Each line fed to a shell as typed: `salloc` starts a shell that reads the lines after it."""
    lines = slurm_recipe()
    assert lines[0] == "export NODES=128 GPUS_PER_NODE=8"  # the one line changed: this cluster has 1 node
    work = cluster.root / "recipe"
    work.mkdir()
    done = subprocess.run(
        ["bash"],
        input="\n".join(["export NODES=1 GPUS_PER_NODE=8", *lines[1:]]) + "\n",
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env={**cluster.env, "GPUDIAG_REPLAY": HEALTHY, "SHELL": "/bin/bash"},
    )
    node = cluster.node
    check = json.loads((work / "nodes" / f"{node}.json").read_text())
    assert (check["slurm_node"], check["verdict"], len(check["gpus"])) == (node, "READY", 8)
    assert (work / "nodes" / f"{node}.err").read_text() == ""
    # No CUDA here: bench-transfer refuses a replay, so the node's bench file is empty, and says so.
    assert "cannot run on a replay" in (work / "bench" / f"{node}.err").read_text()
    report = json.loads((work / "report.json").read_text())
    assert [(n["node"], n["state"], n["failures"]) for n in report["nodes"]] == [(node, "unreadable", [])]
    assert f"1 node(s) expected as {node}: 0 ready, 0 not ready, 1 unreadable, 0 missing" in done.stdout, done.stderr


def test_what_the_recipe_guards_against(cluster: Cluster) -> None:
    """Slurm's behaviour the recipe's lines answer: a step gets no GPU the allocation did not ask
    for; --output into a directory that does not exist writes nothing, and srun still exits 0."""
    gpus = "srun printenv CUDA_VISIBLE_DEVICES"
    with_gpus = cluster.run("salloc", "-N1", "--exclusive", "--gpus-per-node=8", "bash", "-c", gpus)
    assert with_gpus.stdout == "0,1,2,3,4,5,6,7\n", with_gpus.stderr
    without = cluster.run("salloc", "-N1", "--exclusive", "bash", "-c", gpus)
    assert without.stdout == ""
    lost = cluster.run("salloc", "-N1", "bash", "-c", "srun --output=no-such-dir/%N.json echo hi")
    assert lost.returncode == 0 and not (cluster.root / "no-such-dir").exists()


def test_the_fleet_script_then_drain_and_resume(cluster: Cluster) -> None:
    script = str(ROOT / "deploy" / "slurm" / "slurm-fleet-check.sh")
    broken = broken_machine(cluster.root)

    def fleet(out: str, machine: str, *gpus: str) -> subprocess.CompletedProcess[str]:
        return cluster.run(
            "salloc", "-N1", "--exclusive", *gpus, "bash", script, out, GPUDIAG_REPLAY=machine, GPUDIAG_FLEET_BENCH="0"
        )

    done = fleet("nogpus", HEALTHY)
    assert done.returncode == 2 and "how many GPUs per node?" in done.stderr
    done = fleet("before", HEALTHY, "--gpus-per-node=8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"1 node(s) expected as {cluster.node}: 1 ready, 0 not ready, 0 unreadable, 0 missing" in done.stdout
    assert (cluster.root / "before" / "report.xml").read_text().count("<testcase") == 1  # one per node
    done = fleet("broken", broken, "--gpus-per-node=8")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(rf"^  health\.ecc +node +1  {cluster.node} ", done.stdout, re.M), done.stdout
    report = str(cluster.root / "broken" / "report.json")

    # The dry run's lines, run by a shell, drain exactly as --execute would.
    dry = cluster.run("gpudiag", "drain", report)
    assert dry.returncode == 0 and dry.stdout.startswith(f"scontrol update NodeName={cluster.node} State=DRAIN")
    assert subprocess.run(["sh", "-e"], input=dry.stdout, text=True, env=cluster.env, timeout=30).returncode == 0
    state, reason = cluster.show()
    assert "DRAIN" in state and reason == f"gpudiag: {ECC}"
    drained_at = since(cluster)
    done = cluster.run("gpudiag", "drain", report, "--execute")  # steady: already drained for this fault
    assert done.returncode == 0 and done.stdout == f"# {cluster.node}: already drained: gpudiag: {ECC}\n"
    assert since(cluster) == drained_at

    # A READY report from before the drain says nothing about the fault: the node stays drained.
    done = cluster.run("gpudiag", "drain", str(cluster.root / "before" / "report.json"), "--execute", "--resume")
    assert done.returncode == 0 and "is older than the drain" in done.stdout and "DRAIN" in cluster.show()[0]
    assert drained_at is not None
    wait("a second past the drain (Slurm's time has whole seconds)", lambda: time.time() >= drained_at + 1)
    # A drained node takes no job: it is checked again outside Slurm (as pdsh or ssh would run it).
    after = cluster.root / "after"
    after.mkdir()
    check = cluster.run("gpudiag", "check", "--json", GPUDIAG_REPLAY=HEALTHY, SLURMD_NODENAME=cluster.node)
    (after / f"{cluster.node}.json").write_text(check.stdout)
    done = cluster.run("gpudiag", "drain", str(after), "--execute", "--resume")
    assert done.returncode == 0 and f"resume {cluster.node}: ready again" in done.stdout, done.stdout + done.stderr
    wait("gpudiag's drain to be undone", lambda: "DRAIN" not in cluster.show()[0])

    # Someone else's reason is never overwritten, nor resumed.
    cluster.drain("admin: new DIMMs")
    done = cluster.run("gpudiag", "drain", report, "--execute")
    assert "not drained: reason set by someone else: admin: new DIMMs" in done.stdout
    cluster.run("gpudiag", "drain", str(after), "--execute", "--resume")
    assert cluster.show()[1] == "admin: new DIMMs"
    cluster.resume()


def test_a_node_name_is_never_passed_as_syntax(cluster: Cluster) -> None:
    """A file naming its node `vm,vm` or `vm[1]`: Slurm would read a hostlist; drain never passes it."""
    nodes = cluster.root / "evil"
    nodes.mkdir()
    broken = json.loads(
        cluster.run("gpudiag", "--replay", broken_machine(cluster.root), "check", "--json", "--no-torch").stdout
    )
    for i, name in enumerate((f"{cluster.node},{cluster.node}", f"{cluster.node}[1]")):
        (nodes / f"n{i}.json").write_text(json.dumps({**broken, "slurm_node": name}))
    done = cluster.run("gpudiag", "drain", str(nodes), "--execute")
    # `report` finds each file unreadable for its name; drain names both and never acts on them.
    assert done.returncode == 1 and done.stdout.count("invalid node name") == 2 and "scontrol" not in done.stdout
    assert cluster.show() == ("IDLE", "")


# --- the Prolog -----------------------------------------------------------------------------------


def test_the_prolog_drains_for_a_node_fault_and_slurm_requeues_the_job(prolog_cluster: Cluster) -> None:
    prolog_cluster.wait_idle()
    done = prolog_cluster.run("srun", "-N1", "echo", "job ran")
    assert (done.returncode, done.stdout) == (0, "job ran\n"), done.stderr

    prolog_cluster.settings(
        "gpudiag-prolog",
        GPUDIAG=str(prolog_cluster.root / "bin" / "gpudiag"),
        GPUDIAG_REPLAY=broken_machine(prolog_cluster.root),
    )
    try:
        submitted = prolog_cluster.run(
            "sbatch", "--wrap", "echo job ran", "-o", str(prolog_cluster.root / "log" / "job.out")
        )
        job_id = submitted.stdout.split()[-1]
        wait("the node to be drained", lambda: "DRAIN" in prolog_cluster.show()[0], timeout=60)
        assert prolog_cluster.show()[1] == f"gpudiag prolog: {ECC}"
        wait("the job to be requeued and held", lambda: "held" in job(prolog_cluster, job_id).get("Reason", ""))
        assert job(prolog_cluster, job_id)["JobState"] == "PENDING"
        log = (prolog_cluster.root / "log" / "slurmd.log").read_text()
        assert f"gpudiag-prolog[{prolog_cluster.node}]: gpudiag: NOT READY: {ECC}" in log  # the line slurmd logs
    finally:
        prolog_cluster.settings(
            "gpudiag-prolog", GPUDIAG=str(prolog_cluster.root / "bin" / "gpudiag"), GPUDIAG_REPLAY=HEALTHY
        )
        prolog_cluster.run("scancel", "--full", "--user=root")
        prolog_cluster.resume()  # and waits for the node idle, the held job gone
    done = prolog_cluster.run("srun", "-N1", "echo", "job ran")
    assert done.stdout == "job ran\n", done.stderr


def test_the_prolog_cancels_a_job_whose_environment_fails_and_keeps_the_node(prolog_cluster: Cluster) -> None:
    gpudiag = str(prolog_cluster.root / "bin" / "gpudiag")
    prolog_cluster.settings("gpudiag-prolog", GPUDIAG=gpudiag, GPUDIAG_REPLAY=job_env_machine(prolog_cluster.root))
    prolog_cluster.wait_idle()
    try:
        submitted = prolog_cluster.run(
            "sbatch", "--wrap", "echo job ran", "-o", str(prolog_cluster.root / "log" / "env-job.out")
        )
        job_id = submitted.stdout.split()[-1]
        wait("the job to be cancelled", lambda: job(prolog_cluster, job_id).get("JobState") == "CANCELLED", timeout=60)
        comment = job(prolog_cluster, job_id)["AdminComment"]
        assert comment.startswith("gpudiag prolog: env.visible_devices: CUDA_VISIBLE_DEVICES='-1' leaves no device")
        assert comment.endswith("; fix job")
        assert prolog_cluster.show() == ("IDLE", "")  # the node was not drained for the job's fault
        assert not (prolog_cluster.root / "log" / "env-job.out").exists()  # the job never ran
        prolog_cluster.wait_idle()
        done = prolog_cluster.run("srun", "-N1", "echo", "job ran")  # interactive: Slurm's own words for a cancel
        assert done.returncode != 0 and "job ran" not in done.stdout and prolog_cluster.show() == ("IDLE", "")
    finally:
        prolog_cluster.settings("gpudiag-prolog", GPUDIAG=gpudiag, GPUDIAG_REPLAY=HEALTHY)
    prolog_cluster.wait_idle()  # the cancelled job cleaned up: a new allocation finds the node ready
    done = prolog_cluster.run("srun", "-N1", "echo", "next job ran")
    assert done.stdout == "next job ran\n", done.stderr


# --- NHC's check_gpudiag, under the real NHC (tests/nhc/), with the real scontrol and sinfo ------------


def test_nhc_check_gpudiag_drains_with_the_failing_check_and_resumes(cluster: Cluster) -> None:
    """NHC as documented: nhc.conf's lines from deploy/nhc/nhc-gpudiag.conf, GPUDIAG pointing at gpudiag
    where NHC's own PATH (/sbin:/usr/sbin:/bin:/usr/bin) does not reach; NHC drains and resumes."""
    confdir = cluster.root / "nhc"
    confdir.mkdir(exist_ok=True)
    conf = (ROOT / "deploy" / "nhc" / "nhc-gpudiag.conf").read_text().splitlines()
    lines = [line for line in conf if line.startswith("* ||")]
    gpudiag = str(cluster.root / "bin" / "gpudiag")
    documented = "".join(line.replace("/opt/gpudiag/bin/gpudiag", gpudiag) + "\n" for line in lines)
    (confdir / "nhc.conf").write_text(documented)

    def nhc(machine: str, **env: str) -> int:
        command = ["bash", str(ROOT / "tests" / "nhc_harness.sh"), str(confdir), cluster.node]
        return cluster.run(*command, GPUDIAG_REPLAY=machine, **env).returncode

    assert nhc(HEALTHY) == 0 and cluster.show() == ("IDLE", "")  # a healthy node stays up under NHC's PATH
    # Without the GPUDIAG line, check_gpudiag looks where pip and the docs install gpudiag (the old
    # check failed `gpudiag: command not found`, exit 127, and NHC drained the healthy node).
    (confdir / "nhc.conf").write_text("".join(line + "\n" for line in lines if "GPUDIAG=" not in line))
    assert nhc(HEALTHY, GPUDIAG_SEARCH=gpudiag) == 0 and cluster.show() == ("IDLE", "")
    assert nhc(HEALTHY, GPUDIAG_SEARCH="/nonexistent/gpudiag") == 1
    assert "gpudiag not found on the PATH NHC sets" in cluster.show()[1]
    assert nhc(HEALTHY, GPUDIAG_SEARCH=gpudiag) == 0
    wait("NHC's drain to be undone", lambda: cluster.show() == ("IDLE", ""))
    (confdir / "nhc.conf").write_text(documented)
    broken = broken_machine(cluster.root)
    assert nhc(broken) == 1
    assert cluster.show()[1] == f"NHC: check_gpudiag:  {ECC}" and "DRAIN" in cluster.show()[0]
    assert nhc(HEALTHY) == 0
    wait("NHC's drain to be undone", lambda: cluster.show() == ("IDLE", ""))
    cluster.drain("admin: new DIMMs")
    assert nhc(broken) == 1 and cluster.show()[1] == "admin: new DIMMs"
    assert nhc(HEALTHY) == 0 and cluster.show()[1] == "admin: new DIMMs"
    cluster.resume()


# --- HealthCheckProgram ---------------------------------------------------------------------------


def test_the_health_check_drains_and_resumes_on_its_own() -> None:
    """slurmd runs the example HealthCheckProgram every second here; it ignores the exit status,
    so the drain and the resume are the script's own."""

    def healthcheck(root: Path) -> str:
        script = root / "etc" / "healthcheck.sh"
        script.write_text(
            f"#!/bin/sh\nGPUDIAG_HEALTHCHECK_CONF={root}/etc/gpudiag-healthcheck "
            f"exec bash {ROOT}/deploy/slurm/slurm-healthcheck.sh\n"
        )
        script.chmod(0o755)
        settings(root, broken_machine(root))  # from the first run, at slurmd's start
        return f"HealthCheckProgram={script}\nHealthCheckInterval=1\n"

    def settings(root: Path, machine: str) -> None:
        # A health check runs with an empty environment: slurm.conf's path comes from the settings.
        write_settings(
            root,
            "gpudiag-healthcheck",
            GPUDIAG=str(root / "bin" / "gpudiag"),
            GPUDIAG_REPLAY=machine,
            SLURM_CONF=str(root / "etc" / "slurm.conf"),
        )

    with running(healthcheck) as cluster:

        def runs(n: int) -> None:
            """Wait until the health check has run gpudiag n more times."""
            start = cluster.gpudiag_calls()
            wait(f"{n} more health checks", lambda: cluster.gpudiag_calls() >= start + n, timeout=60)

        wait("the health check to drain", lambda: cluster.show()[1] == f"gpudiag health-check: {ECC}", timeout=60)
        assert "DRAIN" in cluster.show()[0]
        drained_at = since(cluster)
        runs(3)
        assert cluster.show()[1] == f"gpudiag health-check: {ECC}" and since(cluster) == drained_at  # steady

        settings(cluster.root, HEALTHY)
        wait("the health check to resume", lambda: cluster.show() == ("IDLE", ""), timeout=60)

        cluster.drain("admin: new DIMMs")
        settings(cluster.root, broken_machine(cluster.root))
        runs(3)
        assert cluster.show()[1] == "admin: new DIMMs"
        settings(cluster.root, HEALTHY)
        runs(3)
        assert cluster.show()[1] == "admin: new DIMMs" and "DRAIN" in cluster.show()[0]
