"""The functional test: the real child script (run on the CPU here), its markers, hangs and crashes.

Without a GPU, the child's very code runs with ``device_type="cpu"`` and small sizes; a short
prelude stands in for the few ``torch.cuda`` calls a CPU build lacks, and injects hangs and
crashes on one device to check that they are pinned to that GPU.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudiag.checks import functional_runner as functional
from gpudiag.children import protocol
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.probe.devices import read_device_facts

# Asked without importing torch: an import here would cost every collecting worker seconds.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (a CPU build will do)")

FAKE_CUDA = """
import os
if os.environ.get("FAKE_CUDA_DEVICES"):
    import time, torch
    DEVICES = int(os.environ["FAKE_CUDA_DEVICES"])
    MODE = os.environ.get("FAKE_CUDA_MODE", "")
    BAD_DEVICE = int(os.environ.get("FAKE_CUDA_BAD", "-1"))
    DELAY = float(os.environ.get("FAKE_CUDA_DELAY", "0"))  # before the bad device's fault
    SLOW_DEVICE = int(os.environ.get("FAKE_CUDA_SLOW", "-1"))  # each of its syncs takes 2 s
    class _Event:
        def __init__(self, enable_timing=False):
            self.t = 0.0
        def record(self):
            self.t = time.perf_counter()
        def elapsed_time(self, other):
            return (other.t - self.t) * 1000.0
    class _Props:
        def __init__(self, i):
            self.name, self.major, self.minor, self.total_memory = "Fake GPU", 9, 0, 80 << 30
            self.uuid = f"fake-{i}"
    def _sync(dev=None):
        if dev is not None and dev.index == SLOW_DEVICE:
            time.sleep(2)
        if dev is not None and dev.index == BAD_DEVICE:
            time.sleep(DELAY)
            if MODE == "hang":
                time.sleep(60)
            elif MODE == "crash":
                os.abort()
            elif MODE == "raise":
                raise RuntimeError("CUDA error: an illegal memory access was encountered\\nmore text")
    torch.cuda.is_available = lambda: True
    torch.cuda.init = lambda: None
    torch.cuda.device_count = lambda: DEVICES
    torch.cuda.get_device_properties = _Props
    torch.cuda.synchronize = _sync
    torch.cuda.Event = _Event
    torch.cuda.empty_cache = lambda: None
"""

SMALL = functional.settings("cpu", load_seconds=0.05, matmul_n=64, load_n=64, words=4096)


@pytest.fixture
def fake_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The real child, run by path on the CPU torch, with torch.cuda faked by a sitecustomize."""
    (tmp_path / "sitecustomize.py").write_text(FAKE_CUDA)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))

    def configure(devices: int = 2, mode: str = "", bad: int = -1, delay: float = 0, slow: int = -1) -> None:
        monkeypatch.setenv("FAKE_CUDA_DEVICES", str(devices))
        monkeypatch.setenv("FAKE_CUDA_MODE", mode)
        monkeypatch.setenv("FAKE_CUDA_BAD", str(bad))
        monkeypatch.setenv("FAKE_CUDA_DELAY", str(delay))
        monkeypatch.setenv("FAKE_CUDA_SLOW", str(slow))

    return configure


def index_of(uuid: str) -> int | None:
    return {"fake-0": 4, "fake-1": 5}.get(uuid)


@pytest.mark.slow
def test_the_child_script_runs_end_to_end_and_reports_each_device(fake_cuda: Any) -> None:
    fake_cuda()
    reads: list[int] = []

    def read_loaded(index: int) -> tuple[tuple[int, int] | None, int | None]:
        reads.append(index)
        return (5, 16), 0x1

    results, why = functional.run(None, index_of, read_loaded, 120, SMALL)
    assert why == ""
    assert results is not None and [r.gpu_index for r in results] == [4, 5]
    assert sorted(reads) == [4, 5]  # NVML was re-read while each device was busy (in any order)
    for r in results:
        assert r.ok and r.error == ""
        assert r.memory_ok is True
        assert r.matmul_rel_error is not None and r.matmul_rel_error < 1e-5  # fp32 vs float64
        assert r.tflops is not None and r.tflops > 0
        assert r.context_seconds is not None and r.context_seconds >= 0
        assert (r.loaded_pcie, r.loaded_clock_events) == ((5, 16), 0x1)


