"""torch build facts from its files, never by importing torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.model import Reason
from gpudiag.probe.torch_static import read_version_file


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "version.py").write_text(text)
    return tmp_path


def test_cuda_build(tmp_path: Path) -> None:
    d = write(
        tmp_path,
        "from typing import Optional\n__version__ = '2.5.1+cu124'\ndebug = False\n"
        "cuda: Optional[str] = '12.4'\ngit_version = 'abc'\nhip: Optional[str] = None\n",
    )
    build = read_version_file(d).value
    assert build is not None and (build.version, build.cuda, build.hip) == ("2.5.1+cu124", "12.4", None)


def test_cpu_and_rocm_builds(tmp_path: Path) -> None:
    cpu = read_version_file(write(tmp_path, "__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")).value
    assert cpu is not None and cpu.cuda is None
    rocm = read_version_file(write(tmp_path, "__version__ = '2.4.0+rocm6.1'\ncuda = None\nhip = '6.1.40091'\n")).value
    assert rocm is not None and rocm.hip == "6.1.40091"


def test_garbage_and_missing_files(tmp_path: Path) -> None:
    assert read_version_file(write(tmp_path, "this is not python(")).reason is Reason.UNKNOWN_ERROR
    assert read_version_file(write(tmp_path, "cuda = '12.1'\n")).reason is Reason.UNKNOWN_ERROR
    assert read_version_file(tmp_path / "nowhere").reason is Reason.UNKNOWN_ERROR


def test_installed_cpu_torch_is_read_without_importing_it() -> None:
    pytest.importorskip("torch")  # find_spec only; the check below runs in a fresh interpreter
    code = (
        "import sys\n"
        "from gpudiag.probe.torch_static import torch_build\n"
        "b = torch_build().value\n"
        "print(b.version, b.cuda, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    version, cuda, imported = out
    assert imported == "False"
    if "+cpu" in version:  # the CPU wheel CI installs
        assert cuda == "None"
