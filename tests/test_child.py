"""Child processes: a hang, a crash or an import error is reported as exactly that; the children
run by path with any interpreter, on the standard library alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudiag.children import protocol
from gpudiag.probe.child import CHILDREN, ChildOutcome, run_child, script, start

Program = Callable[[str], list[str]]


@pytest.fixture
def program(tmp_path: Path) -> Program:
    """Writes a child program that speaks the protocol; returns its argument list."""

    def write(body: str) -> list[str]:
        path = tmp_path / "child.py"
        path.write_text(f"import sys\nsys.path.insert(0, {str(CHILDREN)!r})\nimport protocol\n{body}\n")
        return [str(path)]

    return write


def test_result_comes_back(program: Program) -> None:
    r = run_child(program("protocol.emit({'answer': 42})"))
    assert r.outcome is ChildOutcome.OK and r.data == {"answer": 42}


@pytest.mark.slow
def test_hang_is_a_timeout(program: Program) -> None:
    r = run_child(program("import time; time.sleep(30)"), timeout=1)
    assert r.outcome is ChildOutcome.TIMEOUT and r.detail.startswith("no answer within 1 s")
    assert r.seconds < 10


def test_segfault_is_a_crash(program: Program) -> None:
    r = run_child(program("import ctypes; ctypes.string_at(0)"))
    assert r.outcome is ChildOutcome.CRASHED
    assert "SIGSEGV" in r.detail


def test_import_error_is_a_failure_with_its_message(program: Program) -> None:
    r = run_child(program("import no_such_module_here"))
    assert r.outcome is ChildOutcome.FAILED
    assert "No module named 'no_such_module_here'" in r.detail


def test_silence_is_no_result_and_a_missing_interpreter_is_not_started(program: Program) -> None:
    assert run_child(program("pass")).outcome is ChildOutcome.NO_RESULT
    r = run_child(program("pass"), python="/nonexistent/python")
    assert r.outcome is ChildOutcome.NOT_STARTED


def test_environment_is_passed_to_the_child(program: Program) -> None:
    args = program("import os; protocol.emit({'v': os.environ.get('CUDA_VISIBLE_DEVICES')})")
    assert run_child(args, env={"CUDA_VISIBLE_DEVICES": "3"}).data == {"v": "3"}


def test_a_started_child_keeps_its_lines_until_they_are_read(program: Program) -> None:
    """start() then finish(): the parent works while the child runs (check reads NVML while torch imports)."""
    running = start(program("print('early', flush=True)\nprotocol.emit({'done': True})"))
    assert running.proc is not None
    running.proc.wait(timeout=30)  # the child has finished: its output waits in the queue
    seen: list[str] = []
    r = running.finish(seen.append, lambda: (running.start + 30, "too slow"))
    assert r.ok and r.data == {"done": True} and seen == ["early"]


@pytest.mark.slow
def test_the_deadline_can_move_and_names_itself(program: Program) -> None:
    running = start(program("print('go', flush=True)\nimport time; time.sleep(30)"))
    seen: list[str] = []

    def deadline() -> tuple[float, str]:
        return (time.monotonic() + 30, "") if not seen else (running.start + 0.5, "the second stage's budget")

    r = running.finish(seen.append, deadline)
    assert r.outcome is ChildOutcome.TIMEOUT and r.detail == "the second stage's budget"


def test_the_protocol_round_trips() -> None:
    assert protocol.payload(protocol.STAGE + '{"stage": "x"}', protocol.STAGE) == {"stage": "x"}
    assert protocol.payload(protocol.STAGE + "[1]", protocol.STAGE) is None
    assert protocol.payload("other", protocol.STAGE) is None
    assert protocol.words(f"{protocol.START} 0 GPU-1", protocol.START) == "0 GPU-1"
    assert protocol.result(f'x\n{protocol.RESULT}{{}}\n{protocol.RESULT}{{"a": 1}}\ny') == {"a": 1}
    assert protocol.first_line(ValueError("one\ntwo")) == "ValueError: one"
    assert protocol.first_line(KeyError()) == "KeyError"


@pytest.mark.parametrize("name", ["torch_probe", "visible_probe"])
def test_children_another_interpreter_runs_need_only_the_standard_library(tmp_path: Path, name: str) -> None:
    """Copied away from gpudiag and run isolated (-I: no PYTHONPATH, no script dir; -S: no site-packages,
    so no torch): they still start, speak the protocol and say torch is missing."""
    copy = tmp_path / "children"
    shutil.copytree(CHILDREN, copy, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(copy / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env={"GPUDIAG_LIBCUDA": str(tmp_path / "no-libcuda.so")},
    )
    assert out.returncode == 0, out.stderr
    answer = protocol.result(out.stdout)
    assert answer is not None
    text = str(answer)
    assert "torch is not installed for" in text


def test_scripts_live_in_the_children_package() -> None:
    from gpudiag.bench import runner

    for name in ("torch_probe", "functional", "visible_probe", "protocol"):
        assert script(name).is_file()
    assert runner.CHILD.is_file()  # the transfer benchmark's child lives with the benchmark (bench/child.py)