@pytest.mark.slow
def test_the_gpus_are_tested_at_the_same_time(fake_cuda: Any) -> None:
    """Every GPU starts before any finishes: the test takes about one GPU's time, whatever the count."""
    fake_cuda(devices=3)
    lines: list[str] = []
    collector = functional.Collector(index_of, None)

    def on_line(line: str) -> None:
        lines.append(line.split(" ", 1)[0])
        collector.on_line(line)

    slow = functional.settings("cpu", load_seconds=0.5, matmul_n=64, load_n=64, words=4096)
    result = functional.run_child(
        [str(functional.script("functional")), json.dumps(slow)], python=None, timeout=120, on_line=on_line
    )
    results, why = collector.finish(result)
    assert why == "" and results is not None and [r.torch_index for r in results] == [0, 1, 2]
    assert all(r.ok for r in results)
    markers = [m for m in lines if m in (protocol.START, protocol.GPU)]
    assert markers == [protocol.START] * 3 + [protocol.GPU] * 3


@pytest.mark.slow
def test_a_crash_fails_every_gpu_still_under_test(fake_cuda: Any) -> None:
    fake_cuda(mode="crash", bad=1, slow=0)  # GPU 0 is still busy when GPU 1 kills the process
    results, why = functional.run(None, index_of, None, 120, SMALL)
    assert why == "" and results is not None
    assert [(r.torch_index, r.ok) for r in results] == [(0, False), (1, False)]
    assert results[0].error.endswith("while testing this GPU (and GPU 5, tested at the same time)")
    assert results[1].error.endswith("while testing this GPU (and GPU 4, tested at the same time)")


@pytest.mark.slow
def test_an_error_on_one_gpu_fails_that_gpu_only(fake_cuda: Any) -> None:
    fake_cuda(mode="raise", bad=1)
    results, why = functional.run(None, index_of, None, 120, SMALL)
    assert why == "" and results is not None
    assert results[0].ok
    assert not results[1].ok
    assert results[1].error == "RuntimeError: CUDA error: an illegal memory access was encountered"


@pytest.mark.slow
def test_a_crash_is_pinned_to_the_gpu_and_earlier_results_survive(fake_cuda: Any) -> None:
    """The test in a child of its own. A hang, in check's own child with the test's own budget:
    test_a_hanging_functional_test_is_named_with_its_own_budget."""
    fake_cuda(mode="crash", bad=1, delay=1.5)  # the other GPU, tested at the same time, has finished by then
    results, why = functional.run(None, index_of, None, 120, SMALL)
    assert why == ""  # a GPU that kills the process is a finding, not a tool failure
    assert results is not None and len(results) == 2
    assert results[0].ok and results[0].gpu_index == 4
    assert not results[1].ok and results[1].gpu_index == 5 and results[1].torch_index == 1
    assert "SIGABRT" in results[1].error and "while testing this GPU" in results[1].error


@pytest.mark.slow
def test_the_no_cuda_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch whose CUDA cannot start (faked, so a GPU machine gives the same answer)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import torch\ndef _no():\n    raise RuntimeError('Found no NVIDIA driver on your system.')\n"
        "torch.cuda.init = _no\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    results, why = functional.run(None, index_of, None, 120, SMALL)
    assert results is None
    assert why.startswith("functional test could not run: CUDA unusable in the test process:")


def fake_child(outcome: ChildOutcome, data: dict[str, Any], lines: list[str]) -> Any:
    def run(args: list[str], *, on_line: Any = None, **_: Any) -> ChildResult:
        for line in lines:
            if on_line is not None:
                on_line(line)
        return ChildResult(outcome, data, "" if outcome is ChildOutcome.OK else f"{outcome.value} detail")

    return run


