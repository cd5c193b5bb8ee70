"""Host facts from psutil and /proc: who owns a GPU process, and where we are running."""

from __future__ import annotations

import os
import platform
import sys
from typing import TYPE_CHECKING

from gpudiag.model import HostInfo, HostProcess, HostState, Reading, Reason

if TYPE_CHECKING:
    from os import PathLike

# Read with os.path, no pathlib nor socket: every live command reads these before its first NVML call.
_CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")
_CGROUP_HINTS = ("docker", "kubepods", "containerd", "libpod", "lxc")


def detect_container(root: str | PathLike[str] = "/") -> tuple[bool, str]:
    """Best-effort: are we in a container, whose PID namespace differs from the host's?"""
    for marker in _CONTAINER_MARKERS:
        if os.path.exists(os.path.join(root, marker.lstrip("/"))):
            return True, f"{marker} exists"
    try:
        with open(os.path.join(root, "proc/1/cgroup"), errors="replace") as file:
            cgroup = file.read()
    except OSError:
        cgroup = ""
    for hint in _CGROUP_HINTS:
        if hint in cgroup:
            return True, f"/proc/1/cgroup mentions {hint}"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True, "KUBERNETES_SERVICE_HOST is set"
    return False, ""


def host_info() -> HostInfo:
    in_container, hint = detect_container()
    return HostInfo(
        hostname=os.uname().nodename,  # what gethostname(2) answers
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        in_container=in_container,
        container_hint=hint,
    )


def kernel_module_version(path: str | PathLike[str] = "/proc/driver/nvidia/version") -> Reading[str]:
    """The loaded kernel module's version: compared with NVML's to explain a mismatch."""
    try:
        with open(path, errors="replace") as file:
            first = file.read().splitlines()[0]
    except (OSError, IndexError):
        return Reading.missing(Reason.NOT_FOUND, f"{path} not readable: no NVIDIA kernel module loaded")
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
    for word in first.split():
        if word[:1].isdigit() and "." in word:
            return Reading.of(word)
    return Reading.missing(Reason.UNKNOWN_ERROR, f"unrecognised {path}: {first.strip()}")


_NVIDIA_DEVICE_PREFIX = "/dev/nvidia"


class PsutilHost:
    """Resolves NVML's PIDs to owner, name and command line through psutil."""

    def __init__(self, in_container: bool) -> None:
        self.in_container = in_container

    def __call__(self, pid: int) -> HostProcess:
        import psutil  # imported here: only commands that show processes pay for it

        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                name = Reading.of(proc.name())
                user = _guard(proc.username)
                command = _guard(lambda: " ".join(proc.cmdline()) or f"[{proc.name()}]")
                if self.in_container and not _holds_nvidia_device(proc):
                    # The PID exists here but is another process: NVML gave a host PID.
                    return _other_namespace()
        except psutil.NoSuchProcess:
            if self.in_container:
                return _other_namespace()
            missing: Reading[str] = Reading.missing(Reason.NOT_FOUND, "process exited")
            return HostProcess(HostState.VANISHED, missing, missing, missing)
        except psutil.AccessDenied:
            denied: Reading[str] = Reading.missing(Reason.NO_PERMISSION, "not allowed to inspect this process")
            return HostProcess(HostState.NO_PERMISSION, denied, denied, denied)
        state = HostState.NO_PERMISSION if not command.ok and not user.ok else HostState.FOUND
        return HostProcess(state, user, name, command)


def _guard(read: object) -> Reading[str]:
    import psutil

    try:
        return Reading.of(str(read()))  # type: ignore[operator]
    except psutil.AccessDenied:
        return Reading.missing(Reason.NO_PERMISSION, "not allowed to inspect this process")
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return Reading.missing(Reason.NOT_FOUND, "process exited")
    except KeyError:  # uid without a passwd entry (common in containers)
        return Reading.missing(Reason.NOT_FOUND, "uid has no user name")


def _holds_nvidia_device(proc: object) -> bool:
    """True when the process has a /dev/nvidia* file open, or when we cannot tell."""
    import psutil

    try:
        files = proc.open_files()  # type: ignore[attr-defined]
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return True  # cannot tell: do not accuse the PID of being foreign
    if any(f.path.startswith(_NVIDIA_DEVICE_PREFIX) for f in files):
        return True
    # open_files() lists regular files only; device nodes need a look at /proc/PID/fd.
    try:
        directory = f"/proc/{proc.pid}/fd"  # type: ignore[attr-defined]
        fds = [os.path.join(directory, name) for name in os.listdir(directory)]
    except OSError:
        return True
    for fd in fds:
        try:
            if os.readlink(fd).startswith(_NVIDIA_DEVICE_PREFIX):
                return True
        except OSError:
            continue  # closed meanwhile
    return False


def _other_namespace() -> HostProcess:
    detail = "PID from the host's PID namespace; not visible in this container (run with --pid=host)"
    missing: Reading[str] = Reading.missing(Reason.NOT_FOUND, detail)
    return HostProcess(HostState.OTHER_NAMESPACE, missing, missing, missing)


def python_version() -> str:
    return sys.version.split()[0]
