"""The deep diagnostics on real GPUs: the hardware acceptance path of `check --level 2-4`.

Marked `gpu` (skipped where NVML sees no GPU); each test also skips itself when torch cannot use
CUDA. Run them with ``python -m pytest -m gpu tests/test_deep_gpu.py -s``: each prints what it
measured and how long it took, the figures docs/commands/check.md's level times are estimates of.
They test the GPUs as they are: on a busy GPU the memory test covers less, and the command refuses.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpudiag.checks import Facts, Options, Status, rules
from gpudiag.checks.deep import allreduce, levels, links, memtest, stress
from gpudiag.checks.deep.collect import Context
from gpudiag.checks.deep.facts import DeepFacts
from gpudiag.checks.deep.sampler import Sampler
from gpudiag.exitcodes import ExitCode
from gpudiag.model import Reading, Reason
from gpudiag.probe.collect import open_source
from tests import acceptance
from tests.conftest import Cli
from tests.test_check_cli import by_id, check_json

pytestmark = pytest.mark.gpu


def _cuda_devices() -> int:
    torch = pytest.importorskip("torch")
    if torch.version.cuda is None or not torch.cuda.is_available():
        pytest.skip("torch cannot use CUDA here")
    return int(torch.cuda.device_count())


def _context(budget: float = 900.0) -> Context:
    source = open_source()
    machine = source.read()
    holder: list[Context] = []
    sampler = Sampler(lambda groups: holder[0].read(groups), source.session.watch_xids())
    ctx = Context(source, machine, None, time.monotonic() + budget, budget, {}, sampler)
    holder.append(ctx)
    return ctx


def _judge(ctx: Context, check_id: str, **phases: Any) -> list[tuple[str, Status, str]]:
    facts = Facts(
        ctx.machine,
        Reading.missing(Reason.UNAVAILABLE),
        None,
        deep=DeepFacts(4, xids=tuple(ctx.sampler.xids), **phases),
    )
    found = rules.run(facts, Options(), only=(check_id,), level=4)
    for r in found:
        print(f"{r.status.value} {r.id} {r.target} {r.finding}")
    return [(r.target, r.status, r.finding) for r in found]


def test_the_memory_test_on_every_gpu() -> None:
    count = _cuda_devices()
    ctx = _context()
    begun = time.monotonic()
    test, why = memtest.run(ctx, levels.LEVELS[2], 0.0)
    print(f"memory test (level 2) on {count} GPU(s): {time.monotonic() - begun:.1f} s")
    assert test is not None, why
    assert len(test.gpus) == count and ctx.notes == []
    for g in test.gpus:
        assert g.ok, g.error
        assert g.mismatches == 0, g.patterns
        assert g.tested_bytes > 0 and g.gbps is not None and g.gbps > 10
    assert all(s is not Status.FAIL for _, s, _ in _judge(ctx, "mem.test", memtest=test))


def test_the_stress_on_every_gpu_with_nvml_beside_it() -> None:
    count = _cuda_devices()
    ctx = _context()
    ctx.sampler.start()
    try:
        test, why = stress.run(ctx, 30.0)
    finally:
        ctx.sampler.stop()
    assert test is not None, why
    assert len(test.gpus) == count
    for g in test.gpus:
        assert g.ok, g.error
        assert g.result_errors == 0 and g.checks >= 1
        assert g.tflops_sustained is not None and g.tflops_sustained > 1.0
        assert g.samples is not None and g.samples.samples >= 10
    _judge(ctx, "stress.gemm", stress=test)


def test_the_copies_through_bench_transfers_engine() -> None:
    count = _cuda_devices()
    ctx = _context()
    begun = time.monotonic()
    found, why = links.run(ctx, pcie=True, peer=count >= 2, d2d=True)
    print(f"copies on {count} GPU(s): {time.monotonic() - begun:.1f} s")
    assert found is not None, why
    assert found.failure == "" and found.pcie is not None and found.d2d is not None
    for gpu in found.pcie:
        for c in gpu.copies:
            assert c.error == "" and c.verified is True and c.gbps is not None and c.gbps > 1.0, c
        assert set(gpu.latency_us) == {"h2d", "d2h"}
    for pair in found.peers or ():
        assert pair.error == "" and pair.verified is True and pair.gbps, pair
    _judge(ctx, "link.pcie", links=found)
    _judge(ctx, "link.peer", links=found)
    _judge(ctx, "mem.bandwidth", links=found)


def test_an_nccl_all_reduce_across_every_gpu() -> None:
    count = _cuda_devices()
    if count < 2:
        pytest.skip("one GPU: nothing to all-reduce across")
    ctx = _context()
    torch = pytest.importorskip("torch")
    indices = [ctx.nvml_index_of(str(torch.cuda.get_device_properties(i).uuid)) for i in range(count)]
    found, why = allreduce.run(ctx, indices)
    assert found is not None, why
    assert found.error == "" and found.correct is True and found.largest is not None
    assert found.largest.busbw_gbps(found.ranks) > 1.0
    _judge(ctx, "link.nccl", allreduce=found)


def test_check_level_2_end_to_end(cli: Cli) -> None:
    """`check --level 2` as a user runs it: the acceptance's own run when it started these tests (one
    run of level 2, not two), else one here."""
    count = _cuda_devices()
    shared = acceptance.shared_level_2()
    if shared is None:
        begun = time.monotonic()
        code, data = check_json(cli, "check", "--level", "2", "--allow-processes")
        seconds = time.monotonic() - begun
    else:
        code, data, seconds = shared
    print(f"check --level 2 on {count} GPU(s): {seconds:.0f} s, exit {code}")
    if code == ExitCode.GPU_BUSY:
        pytest.skip("other processes use the GPUs")
    assert data["could_not_run"] == []
    checks = by_id(data)
    for check_id in ("mem.test", "link.pcie", "link.peer", "link.nccl"):
        statuses = {c["status"] for c in checks[check_id]}
        if count < 2 and check_id in ("link.peer", "link.nccl"):
            assert statuses == {"SKIP"}
        else:
            assert "SKIP" not in statuses, checks[check_id]
    assert data["diagnostics"]["level"] == 2
    assert seconds < 600  # the default budget