def test_a_child_that_cannot_start_is_reported_as_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(functional, "run_child", fake_child(ChildOutcome.NOT_STARTED, {}, []))
    results, why = functional.run(None, index_of, None, 30)
    assert results is None and why == "functional test could not run: not_started detail"


def test_a_child_that_fails_after_some_gpus_keeps_them(monkeypatch: pytest.MonkeyPatch) -> None:
    done = '{"torch_index": 0, "uuid": "fake-0", "ok": true, "error": "", "context_seconds": 0.2, "memory_ok": true, '
    done += '"matmul_rel_error": 1e-7, "tflops": 51.0}'
    lines = [
        f"{protocol.START} 0 fake-0",
        f"{protocol.GPU} {done}",
        "garbage",
        "@@GPUDIAG_GPU@@ {",
    ]
    monkeypatch.setattr(functional, "run_child", fake_child(ChildOutcome.FAILED, {}, lines))
    results, why = functional.run(None, index_of, None, 30)
    assert results is not None and [(r.gpu_index, r.tflops) for r in results] == [(4, 51.0)]
    assert why == "functional test stopped early: failed detail"


def test_a_crash_before_any_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(functional, "run_child", fake_child(ChildOutcome.CRASHED, {}, []))
    results, why = functional.run(None, index_of, None, 30)
    assert why == "" and results is not None
    assert results[0].torch_index == -1 and "before testing any GPU" in results[0].error


def test_nan_results_survive_the_json_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = '{"torch_index": 0, "uuid": "fake-0", "ok": true, "error": "", "context_seconds": 0.2, "memory_ok": true, '
    bad += '"matmul_rel_error": NaN, "tflops": 51.0}'
    lines = [f"{protocol.GPU} {bad}"]
    monkeypatch.setattr(functional, "run_child", fake_child(ChildOutcome.OK, {"count": 1}, lines))
    results, _ = functional.run(None, index_of, None, 30)
    assert results is not None and results[0].matmul_rel_error is not None
    assert math.isnan(results[0].matmul_rel_error)


def test_device_facts_from_a_fake_tree(tmp_path: Path) -> None:
    dev, sysfs = tmp_path / "dev", tmp_path / "nouveau"
    dev.mkdir()
    sysfs.mkdir()
    for name in ("nvidiactl", "nvidia0"):
        (dev / name).touch()
    for name in ("0000:01:00.0", "bind", "unbind", "module", "new_id"):
        (sysfs / name).touch()
    modules = tmp_path / "modules"
    modules.write_text("nvidia_uvm 1 0 - Live 0x0\nnvidia 2 1 nvidia_uvm, Live 0x0\nnouveau 3 0 - Live 0x0\n")
    helper = tmp_path / "nvidia-modprobe"
    helper.touch()
    facts = read_device_facts((0, 1), dev, modules, sysfs, (helper,))
    assert [(n.path.rsplit("/", 1)[1], n.exists) for n in facts.nodes] == [
        ("nvidiactl", True),
        ("nvidia-uvm", False),
        ("nvidia0", True),
        ("nvidia1", False),
    ]
    assert facts.modules == {"nvidia", "nvidia_uvm", "nouveau"} and facts.modules_known
    assert facts.nouveau_bound == ("0000:01:00.0",)
    assert facts.modprobe_helper is False  # not setuid root
    bare = read_device_facts((), dev, tmp_path / "none", tmp_path / "none", ())
    assert (bare.modules_known, bare.nouveau_bound, bare.modprobe_helper) == (False, (), False)


def test_the_real_host_can_be_read() -> None:
    facts = read_device_facts((0,))
    assert [n.path for n in facts.nodes] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"]
    assert isinstance(facts.modprobe_helper, bool)


