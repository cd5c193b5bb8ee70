"""`gpudiag bench-transfer` end to end: the no-GPU paths (real CPU-only torch, no torch, no
driver, no GPU), usage errors, and full runs through a real child process on fake copies
against an example machine's NVML."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gpudiag import sources
from gpudiag.bench import runner
from gpudiag.bench.plan import DeviceInfo, GiB
from gpudiag.exitcodes import ExitCode
from gpudiag.model import ALL_GROUPS, Reading, Reason, TorchBuild
from gpudiag.replay.fixtures import load
from tests.conftest import Cli
from tests.test_bench_fakes import SCENARIO_ENV, SPEC, Scenario

ROOT = Path(__file__).resolve().parent.parent
CUDA_BUILD = Reading.of(TorchBuild("2.5.1+cu124", "12.4", None, "/opt/venv/torch"))


def test_the_real_cpu_only_torch_gets_one_line_and_exit_3(cli: Cli) -> None:
    from gpudiag.probe.torch_static import torch_build

    build = torch_build().value
    if build is None or build.cuda is not None:
        pytest.skip("needs this project's CPU-only torch")
    code, out, err = cli("bench-transfer")
    assert (code, out) == (ExitCode.NO_CUDA_DEVICE, "")
    assert err == f"gpudiag: no usable CUDA device: torch {build.version} is a CPU-only build\n"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (Reading.missing(Reason.NOT_FOUND, "torch is not installed"), "torch is not installed (pip install"),
        (
            Reading.of(TorchBuild("2.5.1+rocm6.2", None, "6.2", "/x")),
            "torch 2.5.1+rocm6.2 is a ROCm build: bench-transfer measures NVIDIA GPUs",
        ),
    ],
)
def test_no_torch_and_no_cuda_build(cli: Cli, monkeypatch: pytest.MonkeyPatch, build: Any, message: str) -> None:
    monkeypatch.setattr("gpudiag.probe.torch_static.torch_build", lambda: build)
    code, out, err = cli("bench-transfer", "--json")
    assert code == ExitCode.NO_CUDA_DEVICE and out == ""
    assert err.startswith(f"gpudiag: no usable CUDA device: {message}") and err.count("\n") == 1


def _machine(monkeypatch: pytest.MonkeyPatch, example: str) -> None:
    """This machine 'is' an example machine: torch is a CUDA build and NVML reads the example."""
    real = sources.open_source
    monkeypatch.setattr("gpudiag.probe.torch_static.torch_build", lambda: CUDA_BUILD)
    monkeypatch.setattr(
        sources, "open_source", lambda replay=None, environ=None, facts=ALL_GROUPS: real(example, facts=facts)
    )


@pytest.mark.parametrize(
    ("example", "message"),
    [
        ("no-driver", "NVIDIA driver not loaded: no GPU kernel module is running"),
        ("no-nvml-library", "NVML library (libnvidia-ml.so.1) not found"),
        ("driver-mismatch", "driver/library version mismatch: the driver was upgraded"),
        ("zero-gpus", "the NVIDIA driver sees no GPU"),
    ],
)
def test_no_driver_or_no_gpu(cli: Cli, monkeypatch: pytest.MonkeyPatch, example: str, message: str) -> None:
    _machine(monkeypatch, example)
    monkeypatch.setattr(runner, "run_child", lambda *a, **k: pytest.fail("must not start torch"))
    code, out, err = cli("bench-transfer")
    assert code == ExitCode.NO_CUDA_DEVICE and out == "" and err.count("\n") == 1
    assert err.startswith("gpudiag: no usable CUDA device: ") and message in err


def _fake_child(monkeypatch: pytest.MonkeyPatch, example: str, **scenario: Any) -> None:
    """Run the real child process, on fake copies, with the example's GPUs as torch's devices."""
    _machine(monkeypatch, example)
    gpus = load(example)[0].gpus
    devices = [
        DeviceInfo(i, g.name.get(""), g.uuid.get("").removeprefix("GPU-"), None, 50 << 20, 80 * GiB, 70 * GiB)
        for i, g in enumerate(gpus)
    ]
    monkeypatch.setenv(SCENARIO_ENV, Scenario(devices=devices, **scenario).to_json())
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    real = runner.run_child
    monkeypatch.setattr(runner, "run_child", lambda *a, **k: real(*a, **{**k, "primitives": SPEC}))


@pytest.mark.slow
def test_a_trained_down_link_is_reported_and_fails_the_run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_child(monkeypatch, "h100-pcie-gen2-trained-down", default_rate=6.4e9, rates={"d2d": 1.0e12})
    monkeypatch.setattr("gpudiag.bench.placement.pci_numa_node", lambda bus: 1)  # the GPU's socket, per sysfs
    code, out, err = cli("bench-transfer", "--iters", "4", "--samples", "2")
    assert code == ExitCode.FAILED, err
    assert err == ""
    assert "cuda:0 (GPU 0)   NVIDIA H100 PCIe   Gen5 x16   1" in out  # host memory: as this machine allows
    assert "peer modes need" not in out  # not asked for explicitly
    flat = " ".join(out.split())
    assert "h2d_pinned 256MiB 6.4 6.4-6.4 0.0% Gen2 x16 50.0-57.5 / 63.0 below expected behaves like Gen2 x16" in flat
    assert "d2d 512MiB 1000 1000-1000 0.0% 740-870 / 1000 healthy" in flat
    assert "Likely cause: the link runs at Gen2 x16 under load (capable of Gen5 x16): it trained down." in flat
    assert "Method: 4 warm-up copies, then 2 samples of 4 copies" in flat


@pytest.mark.slow
def test_json_and_csv_on_a_healthy_two_gpu_machine(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_child(monkeypatch, "a100x2-pcie-one-at-x8", rates={"h2d_pinned_async": 25e9, "peer": 20e9})
    code, out, err = cli("bench-transfer", "--modes", "h2d_pinned_async,peer", "--device", "0,1", "--json")
    assert err == ""
    data = json.loads(out)
    assert data["schema"] == "gpudiag.bench-transfer/1" and data["complete"] and data["torch"].startswith("torch 9.9")
    assert [(r["mode"], r["cuda_device"], r["peer_cuda_device"]) for r in data["results"]] == [
        ("h2d_pinned_async", 0, None),
        ("h2d_pinned_async", 1, None),
        ("peer", 0, 1),
        ("peer", 1, 0),
    ]
    assert data["results"][1]["pcie_under_load_width"] == 8  # read from NVML after the warm-up
    assert all(r["verdict"] in ("healthy", "not_judged") for r in data["results"])
    assert code == ExitCode.OK
    code, out, _ = cli("bench-transfer", "--modes", "peer", "--sizes", "64MiB", "--csv", "--gib")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == ExitCode.OK and [r["size_bytes"] for r in rows] == ["67108864"] * 2
    assert rows[0]["median_gib_per_s"] == f"{20e9 / 2**30:.3f}"


@pytest.mark.slow
def test_wrong_data_exits_1_and_says_so(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_child(monkeypatch, "v100-pcie-gen3-x16", default_rate=12.5e9, rates={"d2d": 360e9}, corrupt=("d2d",))
    code, out, _ = cli("bench-transfer", "--modes", "h2d_pinned,d2d", "--iters", "2")
    assert code == ExitCode.FAILED
    assert "DATA MISMATCH" in out and "d2d cuda:0 512MiB copied wrong data" in " ".join(out.split())


@pytest.mark.slow
def test_what_torch_says_in_the_child_ends_the_run_cleanly(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    why = "torch 2.5.1+cu124 cannot use CUDA: CUDA driver initialization failed, you might not have a CUDA gpu."
    _fake_child(monkeypatch, "h100x8-healthy", no_cuda=why)
    code, out, err = cli("bench-transfer")
    assert (code, out, err) == (ExitCode.NO_CUDA_DEVICE, "", f"gpudiag: no usable CUDA device: {why}\n")
    _fake_child(monkeypatch, "v100-pcie-gen3-x16")
    code, out, err = cli("bench-transfer", "--device", "2")
    assert code == ExitCode.USAGE and out == ""
    assert err == "gpudiag: --device: cuda:2 not visible; torch sees 1 CUDA device(s) (cuda:0 to cuda:0)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "bogus"], "unknown mode 'bogus'"),
        (["--sizes", "1GX"], "invalid size unit"),
        (["--sizes", "1GiB", "--sweep"], "choose one of --sizes and --sweep"),
        (["--iters", "0"], "--iters must be 1 or more"),
        (["--samples", "0"], "--samples must be 1 or more"),
        (["--device", "a"], "use CUDA ordinals"),
        (["--json", "--csv"], "choose one of --json and --csv"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli("bench-transfer", *args)
    assert code == ExitCode.USAGE and out == "" and message in err and err.count("\n") == 1


def test_a_replay_is_refused(cli: Cli) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "bench-transfer")
    assert (
        code == ExitCode.USAGE and err == "gpudiag: bench-transfer measures this machine; it cannot run on a replay\n"
    )


@pytest.mark.slow
def test_the_command_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, gpudiag.cli.bench_cmd; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.slow
def test_the_captured_healthy_h100_exits_0_with_its_slow_pageable_copies(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_bench_report import H100_CAPTURED

    _fake_child(monkeypatch, "h100x8-healthy", rates=H100_CAPTURED)
    code, out, err = cli("bench-transfer", "--device", "0", "--iters", "4", "--samples", "2", width=160)
    flat = " ".join(out.split())
    assert code == ExitCode.OK, out + err
    assert "h2d_pageable 256MiB 7.2 7.2-7.2 0.0% Gen5 x16 not judged: 13% of pinned" in flat
    assert "h2d_pinned 256MiB 53.7 53.7-53.7 0.0% Gen5 x16 50.0-57.5 / 63.0 healthy" in flat
    assert "below expected" not in flat and "Pin host memory for link speed" in flat
