"""A real single-node Slurm cluster (munged + slurmctld + slurmd) in a temporary directory.

Everything lives under one directory (config, munge key and socket, state, spool, logs) on free
ports; every daemon started is stopped at the end, also when a test fails. The node has 8 GPUs
as Slurm's GRES (character devices made with mknod, so that Slurm sets CUDA_VISIBLE_DEVICES as on
a GPU node; nothing opens them), and gpudiag replays a machine (GPUDIAG_REPLAY), so no GPU is
needed. Needs root and Debian's slurm-wlm and munge (`.ci/run` installs them).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "sbatch", "scontrol", "sinfo", "scancel", "munge")
GPUS = 8

needs_slurm = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a test cluster's slurmd must run as root"),
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in (*DAEMONS, *CLIENTS)),
        reason="needs slurm-wlm and munge (apt-get install slurm-wlm munge)",
    ),
]


def wait(what: str, ready: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll ``ready()`` until true (no blind sleeps)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        if ready():
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
        """The node's State and Reason, read as `gpudiag drain` reads them."""
        from gpudiag.fleet.drain import parse_nodes

        current = parse_nodes(self.run("scontrol", "show", "node").stdout)[self.node]
        return current.state, current.reason

    def settings(self, name: str, **values: str) -> None:
        write_settings(self.root, name, **values)

    def drain(self, reason: str) -> None:
        done = self.run("scontrol", "update", f"NodeName={self.node}", "State=DRAIN", f"Reason={reason}")
        assert done.returncode == 0, done.stderr

    def resume(self) -> None:
        """Back to idle, whoever drained it (a test's clean-up)."""
        self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")
        self.wait_idle()

    def idle(self) -> bool:
        """The node is IDLE with no flag (COMPLETING, DRAIN, ...) and no reason, and Slurm knows of
        no job (pending, running or completing): the state a new job's allocation needs."""
        return self.show() == ("IDLE", "") and self.run("squeue", "-h", "-o", "%i %T").stdout.strip() == ""

    def wait_idle(self, timeout: float = 60) -> None:
        """Wait for :meth:`idle` (polling scontrol and squeue), not for a time: a job cancelled in its
        Prolog is still being cleaned up when srun returns, and a loaded machine takes longer."""
        wait("the node to be idle, with no job", self.idle, timeout=timeout)

    def gpudiag_calls(self) -> int:
        """How many times the installed gpudiag has run (each run appends a line)."""
        calls = self.root / "log" / "gpudiag.calls"
        return len(calls.read_text().splitlines()) if calls.exists() else 0


def write_settings(root: Path, name: str, **values: str) -> None:
    """A settings file the example scripts source (/etc/default/gpudiag-* on a real node)."""
    lines = [f"export {key}={shlex.quote(value)}" for key, value in values.items()]
    (root / "etc" / name).write_text("\n".join(lines) + "\n")


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _write_config(root: Path, node: str, extra: str) -> Path:
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
GresTypes=gpu
{extra}
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    devices = root / "dev"
    devices.mkdir()
    for i in range(GPUS):  # character devices (1:3, like /dev/null): what gres.conf's File= must name
        os.mknod(devices / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    gres = f"AutoDetect=off\nNodeName={node} Name=gpu File={devices}/nvidia[0-{GPUS - 1}]\n"
    (root / "etc" / "gres.conf").write_text(gres)
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
        wait("the daemons to stop", lambda: not any(alive(p) for p in pids), timeout=10)
    except AssertionError:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running(extra: Callable[[Path], str] = lambda root: "") -> Iterator[Cluster]:
    """A cluster, up and idle; ``extra(root)`` adds slurm.conf lines (a Prolog, a health check)."""
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
    conf = _write_config(root, node, extra(root))
    # gpudiag as installed on a node: this checkout's, with this interpreter; each run is counted.
    gpudiag = root / "bin" / "gpudiag"
    python = os.path.abspath(sys.executable)  # slurmd runs it elsewhere: never a relative path
    gpudiag.write_text(
        f'#!/bin/sh\necho "$*" >> {root}/log/gpudiag.calls\nPYTHONPATH={ROOT} exec {python} -m gpudiag "$@"\n'
    )
    gpudiag.chmod(0o755)
    env = {
        "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SLURM_CONF": str(conf),
        "HOME": str(root),
        "PYTHONPATH": str(ROOT),
    }
    cluster = Cluster(root, node, env)
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
        up = ("idle", "drained")  # a health check may drain it at once
        wait("the node to be up", lambda: cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() in up)
        print(f"\ncluster up in {time.monotonic() - started:.1f} s", file=sys.stderr)
        yield cluster
    finally:
        subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=10)
        pidfiles = {daemon: root / "run" / f"{daemon}.pid" for daemon in DAEMONS}
        if "HealthCheckProgram=" in conf.read_text():
            # slurmd first, alone: it waits for the health check it is running, whose scontrol
            # calls would wait out their 10 s timeout for a slurmctld stopped with it. (Without a
            # health check, stopping them together is 2 s quicker.)
            _stop([pidfiles.pop("slurmd")])
        _stop(list(pidfiles.values()))
        shutil.rmtree(root, ignore_errors=True)
