"""The link model and verdicts: PCIe limits and typical figures, "behaves like", memory classes."""

from __future__ import annotations

import pytest

from gpudiag.bench.link import (
    Link,
    Verdict,
    behaves_like,
    judge_d2d,
    judge_pageable,
    judge_peer,
    judge_pinned,
    memory_peak,
    nvlink_typical,
)
from gpudiag.bench.stats import GB
from gpudiag.replay.fixtures import example_names, load

MiB = 1 << 20


@pytest.mark.parametrize(
    ("link", "limit"),
    [(Link(3, 16), 15.75), (Link(4, 16), 31.5), (Link(5, 16), 63.0), (Link(4, 8), 15.75), (Link(2, 16), 8.0)],
)
def test_theoretical_limits_after_encoding(link: Link, limit: float) -> None:
    assert link.theoretical == pytest.approx(limit * GB, rel=2e-3)


def test_typical_figures_are_the_field_notes_and_scale_with_width() -> None:
    assert Link(3, 16).typical == pytest.approx((11.5 * GB, 13.2 * GB, 10.0 * GB))
    assert Link(4, 16).typical == pytest.approx((24.0 * GB, 26.5 * GB, 21.0 * GB))
    assert Link(5, 16).typical == pytest.approx((50.0 * GB, 57.5 * GB, 44.0 * GB))
    assert Link(5, 8).typical == pytest.approx((25.0 * GB, 28.75 * GB, 22.0 * GB))  # "halve for x8"
    gen2 = Link(2, 16).typical  # borrowed ratios: Gen3's share of its limit
    assert gen2 is not None and gen2[2] == pytest.approx(8.0 * GB * 10.0 / 15.754, rel=1e-3)
    assert Link(7, 16).typical is None and Link(7, 16).theoretical is None
    assert str(Link(4, 8)) == "Gen4 x8"


def test_behaves_like_names_the_fastest_consistent_link() -> None:
    gen5 = Link(5, 16)
    assert behaves_like(6.1 * GB, gen5) == Link(2, 16)  # retrained to Gen2 at full width
    assert behaves_like(12.0 * GB, gen5) == Link(3, 16)  # Gen3 x16 and Gen4 x8 are equally fast: full width
    assert behaves_like(12.0 * GB, gen5, current=Link(4, 8)) == Link(4, 8)  # NVML's reading breaks the tie
    assert behaves_like(25.0 * GB, gen5) == Link(4, 16)
    assert behaves_like(25.0 * GB, Link(4, 16)) == Link(4, 16)
    assert behaves_like(0.01 * GB, gen5) is None  # slower than any link
    assert behaves_like(12.0 * GB, Link(3, 8)) is None  # no link this GPU can train to explains it


def test_pinned_verdicts_against_the_maximum_link() -> None:
    healthy = judge_pinned(25.1 * GB, Link(4, 16), Link(4, 16))
    assert healthy.verdict is Verdict.HEALTHY and healthy.behaves_like is None
    assert healthy.expectation.typical == pytest.approx((24 * GB, 26.5 * GB))
    assert healthy.expectation.limit == pytest.approx(31.5 * GB, rel=2e-3)
    down = judge_pinned(6.4 * GB, Link(5, 16), Link(2, 16))
    assert down.verdict is Verdict.BELOW and down.behaves_like == Link(2, 16)
    x8 = judge_pinned(12.3 * GB, Link(4, 8), Link(4, 8))
    assert x8.verdict is Verdict.HEALTHY  # judged against the x8 maximum it reports
    assert judge_pinned(21.0 * GB, Link(4, 16), None).verdict is Verdict.HEALTHY  # the floor itself passes
    assert judge_pinned(20.9 * GB, Link(4, 16), None).verdict is Verdict.BELOW
    unknown = judge_pinned(10 * GB, None, None)
    assert unknown.verdict is Verdict.NOT_JUDGED and "not reported" in unknown.note


