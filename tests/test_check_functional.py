"""The functional test's plumbing: the loaded-GPU callback, results, and failures of the child."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpudiag.checks import functional
from gpudiag.probe.child import ChildOutcome, ChildResult, run_python
from gpudiag.probe.devices import read_device_facts


def fake_child(outcome: ChildOutcome, data: dict[str, Any], lines: list[str]) -> Any:
    def run(code: str, *, on_line: Any = None, **_: Any) -> ChildResult:
        for line in lines:
            if on_line is not None:
                on_line(line)
        return ChildResult(outcome, data, "" if outcome is ChildOutcome.OK else f"{outcome.value} detail")

    return run


def test_results_are_matched_to_nvml_gpus_and_read_under_load(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {
        "results": [
            {
                "torch_index": 0,
                "uuid": "abcd",
                "ok": True,
                "error": "",
                "context_seconds": 0.4,
                "memory_ok": True,
                "matmul_rel_error": 1e-6,
                "tflops": 50.0,
            }
        ]
    }
    monkeypatch.setattr(functional, "run_python", fake_child(ChildOutcome.OK, data, [f"{functional.LOADED_MARKER} 0"]))
    calls: list[int] = []

    def read_loaded(torch_index: int, _: str) -> tuple[int | None, tuple[int, int] | None, int | None]:
        calls.append(torch_index)
        return 3, (4, 16), 0

    results, why = functional.run(None, lambda uuid: 3 if uuid == "abcd" else None, read_loaded, 30)
    assert why == "" and calls == [0]
    assert results is not None
    assert (results[0].gpu_index, results[0].loaded_pcie, results[0].tflops) == (3, (4, 16), 50.0)


def test_a_hang_or_crash_is_a_failed_gpu_not_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):
        monkeypatch.setattr(functional, "run_python", fake_child(outcome, {}, []))
        results, why = functional.run(None, lambda uuid: None, None, 30)
        assert why == ""
        assert results is not None and results[0].ok is False and outcome.value in results[0].error


def test_a_child_that_cannot_start_is_reported_as_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(functional, "run_python", fake_child(ChildOutcome.NOT_STARTED, {}, []))
    results, why = functional.run(None, lambda uuid: None, None, 30)
    assert results is None and "could not run" in why


def test_child_streams_lines_before_it_ends() -> None:
    seen: list[str] = []
    result = run_python("print('@@X@@ 1', flush=True)\nemit({'done': True})", on_line=seen.append, timeout=30)
    assert result.ok and result.data == {"done": True}
    assert seen[0] == "@@X@@ 1"


def test_streaming_child_still_times_out() -> None:
    result = run_python("import time\nprint('start', flush=True)\ntime.sleep(30)", on_line=lambda _: None, timeout=1)
    assert result.outcome is ChildOutcome.TIMEOUT


def test_device_facts_from_a_fake_tree(tmp_path: Path) -> None:
    dev, proc = tmp_path / "dev", tmp_path / "proc"
    dev.mkdir()
    proc.mkdir()
    for name in ("nvidiactl", "nvidia0"):
        (dev / name).touch()
    (proc / "modules").write_text("nvidia_uvm 1 0 - Live 0x0\nnvidia 2 1 nvidia_uvm, Live 0x0\n")
    facts = read_device_facts((0, 1), dev, proc)
    assert [(n.path.rsplit("/", 1)[1], n.exists) for n in facts.nodes] == [
        ("nvidiactl", True),
        ("nvidia-uvm", False),
        ("nvidia0", True),
        ("nvidia1", False),
    ]
    assert facts.modules == {"nvidia", "nvidia_uvm"}
    assert read_device_facts((), dev, tmp_path / "none").modules_known is False


@pytest.mark.gpu
def test_functional_test_on_a_real_gpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    results, why = functional.run(None, lambda uuid: None, None, 120)
    assert results, why
    for r in results:
        assert r.ok, r.error
        assert r.memory_ok is True
        assert r.matmul_rel_error is not None and r.matmul_rel_error < 1e-4
        assert r.tflops is not None and r.tflops > 0.1
