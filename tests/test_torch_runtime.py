"""Reading torch's runtime view from a child, including every way that child can fail."""

from __future__ import annotations

import pytest

from gpudiag.model import Reason
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.probe.torch_runtime import parse, probe


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


def test_the_real_cpu_torch() -> None:
    pytest.importorskip("torch")
    rt = probe(timeout=120).value
    assert rt is not None
    if rt.cuda is not None:
        pytest.skip("a CUDA build of torch is installed")
    assert rt.cuda_available is False
    assert "not compiled with CUDA" in rt.cuda_error
    assert rt.devices == () and rt.arch_list == ()
    assert rt.import_seconds > 0


def test_interpreter_without_torch(tmp_path: object) -> None:
    import shutil

    python = shutil.which("python3")
    if python is None:
        pytest.skip("no system python3")
    reading = probe(python=python, timeout=60)
    if reading.value is not None:
        pytest.skip("the system python has torch")
    assert reading.reason in (Reason.NOT_FOUND, Reason.UNKNOWN_ERROR)