def test_pageable_is_shown_as_a_share_of_pinned_never_judged() -> None:
    ok = judge_pageable(12.0 * GB, 24.0 * GB)
    assert ok.verdict is Verdict.NOT_JUDGED and ok.note == "50% of pinned" and ok.expectation.floor is None
    h100 = judge_pageable(7.2 * GB, 53.7 * GB)  # the healthy H100 of the capture
    assert h100.verdict is Verdict.NOT_JUDGED and h100.note == "13% of pinned"
    alone = judge_pageable(9.0 * GB, None)
    assert alone.verdict is Verdict.NOT_JUDGED and alone.note == "host memcpy, not the link"


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 3350),
        ("NVIDIA H100 PCIe", 2000),
        ("NVIDIA H100 NVL", 3900),
        ("NVIDIA H200", 4800),
        ("NVIDIA A100-SXM4-40GB", 1555),
        ("NVIDIA A100-SXM4-80GB", 2039),
        ("NVIDIA A100 80GB PCIe", 1935),
        ("NVIDIA A100-PCIE-40GB", 1555),
        ("Tesla V100-SXM2-16GB", 900),
        ("Tesla V100S-PCIE-32GB", 1134),
        ("NVIDIA A10G", 600),
        ("NVIDIA L4", 300),
        ("NVIDIA L40S", 864),
        ("Tesla T4", 320),
        ("NVIDIA GeForce RTX 4090", 1008),
        ("NVIDIA RTX A6000", 768),
        ("NVIDIA GeForce GTX 1050", 112),
    ],
)
def test_memory_classes_by_name(name: str, peak: float) -> None:
    assert memory_peak(name) == peak * GB


def test_every_example_gpu_name_is_matched_to_the_right_class_or_none() -> None:
    for example in example_names():
        for gpu in load(example)[0].gpus:
            name = gpu.name.value or ""
            found = memory_peak(name)
            assert found is None or found >= 100 * GB, (example, name)
            if "A100" in name:
                assert found is not None and found > 1500 * GB
            if "A10G" in name:
                assert found == 600 * GB  # not mistaken for an A100


def test_d2d_is_judged_against_the_memory_class_counted_once() -> None:
    h100 = judge_d2d(1300 * GB, "NVIDIA H100 80GB HBM3", 512 * MiB, 50 * MiB)
    assert h100.verdict is Verdict.HEALTHY
    assert h100.expectation.typical == pytest.approx((0.37 * 3350 * GB, 0.435 * 3350 * GB))
    v100 = judge_d2d(360 * GB, "Tesla V100-SXM2-16GB", 256 * MiB, 6 * MiB)
    low, high = v100.expectation.typical or (0, 0)
    assert v100.verdict is Verdict.HEALTHY and 332 * GB < low < 336 * GB and 390 * GB < high < 392 * GB  # 670-780 / 2
    assert judge_d2d(700 * GB, "NVIDIA H100 80GB HBM3", 512 * MiB, 50 * MiB).verdict is Verdict.BELOW
    assert judge_d2d(800 * GB, "NVIDIA H100 PCIe", 512 * MiB, 50 * MiB).verdict is Verdict.HEALTHY  # its own class
    cached = judge_d2d(5000 * GB, "NVIDIA H100 80GB HBM3", 64 * MiB, 50 * MiB)
    assert cached.verdict is Verdict.NOT_JUDGED and "L2" in cached.note
    assert judge_d2d(100 * GB, "Some GPU", 512 * MiB, 0).verdict is Verdict.NOT_JUDGED


def test_peer_verdicts() -> None:
    assert nvlink_typical("NVIDIA H100 80GB HBM3") == (365 * GB, 397 * GB)
    assert nvlink_typical("NVIDIA H100 PCIe") is None and nvlink_typical("NVIDIA H200 NVL") is None
    assert judge_peer(380 * GB, "NVIDIA H100 80GB HBM3", True, Link(5, 16)).verdict is Verdict.HEALTHY
    slow = judge_peer(40 * GB, "NVIDIA H100 80GB HBM3", True, Link(5, 16))
    assert slow.verdict is Verdict.BELOW and slow.note.startswith("PCIe speed")
    staged = judge_peer(9 * GB, "NVIDIA A100 80GB PCIe", False, Link(4, 16))
    assert staged.verdict is Verdict.NOT_JUDGED and "staged through host" in staged.note
    assert "NVLink" in judge_peer(100 * GB, "NVIDIA RTX A6000", True, Link(4, 16)).note
    assert judge_peer(20 * GB, "NVIDIA RTX A6000", True, Link(4, 16)).verdict is Verdict.NOT_JUDGED
