"""gpudiag against a real Slurm: a single-node cluster (munged + slurmctld + slurmd) on this machine.

Everything lives in a temporary directory (config, munge key and socket, state, spool, logs) on
free ports; every daemon started here is stopped at the end, also when a test fails. Needs root
and Debian's slurm-wlm and munge (`.ci/run` installs them); skipped otherwise. The machines are
replayed (GPUDIAG_REPLAY), so no GPU is needed: a healthy one and one with ECC errors.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "scontrol", "sinfo", "scancel", "munge")
BROKEN = "a100-ecc-errors"
HEALTHY = "h100x8-healthy"

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(os.geteuid() != 0, reason="a test cluster's slurmd must run as root"),
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in (*DAEMONS, *CLIENTS)),
        reason="needs slurm-wlm and munge (apt-get install slurm-wlm munge)",
    ),
]


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait(what: str, ready: object, timeout: float = 30.0) -> None:
    """Poll ``ready()`` until true (no blind sleeps)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Cluster:
    root: Path
    node: str
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, env={**self.env, **env}, cwd=self.root
        )

    def show(self) -> tuple[str, str]:
        """The node's State and Reason."""
        from gpudiag.fleet.drain import parse_show_node

        current = parse_show_node(self.run("scontrol", "show", "node", self.node).stdout)
        assert current is not None
        return current.state, current.reason

    def prolog_machine(self, machine: str) -> None:
        """What the installed Prolog replays (its settings file, as an admin would write it)."""
        (self.root / "etc" / "gpudiag-prolog").write_text(
            f"GPUDIAG={self.root / 'bin' / 'gpudiag'}\nexport GPUDIAG_REPLAY={machine}\n"
        )

    def resume(self) -> None:
        self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")
        _wait("the node to be idle", lambda: self.show()[0].split("+")[0] == "IDLE" and "DRAIN" not in self.show()[0])


