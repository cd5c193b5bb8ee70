"""bench-transfer planning: options, plateau sizes, the task list, memory fit, time budgets."""

from __future__ import annotations

import pytest

from gpudiag.bench.plan import (
    ALL_MODES,
    PLATEAU_SIZE,
    SWEEP_SIZES,
    GiB,
    MiB,
    Mode,
    Plan,
    Task,
    default_size,
    does_not_fit,
    make_plan,
    overall_budget_seconds,
    parse_devices,
    parse_modes,
    parse_sizes,
    size_text,
    task_budget_seconds,
    tasks,
    unknown_devices,
)
from gpudiag.errors import UsageError
from tests.test_bench_fakes import device


def test_modes_aliases_keep_a_stable_order() -> None:
    assert parse_modes(None) == ALL_MODES
    assert parse_modes("d2d,h2d") == (Mode.H2D_PAGEABLE, Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC, Mode.D2D)
    assert parse_modes("pinned, h2d_pinned") == (
        Mode.H2D_PINNED,
        Mode.H2D_PINNED_ASYNC,
        Mode.D2H_PINNED,
        Mode.D2H_PINNED_ASYNC,
    )
    assert parse_modes("async,PEER-BIDIR") == (Mode.H2D_PINNED_ASYNC, Mode.D2H_PINNED_ASYNC, Mode.PEER_BIDIR)
    assert parse_modes("host") == tuple(m for m in Mode if m.is_host)
    with pytest.raises(UsageError, match="unknown mode 'h2x'; known: h2d_pageable"):
        parse_modes("h2x")
    with pytest.raises(UsageError, match="at least one mode"):
        parse_modes(" , ")


def test_mode_properties_say_how_each_is_timed_and_counted() -> None:
    assert [m for m in Mode if m.timed_with_events] == [
        Mode.H2D_PINNED_ASYNC,
        Mode.D2H_PINNED_ASYNC,
        Mode.D2D,
        Mode.PEER,
        Mode.PEER_BIDIR,
    ]
    assert Mode.H2D_PAGEABLE.timing == "wall_clock_per_call" and Mode.D2D.timing == "cuda_events"
    assert [m.byte_factor for m in Mode].count(2) == 1 and Mode.PEER_BIDIR.byte_factor == 2
    assert "counted once" in Mode.D2D.convention and "sum of both" in Mode.PEER_BIDIR.convention
    assert {m.direction for m in Mode} == {"h2d", "d2h", "d2d", "peer"}


def test_sizes() -> None:
    assert parse_sizes(None, False) is None  # the plateau size per mode and GPU
    assert parse_sizes("1GiB, 64MiB,64MiB", False) == (64 * MiB, GiB)
    assert parse_sizes("1001B", False) == (1000,)  # whole int32 elements
    assert parse_sizes(None, True) == SWEEP_SIZES
    assert SWEEP_SIZES[0] == 4096 and SWEEP_SIZES[-1] == GiB and len(SWEEP_SIZES) == 10
    for bad, message in (("20GX", "invalid size unit"), ("2B", "too small"), (",", "at least one size")):
        with pytest.raises(UsageError, match=message):
            parse_sizes(bad, False)
    with pytest.raises(UsageError, match="choose one of --sizes and --sweep"):
        parse_sizes("1GiB", True)


def test_devices_and_counts() -> None:
    assert parse_devices(None) is None
    assert parse_devices("1, cuda:0,1") == (1, 0)
    for bad in ("a", "-1", ","):
        with pytest.raises(UsageError, match="CUDA ordinals"):
            parse_devices(bad)
    with pytest.raises(UsageError, match="--iters must be 1 or more"):
        make_plan(None, None, False, 0, 3, None)
    with pytest.raises(UsageError, match="--samples must be 1 or more"):
        make_plan(None, None, False, 16, 0, None)
    plan = make_plan("d2d", None, True, 16, 3, "0")
    assert plan.sweep and plan.warmup == 4 and Plan.from_data(plan.to_data()) == plan


