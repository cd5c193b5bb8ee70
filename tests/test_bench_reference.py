"""benchmarks/reference_copy.py: its set-up on CPU, up to the first CUDA call; without a usable CUDA
device it says why and exits 0."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
