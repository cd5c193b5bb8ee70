"""bench-transfer on a real GPU: the torch primitives copy, time and verify for real.

Marked `gpu`; each test also skips itself when torch cannot use CUDA.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gpudiag.bench import engine
from gpudiag.bench.placement import nodes_with_cpus
from gpudiag.bench.plan import MiB, Mode, make_plan, tasks
from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli

pytestmark = pytest.mark.gpu


def _cuda_devices() -> int:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot use CUDA here")
    return int(torch.cuda.device_count())


def _run(modes: str, size: str, devices: str) -> list[dict[str, Any]]:
    from gpudiag.bench.torch_prims import TorchPrimitives

    prims = TorchPrimitives()
    plan = make_plan(modes, size, False, 8, 3, devices)
    assert plan.devices is not None
    infos = prims.devices(list(plan.devices))
    events: list[dict[str, Any]] = []
    engine.run_tasks(
        prims,
        plan,
        tasks(plan, infos),
        {d.ordinal: d for d in infos},
        {d.ordinal: None for d in infos},
        nodes_with_cpus(),
        events.append,
    )
    return [e for e in events if e["kind"] == "result"]


def test_real_copies_are_plausible_and_verified() -> None:
    _cuda_devices()
    results = _run("host,d2d", "64MiB", "0")
    assert len(results) == 7
    for mode, result in zip([m for m in Mode if not m.is_peer], results, strict=True):
        assert "error" not in result, result
        assert result["verified"] is True, mode
        rate = 64 * MiB / min(result["seconds_per_copy"]) / 1e9
        low, high = (0.3, 80.0) if mode.is_host else (50.0, 10_000.0)
        assert low < rate < high, (mode, rate)
        if mode.timed_with_events:
            assert result["spin_short"] == 0, mode  # the spin kernel covered every enqueue


def test_verification_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    _cuda_devices()
    from gpudiag.bench import torch_prims

    monkeypatch.setattr(torch_prims.TorchCopy, "run", lambda self: None)  # copies that copy nothing
    results = _run("h2d_pinned_async,d2d", "16MiB", "0")
    assert [r["verified"] for r in results] == [False, False]


def test_bidirectional_peer_copies_overlap() -> None:
    if _cuda_devices() < 2:
        pytest.skip("needs two GPUs")
    import torch

    if not torch.cuda.can_device_access_peer(0, 1):
        pytest.skip("no peer access between cuda:0 and cuda:1")
    uni, _, bidir = _run("peer,peer_bidir", "256MiB", "0,1")
    assert uni["verified"] and bidir["verified"]
    one_way = 256 * MiB / min(uni["seconds_per_copy"])
    both = 2 * 256 * MiB / min(bidir["seconds_per_copy"])
    assert both > 1.3 * one_way  # the two directions ran at the same time, not one after the other


def test_the_default_run_takes_under_15_seconds(cli: Cli) -> None:
    count = _cuda_devices()
    args = ["bench-transfer", "--json"] + ([] if count == 1 else ["--device", "0"])
    start = time.perf_counter()
    code, out, err = cli(*args)
    seconds = time.perf_counter() - start
    assert code in (ExitCode.OK, ExitCode.FAILED), err
    data = json.loads(out)
    assert data["complete"] and all(r["verified"] for r in data["results"]), data["findings"]
    assert seconds < 15.0, f"default run took {seconds:.1f} s"