@pytest.mark.gpu
def test_functional_test_on_a_real_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    results, why = functional.run(sys.executable, lambda uuid: None, None, 120)
    assert results, why
    for r in results:
        assert r.ok, r.error
        assert r.memory_ok is True
        assert r.matmul_rel_error is not None and r.matmul_rel_error < 1e-4
        assert r.tflops is not None and r.tflops > 0.1


@pytest.mark.slow
def test_the_torch_child_runs_the_test_when_told(fake_cuda: Any) -> None:
    """The torch probe and the functional test in one real child: one import, one CUDA start-up;
    the settings come on stdin once torch has answered (the parent read NVML meanwhile)."""
    from gpudiag.probe import torch_runtime

    fake_cuda()
    collector = functional.Collector(index_of, lambda index: ((4, 16), 0))
    running = torch_runtime.launch(sys.executable, ask=True)
    running.send(json.dumps(SMALL))
    torch, child = torch_runtime.finish(running, 120, collector.on_line, functional.budget(2))
    rt = torch.value
    assert rt is not None and rt.cuda_available and rt.device_count == 2
    assert [d.uuid for d in rt.devices] == ["fake-0", "fake-1"]
    results, why = collector.finish(child)
    assert why == "" and results is not None
    assert [(r.gpu_index, r.ok, r.loaded_pcie) for r in results] == [(4, True, (4, 16)), (5, True, (4, 16))]


@pytest.mark.slow
def test_the_torch_child_skips_the_test_when_told_so(fake_cuda: Any) -> None:
    from gpudiag.probe import torch_runtime

    fake_cuda()
    lines: list[str] = []
    running = torch_runtime.launch(sys.executable, ask=True)
    running.send("")
    torch, child = torch_runtime.finish(running, 120, lines.append)
    assert torch.value is not None and torch.value.cuda_available
    assert child.ok and not [line for line in lines if line.startswith(protocol.START)]


@pytest.mark.slow
def test_a_hanging_functional_test_is_named_with_its_own_budget(fake_cuda: Any) -> None:
    """torch answered in time; the test then hangs on GPU 1: the reading keeps torch, the budget
    is named, the hang is pinned to that GPU and GPU 0's result survives. The budget starts once
    torch has answered (as in `gpudiag check`), so a short one is not at the mercy of torch's import
    on a loaded machine: it only has to cover GPU 0's test at this file's small sizes."""
    from gpudiag.probe import torch_runtime

    fake_cuda(mode="hang", bad=1)
    collector = functional.Collector(index_of, None)
    running = torch_runtime.launch(sys.executable, ask=True)
    running.send(json.dumps(SMALL))
    torch, child = torch_runtime.finish(running, 120, collector.on_line, functional_budget=4)
    assert torch.value is not None and torch.value.cuda_available
    assert child.outcome is ChildOutcome.TIMEOUT
    assert child.detail.startswith("the functional test did not finish within its budget of 4 s")
    results, why = collector.finish(child)
    assert why == ""  # a GPU that hangs is a finding, not a tool failure
    assert results is not None and len(results) == 2
    assert results[0].ok and results[0].gpu_index == 4, results[0]
    assert not results[1].ok and results[1].gpu_index == 5 and results[1].torch_index == 1
    assert "budget of 4 s" in results[1].error and "while testing this GPU" in results[1].error


@pytest.mark.slow
def test_without_cuda_the_torch_child_does_not_wait_for_settings() -> None:
    """The real CPU-only torch: the probe answers and ends, though nobody answers its question."""
    from gpudiag.probe import torch_runtime, torch_static

    build = torch_static.torch_build().value
    if build is None:
        pytest.skip("needs torch (a CPU build will do)")
    if build.cuda is not None or build.hip is not None:  # only a GPU build is asked (an import costs seconds)
        import torch as real_torch

        if real_torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    running = torch_runtime.launch(sys.executable, ask=True)
    torch, child = torch_runtime.finish(running, 120)
    assert torch.value is not None and torch.value.cuda_available is False and child.ok
