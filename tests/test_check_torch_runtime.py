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


def _sitecustomize(tmp_path: Path, body: str) -> Path:
    (tmp_path / "sitecustomize.py").write_text("import torch, time, os\n" + body)
    return tmp_path


def test_a_real_child_that_hangs_in_cuda_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real probe script, with torch.cuda.is_available made to hang as a broken driver does."""
    pytest.importorskip("torch")
    path = _sitecustomize(tmp_path, "torch.cuda.is_available = lambda: time.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(path))
    reading = probe(sys.executable, timeout=15)
    rt = reading.value
    assert rt is not None, reading.detail
    assert rt.cuda_available is False and rt.version.startswith("2.")
    assert rt.cuda_error == "torch hung in CUDA initialisation: no answer within 15 s"


def test_a_real_child_whose_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    reading = probe(sys.executable, timeout=30)
    assert reading.reason is Reason.UNKNOWN_ERROR
    assert reading.detail == "torch fails to import: OSError: libcudnn.so.9: cannot open shared object file"
