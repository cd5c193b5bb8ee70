"""benchmarks/reference_copy.py: its set-up on CPU, up to the first CUDA call; without a usable CUDA
device it says why and exits 0."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "reference_copy.py"


@pytest.mark.slow  # runs the script in a child
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


@pytest.mark.slow
def test_the_reference_script_rejects_a_bad_size() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--size", "12QB"], capture_output=True, text=True)
    assert result.returncode != 0 and "invalid size unit" in result.stderr


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_copy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where its dataclass looks itself up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("size", "nbytes"), [("256MiB", 256 << 20), ("1GiB", 1 << 30), ("1000002B", 1000000)])
def test_the_set_up_plans_what_bench_transfer_would_without_cuda(size: str, nbytes: int) -> None:
    """Everything before the first CUDA call runs on CPU: on the H200 it ended in a UsageError (bench's
    plan was handed a size without its unit, runs/reference-copy-unpatched.txt)."""
    from gpudiag.bench.plan import Mode, make_plan

    script = _script()
    run = script.setup(["--size", size, "--iters", "4", "--samples", "2", "--device", "1"])
    assert run.nbytes == nbytes
    assert run.plan == make_plan(None, size, False, 4, 2, "1")  # what `bench-transfer --sizes SIZE` plans
    modes = [(task.mode, kind, task.device, task.nbytes) for task, kind in run.copies]
    assert modes == [
        (Mode.H2D_PINNED_ASYNC, script.H2D, 1, nbytes),
        (Mode.D2H_PINNED_ASYNC, script.D2H, 1, nbytes),
        (Mode.D2D, script.D2D, 1, nbytes),
    ]


def test_the_set_up_refuses_bad_options_as_usage(capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    for argv, said in ((["--size", "12QB"], "--size: invalid size unit"), (["--iters", "0"], "--iters must be 1")):
        with pytest.raises(SystemExit) as exited:
            script.setup(argv)
        assert exited.value.code == 2 and said in capsys.readouterr().err


def test_the_first_cuda_call_comes_after_the_set_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """main runs the set-up, then asks torch for CUDA: here a stand-in that has none."""
    from gpudiag.bench import torch_prims
    from gpudiag.bench.engine import NoCudaError

    script = _script()
    planned = []
    real_setup = script.setup
    monkeypatch.setattr(script, "setup", lambda argv: planned.append(real_setup(argv)) or planned[-1])

    def no_cuda() -> None:
        assert planned, "CUDA asked before the set-up"
        raise NoCudaError("a stand-in with no CUDA")

    monkeypatch.setattr(torch_prims, "TorchPrimitives", no_cuda)
    said: list[str] = []
    assert script.main(["--size", "64MiB"], out=said.append) == 0
    assert said == ["no usable CUDA device: a stand-in with no CUDA: nothing to compare (run this on a GPU machine)"]
    assert planned[0].nbytes == 64 << 20


class _Buffer(list[int]):
    """A fake copy's buffer with an address, as a torch tensor has (``data_ptr``)."""

    def data_ptr(self) -> int:
        return id(self)


def test_the_whole_run_to_its_figures_on_stand_ins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Past the set-up, with the bench tests' simulated GPU for gpudiag's side and a copier that copies
    the same buffers by address for the reference's: every step runs, each mode's figures come out and
    the JSON is written (on the H200 the script never got past its set-up)."""
    from gpudiag.bench import torch_prims
    from tests.test_bench_fakes import FakeCopy, FakePrimitives, Scenario

    buffers: dict[int, _Buffer] = {}

    class Copy(FakeCopy):
        def __init__(self, prims: FakePrimitives, task: Any) -> None:
            super().__init__(prims, task)
            self.src, self.dst = _Buffer(self.src), _Buffer(self.dst)
            buffers.update({self.src.data_ptr(): self.src, self.dst.data_ptr(): self.dst})

        def clear(self) -> None:
            self.dst[:] = [-1] * self.N

        def run(self) -> None:
            super().run()
            self.dst = _Buffer(self.dst)
            buffers[self.dst.data_ptr()] = self.dst

    class Prims(FakePrimitives):
        def __init__(self) -> None:
            super().__init__(Scenario(rates={"h2d_pinned_async": 50e9, "d2h_pinned_async": 50e9, "d2d": 2e12}))

        def prepare(self, task: Any) -> Copy:
            return Copy(self, task)

    script = _script()

    class Copier(script.RawCopier):  # type: ignore[name-defined,misc]
        name = "a stand-in copier"

        def event(self) -> list[float]:
            return [0.0]

        def record(self, event: list[float]) -> None:
            event[0] = float(len(self.done))

        def elapsed_seconds(self, start: list[float], end: list[float]) -> float:
            return (end[0] - start[0]) * 256 * 2**20 / 50e9  # each copy at 50 GB/s

        def copy(self, dst: int, src: int, nbytes: int, kind: int) -> None:
            buffers[dst][:] = buffers[src]
            self.done.append(kind)

        def synchronize(self) -> None:
            pass

    copier = Copier()
    copier.done = []
    monkeypatch.setattr(torch_prims, "TorchPrimitives", Prims)
    monkeypatch.setattr(script, "raw_copier", lambda device: copier)
    monkeypatch.setattr(script, "gpu_numa_node", lambda uuid, bus: None)
    said: list[str] = []
    out = tmp_path / "figures.json"
    code = script.main(["--size", "256MiB", "--json", str(out)], out=said.append)
    figures = json.loads(out.read_text())["figures"]
    assert [f["mode"] for f in figures] == ["h2d_pinned_async", "d2h_pinned_async", "d2d"]
    assert all(f["gpudiag_verified"] and f["reference_verified"] for f in figures)
    assert said[-1].startswith("largest difference ") and code in (0, 1)
    assert set(copier.done) == {script.H2D, script.D2H, script.D2D}