def _write_config(root: Path, node: str) -> Path:
    ctld_port, slurmd_port = _free_ports(2)
    conf = root / "etc" / "slurm.conf"
    conf.write_text(
        f"""\
ClusterName=gpudiagtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/run/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
Prolog={root}/etc/prolog.sh
PrologFlags=Alloc
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    return conf


def _stop(pidfiles: list[Path]) -> None:
    """SIGTERM every daemon at once, wait for all, SIGKILL what is left after 10 s."""
    pids = []
    for pidfile in pidfiles:
        try:
            pids.append(int(pidfile.read_text().strip()))
        except (OSError, ValueError):
            continue
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    try:
        _wait("the daemons to stop", lambda: not any(alive(p) for p in pids), timeout=10)
    except AssertionError:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="gpudiag-slurm-"))
    root.chmod(0o755)  # munged insists that its socket's directories are searchable by all
    for sub, mode in (("etc", 0o700), ("run", 0o755), ("state", 0o700), ("spool", 0o755), ("log", 0o755)):
        (root / sub).mkdir(mode=mode)
        (root / sub).chmod(mode)
    (root / "bin").mkdir()
    node = socket.gethostname().split(".")[0]
    key = root / "etc" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = _write_config(root, node)
    # gpudiag as installed on a node: this checkout's, with this interpreter.
    gpudiag = root / "bin" / "gpudiag"
    python = os.path.abspath(sys.executable)  # slurmd runs it elsewhere: never a relative path
    gpudiag.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {python} -m gpudiag "$@"\n')
    gpudiag.chmod(0o755)
    # The example Prolog, installed as slurm.conf's Prolog, reading its settings file.
    prolog = root / "etc" / "prolog.sh"
    prolog.write_text(
        f"#!/bin/sh\nGPUDIAG_PROLOG_CONF={root}/etc/gpudiag-prolog exec bash {ROOT}/examples/slurm-prolog.sh\n"
    )
    prolog.chmod(0o755)
    env = {
        "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SLURM_CONF": str(conf),
        "HOME": str(root),
        "PYTHONPATH": str(ROOT),
    }
    result = Cluster(root, node, env)
    result.prolog_machine(HEALTHY)
    try:
        munged = [
            "munged",
            f"--key-file={key}",
            f"--socket={root}/run/munge.socket",
            f"--pid-file={root}/run/munged.pid",
            f"--log-file={root}/log/munged.log",
            f"--seed-file={root}/state/munged.seed",
        ]
        for command in (munged, ["slurmctld", "-f", str(conf)], ["slurmd", "-f", str(conf)]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
            assert done.returncode == 0, f"{command[0]}: {done.stderr}"
        _wait("the node to be idle", lambda: result.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle")
        print(f"\ncluster up in {time.monotonic() - started:.1f} s", file=sys.stderr)
        yield result
    finally:
        subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=10)
        _stop([root / "run" / f"{daemon}.pid" for daemon in DAEMONS])
        shutil.rmtree(root, ignore_errors=True)


def test_the_srun_recipe_and_the_report(cluster: Cluster) -> None:
    """examples/slurm-fleet-check.sh in an allocation: check on every node, then `report`."""
    script = str(ROOT / "examples" / "slurm-fleet-check.sh")
    done = cluster.run("salloc", "-N1", "bash", script, "healthy", GPUDIAG_REPLAY=HEALTHY, GPUDIAG_FLEET_BENCH="0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"1 node(s) expected as {cluster.node}: 1 ready, 0 not ready, 0 unreadable, 0 missing" in done.stdout
    report = json.loads((cluster.root / "healthy" / "report.json").read_text())
    (node,) = report["nodes"]
    assert (node["node"], node["state"], node["gpu_count"]) == (cluster.node, "ready", 8)
    assert (cluster.root / "healthy" / "report.xml").read_text().count("<testcase") > 20

    done = cluster.run("salloc", "-N1", "bash", script, "broken", GPUDIAG_REPLAY=BROKEN, GPUDIAG_FLEET_BENCH="0")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"health.ecc                  1  {cluster.node}" in done.stdout

    # The README's drain step, for real: drains with gpudiag's reason, then --resume undoes only that.
    broken_report = str(cluster.root / "broken" / "report.json")
    done = cluster.run("gpudiag", "drain", broken_report, "--execute")
    assert done.returncode == 0, done.stderr
    state, reason = cluster.show()
    assert "DRAIN" in state
    assert reason.startswith("gpudiag: health.ecc,health.row_remap") and reason.endswith("GPU reset needed")
    healthy_report = str(cluster.root / "healthy" / "report.json")
    assert cluster.run("gpudiag", "drain", healthy_report, "--execute", "--resume").returncode == 0
    _wait("gpudiag's drain to be undone", lambda: "DRAIN" not in cluster.show()[0])

    # Someone else's reason is never overwritten.
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=admin: new DIMMs")
    done = cluster.run("gpudiag", "drain", broken_report, "--execute")
    assert "not drained: reason set by someone else: admin: new DIMMs" in done.stdout
    assert cluster.show()[1] == "admin: new DIMMs"
    cluster.run("gpudiag", "drain", healthy_report, "--execute", "--resume")
    assert cluster.show()[1] == "admin: new DIMMs"  # --resume leaves it drained too
    cluster.resume()


def test_the_prolog_drains_a_broken_node_and_lets_a_healthy_one_run(cluster: Cluster) -> None:
    cluster.prolog_machine(HEALTHY)
    done = cluster.run("srun", "-N1", "echo", "job ran")
    assert (done.returncode, done.stdout) == (0, "job ran\n"), done.stderr

    cluster.prolog_machine(BROKEN)
    try:
        done = cluster.run("srun", "-N1", "--immediate=20", "echo", "job ran")
        assert done.returncode != 0 and "job ran" not in done.stdout
        assert "Prolog failure" in done.stderr or "prolog" in done.stderr.lower(), done.stderr
        state, reason = cluster.show()
        assert "DRAIN" in state
        assert reason == (
            "gpudiag: health.ecc,health.row_remap,health.recovery_action,health.clock_events; GPU reset needed"
        )
        log = (cluster.root / "log" / "slurmd.log").read_text()
        assert f"gpudiag-prolog[{cluster.node}]: gpudiag: NOT READY: health.ecc" in log  # the line slurmd logs
    finally:
        cluster.prolog_machine(HEALTHY)
        subprocess.run(["scancel", "--full", "--user=root"], env=cluster.env, capture_output=True, timeout=10)
        cluster.resume()
    done = cluster.run("srun", "-N1", "echo", "job ran")
    assert done.stdout == "job ran\n", done.stderr
