"""psutil host resolution, container detection, and the kernel module version.

Resolution runs against real processes (this one, a child, an exited child); only the
cases a root test runner cannot produce (access denied, a uid without a name) patch psutil.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpudiag.model import HostState, Reason
from gpudiag.probe import host as host_mod
from gpudiag.probe.host import PsutilHost, detect_container, host_info, kernel_module_version


def exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A child process that keeps a file open, and the path of that file."""
    held = tmp_path / "nvidia0"
    held.write_text("")
    code = f"import sys, time\nf = open({str(held)!r})\nprint('ready', flush=True)\ntime.sleep(60)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    try:
        yield child.pid, held
    finally:
        child.kill()
        child.wait()


def test_own_process_is_found_with_owner_name_and_command() -> None:
    info = PsutilHost(in_container=False)(os.getpid())
    assert info.state is HostState.FOUND
    assert info.user.value == psutil.Process().username()
    assert info.name.value == psutil.Process().name()
    assert info.command.value is not None and "python" in info.command.value.lower()


def test_exited_process_is_vanished_outside_a_container() -> None:
    info = PsutilHost(in_container=False)(exited_pid())
    assert info.state is HostState.VANISHED
    assert info.command.reason is Reason.NOT_FOUND
    assert info.user.reason is Reason.NOT_FOUND


def test_in_a_container_a_missing_pid_is_a_host_pid() -> None:
    info = PsutilHost(in_container=True)(exited_pid())
    assert info.state is HostState.OTHER_NAMESPACE
    assert "--pid=host" in info.command.detail


def test_in_a_container_a_pid_without_gpu_files_is_someone_else() -> None:
    # Our own process exists here but holds no /dev/nvidia* file: NVML could not have meant it.
    assert PsutilHost(in_container=True)(os.getpid()).state is HostState.OTHER_NAMESPACE


def test_in_a_container_a_pid_holding_a_gpu_file_is_ours(
    holder: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, held = holder
    monkeypatch.setattr(host_mod, "_NVIDIA_DEVICE_PREFIX", str(held.parent / "nvidia"))
    info = PsutilHost(in_container=True)(pid)
    assert info.state is HostState.FOUND
    assert info.command.value is not None and "time.sleep" in info.command.value


def test_device_nodes_are_found_through_proc_fd(monkeypatch: pytest.MonkeyPatch) -> None:
    """psutil's open_files() lists regular files only; /dev/nvidia0 is a character device."""
    code = "import time\nf = open('/dev/null')\nprint('ready', flush=True)\ntime.sleep(60)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        monkeypatch.setattr(host_mod, "_NVIDIA_DEVICE_PREFIX", "/dev/null")
        assert not any(f.path == "/dev/null" for f in psutil.Process(child.pid).open_files())
        assert PsutilHost(in_container=True)(child.pid).state is HostState.FOUND
    finally:
        child.kill()
        child.wait()


def test_a_process_we_may_not_inspect_is_no_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(pid: int) -> psutil.Process:
        raise psutil.AccessDenied(pid)

    monkeypatch.setattr(psutil, "Process", denied)
    info = PsutilHost(in_container=False)(1)
    assert info.state is HostState.NO_PERMISSION
    assert {info.user.reason, info.name.reason, info.command.reason} == {Reason.NO_PERMISSION}


def test_hidden_owner_and_command_make_the_process_no_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc mounted hidepid=2: the PID exists, its name is known, the rest is denied."""

    def deny(self: psutil.Process) -> str:
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "username", deny)
    monkeypatch.setattr(psutil.Process, "cmdline", deny)
    info = PsutilHost(in_container=False)(os.getpid())
    assert info.state is HostState.NO_PERMISSION
    assert info.name.ok and info.user.reason is Reason.NO_PERMISSION


def test_a_uid_without_a_user_name_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    def nameless(self: psutil.Process) -> str:
        raise KeyError("getpwuid(): uid not found: 1001")

    monkeypatch.setattr(psutil.Process, "username", nameless)
    info = PsutilHost(in_container=False)(os.getpid())
    assert info.state is HostState.FOUND
    assert info.user.reason is Reason.NOT_FOUND and "user name" in info.user.detail


def test_container_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert detect_container(tmp_path) == (False, "")
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/init.scope\n")
    assert detect_container(tmp_path) == (False, "")
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/kubepods/besteffort/pod1234/abcd\n")
    assert detect_container(tmp_path) == (True, "/proc/1/cgroup mentions kubepods")
    (tmp_path / ".dockerenv").touch()
    assert detect_container(tmp_path) == (True, "/.dockerenv exists")


def test_podman_marker(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".containerenv").touch()
    assert detect_container(tmp_path) == (True, "/run/.containerenv exists")


def test_kubernetes_environment_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert detect_container(tmp_path) == (True, "KUBERNETES_SERVICE_HOST is set")


def test_host_info_describes_this_interpreter() -> None:
    info = host_info()
    assert info.python == platform.python_version()
    assert info.hostname and info.os.startswith(platform.system())
    assert info.in_container is (info.container_hint != "")


def test_kernel_module_version_parsing(tmp_path: Path) -> None:
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    assert kernel_module_version(version).value == "550.54.15"
    open_kernel = tmp_path / "open"
    open_kernel.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build\n")
    assert kernel_module_version(open_kernel).value == "560.35.03"
    arm = tmp_path / "arm"
    arm.write_text("NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.129.03  Thu Oct 19 18:42:52 UTC 2023\n")
    assert kernel_module_version(arm).value == "535.129.03"


def test_kernel_module_version_when_absent_or_unreadable(tmp_path: Path) -> None:
    missing = kernel_module_version(tmp_path / "missing")
    assert missing.reason is Reason.NOT_FOUND and "no NVIDIA kernel module" in missing.detail
    empty = tmp_path / "empty"
    empty.write_text("")
    assert kernel_module_version(empty).reason is Reason.NOT_FOUND
    garbage = tmp_path / "garbage"
    garbage.write_text("hello\n")
    assert kernel_module_version(garbage).reason is Reason.UNKNOWN_ERROR


def test_a_vanishing_child_is_reported_as_it_is_now() -> None:
    """The same PID read twice: found while it runs, vanished once it has exited."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert PsutilHost(in_container=False)(child.pid).state is HostState.FOUND
    finally:
        child.kill()
        child.wait()  # reaped: the PID no longer exists
    assert PsutilHost(in_container=False)(child.pid).state is HostState.VANISHED
