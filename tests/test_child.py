"""Child-process probes: a hang, a crash or an import error is reported as exactly that."""

from __future__ import annotations

import sys

from gpudiag.probe.child import ChildOutcome, run_python


def test_result_comes_back() -> None:
    r = run_python("emit({'answer': 42})")
    assert r.outcome is ChildOutcome.OK and r.data == {"answer": 42}


def test_hang_is_a_timeout() -> None:
    r = run_python("import time; time.sleep(30)", timeout=1)
    assert r.outcome is ChildOutcome.TIMEOUT
    assert r.seconds < 10


def test_segfault_is_a_crash() -> None:
    r = run_python("import ctypes; ctypes.string_at(0)")
    assert r.outcome is ChildOutcome.CRASHED
    assert "SIGSEGV" in r.detail


def test_import_error_is_a_failure_with_its_message() -> None:
    r = run_python("import no_such_module_here")
    assert r.outcome is ChildOutcome.FAILED
    assert "No module named 'no_such_module_here'" in r.detail


def test_silence_is_no_result_and_a_missing_interpreter_is_not_started() -> None:
    assert run_python("pass").outcome is ChildOutcome.NO_RESULT
    r = run_python("pass", python="/nonexistent/python")
    assert r.outcome is ChildOutcome.NOT_STARTED


def test_environment_is_passed_to_the_child() -> None:
    r = run_python("import os; emit({'v': os.environ.get('CUDA_VISIBLE_DEVICES')})", env={"CUDA_VISIBLE_DEVICES": "3"})
    assert r.data == {"v": "3"}
    assert sys.executable
