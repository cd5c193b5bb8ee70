"""bench-transfer without a GPU: planning, statistics, the link model, the loop, rendering, no-GPU exits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudiag.bench import engine, report
from gpudiag.bench.link import Verdict, behaves_like, judge_d2d, judge_host, pcie_theoretical
from gpudiag.bench.plan import DEFAULT_SIZE, SWEEP_SIZES, Mode, Plan, make_plan, parse_modes, parse_sizes
from gpudiag.bench.stats import GB, bandwidth
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.render import bench_view
from gpudiag.testing.fixtures import load
from tests.conftest import Cli


def test_modes_and_aliases() -> None:
    assert parse_modes(None) == tuple(Mode)
    assert parse_modes("h2d,d2d") == (Mode.H2D_PAGEABLE, Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC, Mode.D2D)
    assert parse_modes("pinned,h2d_pinned") == (
        Mode.H2D_PINNED,
        Mode.H2D_PINNED_ASYNC,
        Mode.D2H_PINNED,
        Mode.D2H_PINNED_ASYNC,
    )
    with pytest.raises(UsageError, match="unknown mode 'h2x'"):
        parse_modes("h2x")


def test_sizes() -> None:
    assert parse_sizes(None, False) == (DEFAULT_SIZE,)
    assert parse_sizes("64MiB, 1GiB", False) == (64 << 20, 1 << 30)
    assert parse_sizes(None, True) == SWEEP_SIZES and SWEEP_SIZES[0] == 4096 and SWEEP_SIZES[-1] == 1 << 30
    for bad, message in (("20GX", "invalid size unit"), ("2B", "too small"), (",", "at least one size")):
        with pytest.raises(UsageError, match=message):
            parse_sizes(bad, False)
    with pytest.raises(UsageError, match="choose one"):
        parse_sizes("1GiB", True)
    with pytest.raises(UsageError, match="--iters"):
        make_plan(None, None, False, 0, 3, None)


def test_statistics() -> None:
    bw = bandwidth(1_000_000_000, [0.1, 0.05, 0.08])
    assert bw.median == pytest.approx(12.5e9)
    assert (bw.minimum, bw.maximum) == (pytest.approx(10e9), pytest.approx(20e9))
    assert bw.spread_percent == pytest.approx(80.0)
    with pytest.raises(ValueError):
        bandwidth(1, [0.0])


def test_link_model() -> None:
    assert pcie_theoretical(3, 16) == pytest.approx(15.76)
    assert pcie_theoretical(5, 16) == pytest.approx(63.0, rel=1e-3)
    assert pcie_theoretical(4, 8) == pytest.approx(15.75, rel=1e-3)
    assert behaves_like(12.0) == "Gen3 x16" and behaves_like(25.0) == "Gen4 x16" and behaves_like(55.0) == "Gen5 x16"


def test_host_verdicts() -> None:
    healthy = judge_host(Mode.H2D_PINNED_ASYNC, 25.1, 4, 16, 4, 16)
    assert healthy.verdict is Verdict.HEALTHY and healthy.typical == (24.0, 26.5)
    trained_down = judge_host(Mode.H2D_PINNED_ASYNC, 6.1, 2, 16, 4, 16)
    assert trained_down.verdict is Verdict.BELOW
    assert (
        "behaves like Gen2 x16" in trained_down.note
        and "running at Gen2 x16 (capable of Gen4 x16)" in trained_down.note
    )
    numa = judge_host(Mode.D2H_PINNED, 12.0, 4, 16, 4, 16)
    assert numa.verdict is Verdict.BELOW and "NUMA" in numa.note
    x8 = judge_host(Mode.H2D_PINNED, 12.5, 4, 8, 4, 8)
    assert x8.verdict is Verdict.HEALTHY  # x8 halves the expectation
    pageable = judge_host(Mode.H2D_PAGEABLE, 12.0, 4, 16, 4, 16, pinned_gbps=24.0)
    assert pageable.verdict is Verdict.NO_REFERENCE and pageable.note == "50% of pinned"
    assert judge_host(Mode.H2D_PINNED, 10.0, None, None, None, None).verdict is Verdict.NO_REFERENCE


def test_d2d_verdicts() -> None:
    assert judge_d2d(1300.0, "NVIDIA H100 80GB HBM3").verdict is Verdict.HEALTHY
    assert judge_d2d(700.0, "NVIDIA H100 80GB HBM3").verdict is Verdict.BELOW
    assert judge_d2d(360.0, "Tesla V100-SXM2-16GB").verdict is Verdict.HEALTHY
    assert judge_d2d(100.0, "Some GPU").verdict is Verdict.NO_REFERENCE


class FakeBackend:
    """Copies that 'take' nbytes / rate seconds; records when the warm-up ends."""

    def __init__(self, rates: dict[Mode, float], devices: int = 2, verified: bool = True) -> None:
        self.rates, self.devices, self.verified = rates, devices, verified
        self.warmed: list[int] = []

    def device_count(self) -> int:
        return self.devices

    def device_uuid(self, device: int) -> str:
        return f"uuid-{device}"

    def can_access_peer(self, device: int, peer: int) -> bool:
        return True

    def measure(
        self, mode: Mode, device: int, peer: int | None, nbytes: int, plan: Plan, after_warmup: Callable[[], None]
    ) -> tuple[list[float], bool]:
        after_warmup()
        rate = self.rates.get(mode, 10 * GB)
        return [nbytes / rate * f for f in (1.0, 1.02, 0.98)][: plan.samples], self.verified


def test_loop_runs_every_task_and_counts_bidirectional_bytes_twice() -> None:
    plan = make_plan("h2d_pinned_async,d2d,peer,peer_bidir", "64MiB", False, 4, 3, None)
    backend = FakeBackend({Mode.PEER_BIDIR: 40 * GB})
    steps: list[str] = []
    warmed: list[int] = []
    results = engine.run(plan, backend, steps.append, warmed.append)
    # h2d ×2 GPUs, d2d ×2, peer 0→1 and 1→0, bidir 0↔1 once
    assert [(m.mode, m.device, m.peer) for m in results] == [
        (Mode.H2D_PINNED_ASYNC, 0, None),
        (Mode.H2D_PINNED_ASYNC, 1, None),
        (Mode.D2D, 0, None),
        (Mode.D2D, 1, None),
        (Mode.PEER, 0, 1),
        (Mode.PEER, 1, 0),
        (Mode.PEER_BIDIR, 0, 1),
    ]
    bidir = results[-1]
    assert bidir.counted_bytes == 2 * (64 << 20)
    assert bidir.bandwidth.median == pytest.approx(80 * GB)  # both directions together
    assert len(steps) == len(results) and warmed == [0, 1, 0, 1, 0, 1, 0]


def _rows(rates: dict[Mode, float], link: tuple[int, int] | None, verified: bool = True) -> list[bench_view.Row]:
    machine = load("h100x8-healthy")[0]
    plan = make_plan("h2d_pinned,h2d_pageable,h2d_pinned_async,d2d", None, False, 4, 3, (0,))
    results = engine.run(plan, FakeBackend(rates, 1, verified), lambda s: None, lambda d: None)
    return report.rows(results, {0: machine.gpus[3]}, {0: link})


def test_report_judges_against_the_link_read_after_warm_up() -> None:
    rows = _rows(
        {Mode.H2D_PINNED: 52 * GB, Mode.H2D_PAGEABLE: 26 * GB, Mode.H2D_PINNED_ASYNC: 53 * GB, Mode.D2D: 1300 * GB},
        (5, 16),
    )
    by_mode = {r.measurement.mode: r for r in rows}
    assert by_mode[Mode.H2D_PINNED].judgement.verdict is Verdict.HEALTHY
    assert by_mode[Mode.H2D_PAGEABLE].judgement.note == "50% of pinned"
    assert by_mode[Mode.D2D].judgement.verdict is Verdict.HEALTHY
    assert by_mode[Mode.H2D_PINNED].gpu_label == "GPU 3"
    slow = _rows({Mode.H2D_PINNED: 12 * GB, Mode.H2D_PINNED_ASYNC: 12 * GB}, (3, 16))
    judged = {r.measurement.mode: r for r in slow}[Mode.H2D_PINNED_ASYNC]
    assert judged.judgement.verdict is Verdict.BELOW and "Gen3 x16 (capable of Gen5 x16)" in judged.judgement.note
    assert judged.link == "Gen3 x16 (max Gen5 x16)"


def test_rendering_table_chart_json_csv() -> None:
    from io import StringIO

    from rich.console import Console

    rows = _rows({Mode.H2D_PINNED_ASYNC: 53 * GB}, (5, 16))
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(bench_view.render(rows, ["host memory on NUMA node 0 (process pinned to its CPUs)"], False, True))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "h2d_pinned_async" in text and "53.0" in text and "healthy" in text
    assert "GB/s = 10^9 B/s" in text and "d2d: bytes copied, counted once" in text
    data = bench_view.to_json(rows, [], {})
    assert data["schema"] == "gpudiag.bench-transfer/1"
    assert data["results"][2]["median_bytes_per_s"] == pytest.approx(53e9)
    csv_text = bench_view.to_csv(rows)
    assert csv_text.splitlines()[0].startswith("mode,gpu,peer,size_bytes,median_gbps")
    assert len(csv_text.splitlines()) == 1 + len(rows)
    bad = _rows({}, (5, 16), verified=False)
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(bench_view.table(bad, False))
    assert "DATA MISMATCH" in console.file.getvalue()  # type: ignore[attr-defined]


def test_sweep_chart_scales_bars() -> None:
    machine = load("h100x8-healthy")[0]
    plan = make_plan("d2d", "4KiB,1MiB,1GiB", False, 1, 1, (0,))

    class Saturating(FakeBackend):
        def measure(
            self, mode: Mode, device: int, peer: int | None, nbytes: int, plan: Plan, after_warmup: Callable[[], None]
        ) -> tuple[list[float], bool]:
            rate = min(1300 * GB, nbytes * 1e3)  # small copies are latency-bound
            return [nbytes / rate], True

    results = engine.run(plan, Saturating({}, 1), lambda s: None, lambda d: None)
    from io import StringIO

    from rich.console import Console

    console = Console(file=StringIO(), width=120, color_system=None)
    console.print(bench_view.chart(report.rows(results, {0: machine.gpus[0]}, {0: None})))
    lines = [line for line in console.file.getvalue().splitlines() if "GB/s" in line]  # type: ignore[attr-defined]
    assert len(lines) == 3 and lines[0].count("█") < lines[-1].count("█")


def test_numa_cpu_list_parsing(tmp_path: Path) -> None:
    (tmp_path / "node1").mkdir()
    (tmp_path / "node1" / "cpulist").write_text("0-3,8,10-11\n")
    assert engine.node_cpus(1, tmp_path) == {0, 1, 2, 3, 8, 10, 11}
    with engine.pinned_to_node(None) as note:
        assert "unknown" in note


def test_cpu_only_torch_is_reported_with_exit_3(cli: Cli) -> None:
    pytest.importorskip("torch")
    from gpudiag.probe.torch_static import torch_build

    build = torch_build().value
    if build is None or build.cuda is not None:
        pytest.skip("not a CPU-only torch")
    code, out, err = cli("bench-transfer")
    assert code == ExitCode.NO_CUDA_DEVICE
    assert err.strip() == f"gpudiag: no usable CUDA device: torch {build.version} is a CPU-only build"
    assert out == ""


def test_missing_torch_is_reported_with_exit_3(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    code, _, err = cli("bench-transfer")
    assert code == ExitCode.NO_CUDA_DEVICE and "torch is not installed" in err


def test_no_driver_is_reported_with_exit_3(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.model import Reading, TorchBuild

    cuda_build = Reading.of(TorchBuild("2.5.1+cu124", "12.4", None, "/x"))
    monkeypatch.setattr("gpudiag.probe.torch_static.torch_build", lambda: cuda_build)
    code, _, err = cli("bench-transfer")
    if code == ExitCode.OK:
        pytest.skip("this machine has a GPU")
    assert code == ExitCode.NO_CUDA_DEVICE
    assert "no usable CUDA device: NVML" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "bogus"], "unknown mode"),
        (["--sizes", "1GX"], "invalid size unit"),
        (["--iters", "0"], "--iters must be 1 or more"),
        (["--device", "a"], "use CUDA ordinals"),
        (["--json", "--csv"], "choose one of --json and --csv"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("bench-transfer", *args)
    assert code == ExitCode.USAGE and message in err


def test_replay_is_refused(cli: Cli) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "bench-transfer")
    assert code == ExitCode.USAGE and "cannot run on a replay" in err


@pytest.mark.gpu
def test_real_copies_are_plausible_and_verified() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    plan = make_plan("h2d_pinned_async,d2h_pinned_async,d2d", "64MiB", False, 8, 3, (0,))
    results = engine.run(plan, engine.TorchBackend({0: None}), lambda s: None, lambda d: None)
    for m in results:
        assert m.verified
        gbps = m.bandwidth.median / GB
        assert (1.0 < gbps < 200.0) if m.mode.is_host else (50.0 < gbps < 5000.0), (m.mode, gbps)
    assert json.dumps(bench_view.to_json(report.rows(results, {}, {}), [], {}))
