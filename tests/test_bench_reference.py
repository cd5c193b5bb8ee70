"""benchmarks/reference_copy.py: without a usable CUDA device it says why and exits 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs a script in a child

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "reference_copy.py"


def test_the_reference_script_exits_cleanly_without_a_gpu() -> None:
    from gpudiag.probe.torch_static import torch_build

    build = torch_build().value
    if build is None or build.cuda is not None:
        pytest.skip("needs this project's CPU-only torch")
    result = subprocess.run([sys.executable, str(SCRIPT), "--size", "64MiB"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"no usable CUDA device: torch {build.version} is a CPU-only build: nothing to compare "
        "(run this on a GPU machine)\n"
    )


def test_the_reference_script_rejects_a_bad_size() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--size", "12QB"], capture_output=True, text=True)
    assert result.returncode != 0 and "invalid size unit" in result.stderr
