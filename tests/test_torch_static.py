"""torch build facts from its files, never by importing torch (which costs a second or more)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.model import Reason
from gpudiag.probe.torch_static import read_version_file, torch_build


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "version.py").write_text(text)
    return tmp_path


def test_cuda_build(tmp_path: Path) -> None:
    d = write(
        tmp_path,
        "from typing import Optional\n__all__ = ['__version__', 'cuda']\n__version__ = '2.5.1+cu124'\n"
        "debug = False\ncuda: Optional[str] = '12.4'\ngit_version = 'abc'\nhip: Optional[str] = None\n",
    )
    build = read_version_file(d).value
    assert build is not None
    assert (build.version, build.cuda, build.hip, build.location) == ("2.5.1+cu124", "12.4", None, str(d))


def test_cpu_build_has_no_cuda(tmp_path: Path) -> None:
    cpu = read_version_file(write(tmp_path, "__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")).value
    assert cpu is not None and (cpu.version, cpu.cuda, cpu.hip) == ("2.13.0+cpu", None, None)


def test_rocm_build_names_hip(tmp_path: Path) -> None:
    rocm = read_version_file(write(tmp_path, "__version__ = '2.4.0+rocm6.1'\ncuda = None\nhip = '6.1.40091'\n")).value
    assert rocm is not None and (rocm.cuda, rocm.hip) == (None, "6.1.40091")


def test_values_that_are_not_literals_are_ignored_not_executed(tmp_path: Path) -> None:
    d = write(tmp_path, "import os\n__version__ = '2.1.0'\ncuda = os.environ['NOPE']\nhip = None\n")
    build = read_version_file(d).value
    assert build is not None and build.cuda is None


@pytest.mark.parametrize(
    "text",
    ["this is not python(", "cuda = '12.1'\n", "__version__ = 2.1\n", ""],
    ids=["syntax error", "no version", "version not a string", "empty"],
)
def test_garbage_is_an_explained_unknown_error(tmp_path: Path, text: str) -> None:
    reading = read_version_file(write(tmp_path, text))
    assert reading.reason is Reason.UNKNOWN_ERROR
    assert str(tmp_path / "version.py") in reading.detail


def test_a_missing_file_is_an_explained_unknown_error(tmp_path: Path) -> None:
    reading = read_version_file(tmp_path / "nowhere")
    assert reading.reason is Reason.UNKNOWN_ERROR and "nowhere" in reading.detail


READ = (
    "import json, sys\n"
    "from gpudiag.probe.torch_static import torch_build\n"
    "b = torch_build().value\n"
    "print(json.dumps([b.version, b.cuda, b.location, 'torch' in sys.modules]))\n"
)


@pytest.mark.slow
def test_installed_torch_is_read_without_importing_it(tmp_path: Path) -> None:
    """A torch package whose import would fail, and whose metadata and version.py disagree as the
    CUDA wheels' do (metadata 2.11.0, version.py 2.11.0+cu130): version.py is read, torch is not run."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise RuntimeError('importing torch is not allowed here')\n")
    (site / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda = '13.0'\nhip = None\n")
    (site / "torch-2.11.0.dist-info").mkdir()
    (site / "torch-2.11.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, check=True, env=env).stdout
    version, cuda, location, imported = json.loads(out)
    assert imported is False
    assert (version, cuda, location) == ("2.11.0+cu130", "13.0", str(site / "torch"))


@pytest.mark.slow
def test_the_torch_installed_here_is_read_too() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    out = subprocess.run([sys.executable, "-c", READ], capture_output=True, text=True, check=True).stdout
    version, _, location, imported = json.loads(out)
    assert imported is False
    # version.py may carry a local suffix (+cpu, +cu130) that the wheel's metadata leaves out
    assert version.split("+")[0] == importlib.metadata.version("torch").split("+")[0]
    assert Path(location, "version.py").is_file()


def test_without_torch_the_reading_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    reading = torch_build()
    assert reading.reason is Reason.NOT_FOUND and "pip install" in reading.detail
