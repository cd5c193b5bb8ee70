"""Reading torch's runtime view from a child, including every way that child can fail."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpudiag.model import Reason
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.probe.torch_runtime import parse, probe
from tests.conftest import skip_without_torch


@pytest.mark.parametrize(
    ("result", "reason", "words"),
    [
        (ChildResult(ChildOutcome.TIMEOUT, detail="no answer within 90 s"), Reason.UNKNOWN_ERROR, "torch hung"),
        (ChildResult(ChildOutcome.CRASHED, detail="crashed with SIGSEGV"), Reason.UNKNOWN_ERROR, "SIGSEGV"),
        (ChildResult(ChildOutcome.FAILED, detail="exited with status 1"), Reason.UNKNOWN_ERROR, "probe failed"),
        (ChildResult(ChildOutcome.NOT_STARTED, detail="cannot run x"), Reason.UNAVAILABLE, "cannot run x"),
        (ChildResult(ChildOutcome.OK, {"missing": "torch is not installed for /x"}), Reason.NOT_FOUND, "not installed"),
        (ChildResult(ChildOutcome.OK, {"import_error": "OSError: libcudnn.so.9"}), Reason.UNKNOWN_ERROR, "libcudnn"),
        (ChildResult(ChildOutcome.OK, {"version": "2.0"}), Reason.UNKNOWN_ERROR, "unexpected"),
    ],
)
def test_failures_become_explained_readings(result: ChildResult, reason: Reason, words: str) -> None:
    reading = parse(result)
    assert reading.reason is reason
    assert words in reading.detail


@pytest.mark.slow
def test_the_real_cpu_torch() -> None:
    skip_without_torch()
    rt = probe(timeout=120).value
    assert rt is not None
    if rt.cuda is not None:
        pytest.skip("a CUDA build of torch is installed")
    assert rt.cuda_available is False
    assert "not compiled with CUDA" in rt.cuda_error
    assert rt.devices == () and rt.arch_list == ()
    assert rt.import_seconds > 0


def test_interpreter_without_torch(tmp_path: Path) -> None:
    """Another interpreter (a wrapper that runs this Python without site-packages, so no torch on
    any machine) runs the child by path: torch is missing *there*."""
    python = tmp_path / "python-without-torch"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    reading = probe(python=str(python), timeout=60)
    assert reading.reason is Reason.NOT_FOUND
    assert reading.detail == f"torch is not installed for {os.path.abspath(sys.executable)}"  # as the child sees it
