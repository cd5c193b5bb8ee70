"""What `gpudiag top` asks the live host about a GPU process (owner, parent, environment), and the one
place it sends a signal. A replay's PIDs are not this host's: :class:`ReplayedHost` knows nothing
of them and refuses every signal."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpudiag.api import Sample

# What a process's detail shows of its environment: what decides which GPUs it sees and how it uses them.
CUDA_ENV_PREFIXES = ("CUDA_", "NCCL_", "PYTORCH_", "TORCH_", "NVIDIA_", "CUBLAS_", "CUDNN_", "TF_", "XLA_")
CUDA_ENV_NAMES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
SIGNALS: dict[str, signal.Signals] = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT}


def cuda_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that bear on CUDA, NCCL and torch, by name."""
    return {k: v for k, v in sorted(environ.items()) if k.startswith(CUDA_ENV_PREFIXES) or k in CUDA_ENV_NAMES}


def may_signal(owner_uid: int | None, my_uid: int) -> str:
    """ "" when a process owned by ``owner_uid`` may be signalled by ``my_uid``, else why not: root
    may signal any process, a user only their own (the kernel's rule, said before it is tried)."""
    if my_uid == 0:
        return ""
    if owner_uid is None:
        return "its owner cannot be read"
    if owner_uid != my_uid:
        return "it belongs to another user (only root may signal it)"
    return ""


class LiveHost:
    """This host's processes, through psutil (a parent and an owner read once per PID)."""

    live = True

    def __init__(self) -> None:
        self._parents: dict[int, int | None] = {}
        self._environ: dict[int, dict[str, str] | None] = {}

    def parent(self, pid: int) -> int | None:
        if pid not in self._parents:
            import psutil

            try:
                self._parents[pid] = psutil.Process(pid).ppid() or None
            except psutil.Error:
                self._parents[pid] = None
        return self._parents[pid]

    def parents(self, pids: list[int]) -> dict[int, int | None]:
        """PID → parent PID, up each chain (a launcher above its ranks), as far as the host says."""
        out: dict[int, int | None] = {}
        todo = list(pids)
        while todo:
            pid = todo.pop()
            if pid in out or len(out) > 4096:
                continue
            up = self.parent(pid)
            out[pid] = up
            if up is not None and up > 1:
                todo.append(up)
        return out

    def environ(self, pid: int) -> dict[str, str] | None:
        """The process's environment (None: not readable: another user's, or gone)."""
        if pid not in self._environ:
            import psutil

            try:
                self._environ[pid] = dict(psutil.Process(pid).environ())
            except (psutil.Error, OSError):
                self._environ[pid] = None
        return self._environ[pid]

    def forget(self, alive: set[int]) -> None:
        """Drop what is kept of PIDs that are gone (a PID may be reused)."""
        for kept in (self._parents, self._environ):
            for pid in [p for p in kept if p not in alive]:
                del kept[pid]

    def why_not(self, pid: int) -> str:
        """ "" when this user may signal ``pid``, else why not."""
        import psutil

        try:
            owner = psutil.Process(pid).uids().real
        except psutil.NoSuchProcess:
            return "it has exited"
        except psutil.Error:
            owner = None
        return may_signal(owner, os.geteuid())

    def started(self, pid: int) -> float | None:
        """When the process started (psutil's create time): with the PID, which process it is."""
        import psutil

        try:
            return float(psutil.Process(pid).create_time())
        except psutil.Error:
            return None

    def send(self, pid: int, name: str, started: float | None = None) -> str:
        """Send SIGTERM, SIGKILL or SIGINT (``name``: TERM, KILL, INT) to ``pid``, if it is still the
        process that started at ``started`` (the one the user confirmed); returns what happened, one line."""
        refused = self.why_not(pid)
        if refused:
            return f"PID {pid} not signalled: {refused}"
        if started is not None and self.started(pid) != started:
            return f"PID {pid} not signalled: it is another process now (the one asked about has exited)"
        try:
            os.kill(pid, SIGNALS[name])
        except ProcessLookupError:
            return f"PID {pid} not signalled: it has exited"
        except PermissionError:
            return f"PID {pid} not signalled: permission denied"
        return f"SIG{name} sent to PID {pid}"


class ReplayedHost:
    """A replay: its processes ran elsewhere, so none of them is asked about or signalled."""

    live = False

    def parents(self, pids: list[int]) -> dict[int, int | None]:
        return {}

    def environ(self, pid: int) -> dict[str, str] | None:
        return None

    def forget(self, alive: set[int]) -> None:
        return None

    def why_not(self, pid: int) -> str:
        return "this is a replay: its processes are not on this machine"

    def started(self, pid: int) -> float | None:
        return None

    def send(self, pid: int, name: str, started: float | None = None) -> str:
        return f"PID {pid} not signalled: {self.why_not(pid)}"


def cuda_names(host: LiveHost | ReplayedHost) -> Callable[[Sample, int, int], str]:
    """``name(sample, gpu, pid)``: "cuda:N", the GPU as the process calls it under its own
    CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER (read from its environment, CUDA's rules applied by
    gpudiag.visibility); "" where the environment cannot be read or hides that GPU."""
    resolved: dict[tuple[str | None, str | None, int], dict[int, int]] = {}

    def name(sample: Sample, gpu: int, pid: int) -> str:
        environ = host.environ(pid)
        if environ is None:
            return ""
        key = (environ.get("CUDA_VISIBLE_DEVICES"), environ.get("CUDA_DEVICE_ORDER"), id(sample.machine.gpus))
        if key not in resolved:
            from gpudiag.visibility.rules import resolve

            if len(resolved) > 256:
                resolved.clear()
            devices = resolve(sample.machine, key[0], key[1]).devices
            resolved[key] = {d.gpu_index: d.ordinal for d in devices if d.mig is None}
        ordinal = resolved[key].get(gpu)
        return "" if ordinal is None else f"cuda:{ordinal}"

    return name