def test_default_d2d_size_clears_eight_times_the_l2_and_fits() -> None:
    assert default_size(Mode.H2D_PINNED, device(0, l2=50 * MiB)) == PLATEAU_SIZE
    assert default_size(Mode.D2D, device(0, l2=6 * MiB)) == PLATEAU_SIZE  # V100: 8 x 6 MiB < 256 MiB
    assert default_size(Mode.D2D, device(0, l2=50 * MiB)) == 512 * MiB  # H100: 8 x 50 MiB = 400 MiB
    assert default_size(Mode.D2D, device(0, l2=126 * MiB)) == GiB
    small = device(0, l2=126 * MiB).__class__(0, "small", "u", None, 126 * MiB, 4 * GiB, 1 * GiB)
    assert default_size(Mode.D2D, small) == 256 * MiB  # 2 x 512 MiB would not fit in 1 GiB free


def test_tasks_per_gpu_then_peer_pairs() -> None:
    two = [device(0), device(1)]
    plan = make_plan("h2d_pinned,d2d,peer,peer_bidir", None, False, 16, 3, None)
    listed = [(t.mode, t.device, t.peer, t.nbytes) for t in tasks(plan, two)]
    assert listed == [
        (Mode.H2D_PINNED, 0, None, PLATEAU_SIZE),
        (Mode.D2D, 0, None, 512 * MiB),
        (Mode.H2D_PINNED, 1, None, PLATEAU_SIZE),
        (Mode.D2D, 1, None, 512 * MiB),
        (Mode.PEER, 0, 1, PLATEAU_SIZE),
        (Mode.PEER, 1, 0, PLATEAU_SIZE),
        (Mode.PEER_BIDIR, 0, 1, PLATEAU_SIZE),  # each unordered pair once
    ]
    assert [t.index for t in tasks(plan, two)] == list(range(7))
    only_one = make_plan("peer,h2d_pinned", "64MiB,1GiB", False, 16, 3, "1")
    assert [(t.device, t.nbytes) for t in tasks(only_one, two)] == [(1, 64 * MiB), (1, GiB)]  # no peer alone
    assert Task(0, Mode.PEER_BIDIR, 0, 1, 64 * MiB).counted_bytes == 128 * MiB
    assert Task(0, Mode.PEER, 2, 3, 4096).label() == "peer cuda:2->cuda:3 4KiB"
    assert size_text(1000) == "1000B" and size_text(3 * GiB) == "3GiB"


def test_memory_fit_and_unknown_devices() -> None:
    devices = {0: device(0), 1: device(1).__class__(1, "n", "u", None, 0, 8 * GiB, 3 * GiB)}
    assert does_not_fit(Task(0, Mode.D2D, 0, None, GiB), devices) == ""
    why = does_not_fit(Task(0, Mode.PEER_BIDIR, 0, 1, 2 * GiB), devices)
    assert why.startswith("needs 4096 MiB on cuda:1, which has 3072 MiB free")
    assert unknown_devices(make_plan(None, None, False, 1, 1, "0,3"), 2).startswith("--device: cuda:3 not visible")
    assert unknown_devices(make_plan(None, None, False, 1, 1, "0,1"), 2) == ""


def test_time_budgets_grow_with_the_work() -> None:
    plan = make_plan(None, None, False, 16, 3, None)
    small = task_budget_seconds(plan, Task(0, Mode.H2D_PAGEABLE, 0, None, 4096))
    big = task_budget_seconds(plan, Task(0, Mode.H2D_PAGEABLE, 0, None, GiB))
    assert 30 <= small < 31 and big > 500  # 54 copies of 1 GiB at the 0.1 GB/s hang floor
    assert task_budget_seconds(plan, Task(0, Mode.D2D, 0, None, GiB)) < big
    assert overall_budget_seconds(plan, 8) > overall_budget_seconds(plan, 1) > 120
    assert overall_budget_seconds(make_plan(None, None, False, 16, 3, "0"), 8) == overall_budget_seconds(plan, 1)
