"""The torch probe's stages: a child that hangs or dies after `import torch` keeps its build facts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpudiag.model import Reason
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.probe.torch_runtime import parse, probe

IMPORTED = {
    "stage": "cuda_init",
    "python": "/venv/bin/python",
    "version": "2.5.1+cu124",
    "cuda": "12.4",
    "arch_list": ["sm_80", "sm_90"],
    "import_seconds": 1.3,
    "cudnn_version": 90100,
    "cudnn_compiled": [9, 1, 0],
    "nccl_version": [2, 21, 5],
}


def test_a_hang_in_cuda_init_keeps_the_build_facts() -> None:
    result = ChildResult(ChildOutcome.TIMEOUT, detail="no answer within 90 s (hung, e.g. in CUDA initialisation)")
    rt = parse(result, dict(IMPORTED)).value
    assert rt is not None
    assert (rt.version, rt.cuda, rt.arch_list, rt.cudnn_version) == ("2.5.1+cu124", "12.4", ("sm_80", "sm_90"), 90100)
    assert rt.cuda_available is False and rt.device_count == 0
    assert rt.cuda_error == "torch hung in CUDA initialisation: no answer within 90 s"


def test_a_crash_while_reading_libraries() -> None:
    stages = {k: v for k, v in IMPORTED.items() if not k.startswith(("cudnn", "nccl"))} | {"stage": "imported"}
    rt = parse(ChildResult(ChildOutcome.CRASHED, detail="crashed with SIGSEGV"), stages).value
    assert rt is not None and rt.cudnn_version is None
    assert rt.cuda_error == "torch crashed reading its cuDNN/NCCL versions (SIGSEGV)"


@pytest.mark.parametrize(
    ("outcome", "detail", "stages", "expected"),
    [
        (
            ChildOutcome.TIMEOUT,
            "no answer within 9 s (hung)",
            {"stage": "importing"},
            "torch hung during `import torch`",
        ),
        (ChildOutcome.CRASHED, "crashed with SIGABRT", {"stage": "importing"}, "torch crashed during `import torch`"),
        (ChildOutcome.CRASHED, "crashed with SIGKILL", {}, "torch crashed before reporting (SIGKILL)"),
        # A stage without the facts it should carry is still explained, not an error.
        (ChildOutcome.TIMEOUT, "no answer within 9 s", {"stage": "cuda_init"}, "torch hung in CUDA initialisation"),
    ],
)
def test_where_it_stopped_is_said(outcome: ChildOutcome, detail: str, stages: dict[str, str], expected: str) -> None:
    reading = parse(ChildResult(outcome, detail=detail), stages)
    assert reading.value is None and reading.reason is Reason.UNKNOWN_ERROR
    assert reading.detail.startswith(expected)


def test_nccl_with_a_suffix_and_cudnn_8() -> None:
    data = {
        "python": "/p",
        "version": "2.1.0",
        "cuda": "11.8",
        "cuda_available": True,
        "cuda_error": "",
        "device_count": 0,
        "arch_list": [],
        "cudnn_version": 8902,
        "cudnn_compiled": [8, 9, 2],
        "nccl_version": [2, 18, 1],
        "devices": [],
        "import_seconds": 1,
        "init_seconds": 0,
    }
    rt = parse(ChildResult(ChildOutcome.OK, data)).value
    assert rt is not None and rt.nccl_version == (2, 18, 1) and rt.cudnn_version == 8902


# A CUDA build of torch as far as the probe reads it before CUDA starts (stands in for the real one,
# whose import alone takes seconds), with torch.cuda.is_available hanging as a broken driver makes it.
CUDA_BUILD_HANGING_IN_INIT = """
import time
from types import SimpleNamespace as _Namespace

__version__ = "2.5.1+cu124"
version = _Namespace(cuda="12.4")
_C = _Namespace(
    _cuda_getArchFlags=lambda: "sm_80 sm_90",
    _cudnn=_Namespace(getVersionInt=lambda: 90100, getCompileVersion=lambda: (9, 1, 0)),
)
backends = _Namespace(cudnn=_Namespace(is_available=lambda: True))
cuda = _Namespace(nccl=_Namespace(version=lambda: (2, 21, 5)), is_available=lambda: time.sleep(60))
"""
HANG_BUDGET = 2  # seconds: the stand-in imports at once, so the child reaches CUDA start-up well within it


@pytest.mark.slow
def test_a_real_child_that_hangs_in_cuda_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real probe script in a real child; torch hangs in CUDA initialisation: the build facts it
    reported before stay, CUDA is unusable, and the hang is named with the budget it ran out of."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(CUDA_BUILD_HANGING_IN_INIT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reading = probe(sys.executable, timeout=HANG_BUDGET)
    rt = reading.value
    assert rt is not None, reading.detail
    assert (rt.version, rt.cuda, rt.arch_list) == ("2.5.1+cu124", "12.4", ("sm_80", "sm_90"))
    assert (rt.cudnn_version, rt.cudnn_compiled, rt.nccl_version) == (90100, (9, 1, 0), (2, 21, 5))
    assert rt.cuda_available is False and rt.device_count == 0
    assert rt.cuda_error == f"torch hung in CUDA initialisation: no answer within {HANG_BUDGET} s"


def test_a_real_child_whose_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reading = probe(sys.executable, timeout=30)
    assert reading.reason is Reason.UNKNOWN_ERROR
    assert reading.detail == "torch fails to import: OSError: libcudnn.so.9: cannot open shared object file"
