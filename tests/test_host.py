"""psutil host resolution, container detection, and the kernel module version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gpudiag.model import HostState, Reason
from gpudiag.probe.host import PsutilHost, detect_container, kernel_module_version


def test_own_process_is_found_with_owner_and_command() -> None:
    info = PsutilHost(in_container=False)(os.getpid())
    assert info.state is HostState.FOUND
    assert info.user.value == psutil.Process().username()
    assert info.command.value is not None and "python" in info.command.value.lower()


def test_exited_process_is_vanished_outside_a_container() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    info = PsutilHost(in_container=False)(child.pid)
    assert info.state is HostState.VANISHED
    assert info.command.reason is Reason.NOT_FOUND


def test_in_a_container_a_missing_pid_is_a_host_pid() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert PsutilHost(in_container=True)(child.pid).state is HostState.OTHER_NAMESPACE


def test_in_a_container_a_pid_without_gpu_files_is_someone_else() -> None:
    # Our own process exists here but holds no /dev/nvidia* file: NVML could not have meant it.
    assert PsutilHost(in_container=True)(os.getpid()).state is HostState.OTHER_NAMESPACE


def test_container_markers(tmp_path: Path) -> None:
    assert detect_container(tmp_path) == (False, "")
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "cgroup").write_text("0::/kubepods/besteffort/pod1234/abcd\n")
    assert detect_container(tmp_path) == (True, "/proc/1/cgroup mentions kubepods")
    (tmp_path / ".dockerenv").touch()
    assert detect_container(tmp_path) == (True, "/.dockerenv exists")


def test_kubernetes_environment_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert detect_container(tmp_path)[0] is True


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
    assert kernel_module_version(tmp_path / "missing").reason is Reason.NOT_FOUND
    garbage = tmp_path / "garbage"
    garbage.write_text("hello\n")
    assert kernel_module_version(garbage).reason is Reason.UNKNOWN_ERROR
