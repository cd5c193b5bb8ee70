"""What a link should deliver, and a verdict on what it did. Rates are bytes per second.

PCIe (the figures docs/commands/bench-transfer.md tables): per-lane rates after encoding
(Gen1/2 8b/10b, Gen3-5 128b/130b, Gen6 FLIT 242/256), so x16 allows Gen3 15.75, Gen4 31.5,
Gen5 63.0 GB/s. Pinned copies of large buffers on healthy systems reach Gen3 11.5-13.2 (below
expected under 10), Gen4 24-26.5 (under 21), Gen5 50-57.5 (under 44); narrower links scale with
width ("halve for x8"). Gen1/2 and Gen6 have no published figures: they take the Gen3 and Gen5
ratios of typical to theoretical (our choice). Pageable copies reach about 40-75 % of pinned.

Within one GPU: healthy copies reach 74-87 % of the memory's peak counting read + write,
so 37-43.5 % of the peak counting bytes once, as we do (typical: V100 670-780,
A100-40GB 1150-1320, H100 SXM 2470-2900 GB/s counted twice). Below 85 % of the typical
range's low end is "below expected" (our choice). Peak bandwidths are NVIDIA's datasheet
figures. NVLink per direction: A100 SXM 265-276, H100 SXM 365-397 GB/s (H200 SXM has the
same NVLink 4 as H100: taken to be the same).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

GB = 1e9
LANE_RATE = {1: 0.25e9, 2: 0.5e9, 3: 8e9 / 8 * 128 / 130, 4: 16e9 / 8 * 128 / 130, 5: 32e9 / 8 * 128 / 130}
LANE_RATE[6] = 64e9 / 8 * 242 / 256
WIDTHS = (1, 2, 4, 8, 16)
# x16, pinned, large buffers: (typical low, typical high, below-expected floor), bytes/s.
TYPICAL_X16 = {
    3: (11.5e9, 13.2e9, 10.0e9),
    4: (24.0e9, 26.5e9, 21.0e9),
    5: (50.0e9, 57.5e9, 44.0e9),
}
_RATIO_FROM = {1: 3, 2: 3, 6: 5}  # generations without figures borrow these ratios
D2D_SHARE = (0.37, 0.435)  # of the memory's peak, bytes counted once
D2D_FLOOR = 0.85  # of the typical low
PEER_FLOOR = 0.85

# Peak memory bandwidth, bytes/s, by NVML/torch device name (first match wins).
MEMORY_PEAK: tuple[tuple[str, float], ...] = (
    (r"h100.*nvl", 3900e9),
    (r"h100.*pcie", 2000e9),
    (r"h100", 3350e9),  # SXM5: "NVIDIA H100 80GB HBM3"
    (r"h200", 4800e9),
    (r"b200", 8000e9),
    (r"a100.*(80gb.*pcie|pcie.*80gb)", 1935e9),
    (r"a100.*80gb", 2039e9),  # SXM4-80GB
    (r"a100", 1555e9),  # 40 GB, SXM4 and PCIe
    (r"v100s", 1134e9),
    (r"v100", 900e9),
    (r"p100.*12gb", 549e9),
    (r"p100", 732e9),
    (r"\ba10g?\b", 600e9),
    (r"\ba30\b", 933e9),
    (r"\ba40\b", 696e9),
    (r"\bl40s?\b", 864e9),
    (r"\bl4\b", 300e9),
    (r"\bt4\b", 320e9),
    (r"rtx 4090", 1008e9),
    (r"rtx 3090 ti", 1008e9),
    (r"rtx 3090", 936e9),
    (r"rtx 6000 ada", 960e9),
    (r"rtx a6000", 768e9),
    (r"quadro rtx 4000", 416e9),
    (r"gtx 1050", 112e9),
)
# NVLink, one direction between two GPUs of an HGX board: (typical low, high), bytes/s.
NVLINK_PER_DIRECTION: tuple[tuple[str, tuple[float, float]], ...] = (
    (r"h100.*(hbm3|sxm)", (365e9, 397e9)),
    (r"h200(?!.*nvl)", (365e9, 397e9)),
    (r"a100-sxm", (265e9, 276e9)),
)


class Verdict(str, enum.Enum):
    HEALTHY = "healthy"
    BELOW = "below_expected"
    NOT_JUDGED = "not_judged"

    @property
    def label(self) -> str:
        return self.value.replace("_", " ")


@dataclass(frozen=True, order=True)
class Link:
    """A PCIe link configuration."""

    gen: int
    width: int

    def __str__(self) -> str:
        return f"Gen{self.gen} x{self.width}"

    @property
    def theoretical(self) -> float | None:
        lane = LANE_RATE.get(self.gen)
        return lane * self.width if lane else None

    @property
    def typical(self) -> tuple[float, float, float] | None:
        """(low, high, floor) for pinned copies of large buffers: the x16 figures' share of
        the theoretical limit, applied to this link."""
        theory = self.theoretical
        if theory is None:
            return None
        ref = _RATIO_FROM.get(self.gen, self.gen)
        ref_theory = LANE_RATE[ref] * 16
        low, high, floor = (value / ref_theory * theory for value in TYPICAL_X16[ref])
        return (low, high, floor)


@dataclass(frozen=True)
class Expectation:
    limit: float | None  # theoretical, bytes/s
    typical: tuple[float, float] | None
    floor: float | None  # below this: below expected


NONE = Expectation(None, None, None)


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    expectation: Expectation
    behaves_like: Link | None = None
    note: str = ""  # why not judged, or a share ("48% of pinned")


def behaves_like(rate: float, best: Link, current: Link | None = None) -> Link | None:
    """The fastest link on which this figure would be healthy (at or above the floor,
    not above the theoretical limit), no faster than ``best``. Among equally fast links,
    the one NVML reports under load wins, then the full width: a GPU that retrained to a
    lower generation at full width is the common failure."""
    candidates: list[tuple[float, int, int, Link]] = []
    for gen in LANE_RATE:
        for width in WIDTHS:
            link = Link(gen, width)
            typical, theory = link.typical, link.theoretical
            if gen > best.gen or width > best.width or typical is None or theory is None:
                continue
            if typical[2] <= rate <= theory * 1.02:
                candidates.append((round(theory / 1e8), int(link == current), int(width == best.width), link))
    return max(candidates, key=lambda c: c[:3])[3] if candidates else None


def host_expectation(link: Link | None) -> Expectation:
    """What pinned host copies should reach on this link."""
    if link is None or link.typical is None:
        return NONE
    low, high, floor = link.typical
    return Expectation(link.theoretical, (low, high), floor)


def judge_pinned(rate: float, max_link: Link | None, current: Link | None) -> Judgement:
    """A pinned host<->device figure against the link's maximum (the lower of GPU and slot).
    The link read under load does not lower the bar: it explains a shortfall."""
    expectation = host_expectation(max_link)
    if max_link is None or expectation.floor is None:
        return Judgement(Verdict.NOT_JUDGED, expectation, note="PCIe link not reported by NVML")
    if rate >= expectation.floor:
        return Judgement(Verdict.HEALTHY, expectation)
    return Judgement(Verdict.BELOW, expectation, behaves_like(rate, max_link, current))


def judge_pageable(rate: float, pinned_rate: float | None) -> Judgement:
    """Pageable copies stage through a pinned bounce buffer: they measure the host's memcpy, not
    the link, so they are shown as a share of the pinned figure of the same GPU, direction and
    size, never judged (a healthy H100 gave 13 % and 22 %; 40-75 % is common on older hosts)."""
    if pinned_rate:
        return Judgement(Verdict.NOT_JUDGED, NONE, note=f"{100 * rate / pinned_rate:.0f}% of pinned")
    return Judgement(Verdict.NOT_JUDGED, NONE, note="host memcpy, not the link")


def memory_peak(name: str) -> float | None:
    lowered = name.lower()
    for pattern, peak in MEMORY_PEAK:
        if re.search(pattern, lowered):
            return peak
    return None


def judge_d2d(rate: float, name: str, nbytes: int, l2_bytes: int) -> Judgement:
    peak = memory_peak(name)
    if peak is None:
        return Judgement(Verdict.NOT_JUDGED, NONE, note=f"no memory figure for {name or 'this GPU'}")
    low, high = D2D_SHARE[0] * peak, D2D_SHARE[1] * peak
    expectation = Expectation(peak / 2, (low, high), D2D_FLOOR * low)
    if l2_bytes and nbytes < 8 * l2_bytes:
        return Judgement(Verdict.NOT_JUDGED, expectation, note="under 8x the L2 cache: inflated by the cache")
    if rate >= D2D_FLOOR * low:
        return Judgement(Verdict.HEALTHY, expectation)
    return Judgement(Verdict.BELOW, expectation)


def nvlink_typical(name: str) -> tuple[float, float] | None:
    lowered = name.lower()
    for pattern, typical in NVLINK_PER_DIRECTION:
        if re.search(pattern, lowered):
            return typical
    return None


def judge_peer(rate_per_direction: float, name: str, peer_access: bool | None, max_link: Link | None) -> Judgement:
    """A peer figure (per direction) against NVLink where the GPU class has it on its board,
    otherwise described by the path it is consistent with."""
    pcie = max_link.theoretical if max_link is not None else None
    if peer_access is False:
        return Judgement(Verdict.NOT_JUDGED, NONE, note="no peer access: staged through host memory")
    typical = nvlink_typical(name)
    if typical is None:
        if pcie is not None and rate_per_direction > pcie:
            return Judgement(Verdict.NOT_JUDGED, NONE, note="faster than PCIe allows: NVLink")
        return Judgement(Verdict.NOT_JUDGED, NONE, note="no reference for this GPU's peer path")
    expectation = Expectation(None, typical, PEER_FLOOR * typical[0])
    if rate_per_direction >= PEER_FLOOR * typical[0]:
        return Judgement(Verdict.HEALTHY, expectation)
    path = "PCIe speed: " if pcie is not None and rate_per_direction <= pcie else ""
    return Judgement(Verdict.BELOW, expectation, note=f"{path}below NVLink's typical")
