"""What a link should deliver, and a verdict on what it did.

PCIe: per-lane rates after encoding (Gen1/2 8b/10b, Gen3+ 128b/130b; Gen6 FLIT), typical
measured pinned copies and warning floors for x16 from the field notes (NVIDIA's
bandwidthTest / nvbandwidth figures on healthy systems); narrower links scale by width.
Within a GPU: healthy copy rates per memory class, bytes counted once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpudiag.bench.plan import Mode

GB = 1e9
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# x16 pinned copies: (typical low, typical high, warn below), GB/s.
TYPICAL_X16 = {3: (11.5, 13.2, 10.0), 4: (24.0, 26.5, 21.0), 5: (50.0, 57.5, 44.0)}
# Within one GPU, bytes counted once (half of bandwidthTest's read+write figure).
D2D_TYPICAL = (
    ("H100", (1235.0, 1450.0)),
    ("H200", (1800.0, 2150.0)),
    ("A100-SXM4-80GB", (700.0, 900.0)),
    ("A100 80GB", (700.0, 850.0)),
    ("A100", (575.0, 660.0)),
    ("V100", (335.0, 390.0)),
)


class Verdict(str, enum.Enum):
    HEALTHY = "healthy"
    BELOW = "below expected"
    NO_REFERENCE = "no reference"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    limit_gbps: float | None  # theoretical, after encoding
    typical: tuple[float, float] | None
    note: str  # "behaves like Gen3 x16", "link trained at Gen1 x16 (max Gen4)", ...


def pcie_theoretical(gen: int, width: int) -> float | None:
    lane = LANE_GBPS.get(gen)
    return lane * width if lane else None


def pcie_typical(gen: int, width: int) -> tuple[float, float, float] | None:
    base = TYPICAL_X16.get(gen)
    if base is None:
        theory = pcie_theoretical(gen, width)
        return (0.76 * theory, 0.88 * theory, 0.66 * theory) if theory else None  # same efficiency as Gen3-5
    scale = width / 16
    return (base[0] * scale, base[1] * scale, base[2] * scale)


def behaves_like(gbps: float) -> str:
    """The fastest link a figure is consistent with (it clears that link's warning floor).

    Among links of equal speed the x16 one is named: a GPU retrained to a lower generation
    at full width is the common failure.
    """
    best: tuple[float, int, str] | None = None
    for gen in LANE_GBPS:
        for width in (8, 16):  # the widths GPUs train to
            typical = pcie_typical(gen, width)
            theory = pcie_theoretical(gen, width)
            if typical is None or theory is None or gbps < typical[2]:
                continue
            key = (round(theory, 1), width, f"Gen{gen} x{width}")
            if best is None or key[:2] > best[:2]:
                best = key
    return best[2] if best else ""


def judge_host(
    mode: Mode,
    gbps: float,
    gen: int | None,
    width: int | None,
    gen_max: int | None,
    width_max: int | None,
    pinned_gbps: float | None = None,
) -> Judgement:
    """A host<->device figure against what the link can do.

    The reference is the link's maximum (the lower of GPU and slot): the current gen/width,
    read right after the warm-up while the GPU is busy, only explains a shortfall. A GPU
    that stays at a lower generation under load is the failure to catch.
    """
    ref_gen, ref_width = gen_max or gen, width_max or width
    if ref_gen is None or ref_width is None:
        return Judgement(Verdict.NO_REFERENCE, None, None, "PCIe link not reported by NVML")
    limit = pcie_theoretical(ref_gen, ref_width)
    typical = pcie_typical(ref_gen, ref_width)
    degraded = ""
    if gen is not None and width is not None and (gen < ref_gen or width < ref_width):
        degraded = f"link running at Gen{gen} x{width} (capable of Gen{ref_gen} x{ref_width})"
    if "pageable" in mode.value:
        # Pageable copies stage through a pinned bounce buffer: 40-75 % of pinned is normal.
        note = f"{100 * gbps / pinned_gbps:.0f}% of pinned" if pinned_gbps else "staged through a bounce buffer"
        return Judgement(Verdict.NO_REFERENCE, limit, None, note)
    if typical is None or limit is None:
        return Judgement(Verdict.NO_REFERENCE, limit, None, degraded)
    if gbps >= typical[2]:
        return Judgement(Verdict.HEALTHY, limit, typical[:2], degraded)
    like = behaves_like(gbps)
    cause = degraded or "link at full speed: suspect a remote NUMA node, a PCIe switch, or contention"
    note = f"behaves like {like}; {cause}" if like else cause
    return Judgement(Verdict.BELOW, limit, typical[:2], note)


def judge_d2d(gbps: float, gpu_name: str) -> Judgement:
    for key, typical in D2D_TYPICAL:
        if key.lower() in gpu_name.lower():
            low = typical[0] * 0.85  # 15 % under the healthy range before we call it low
            if gbps >= low:
                return Judgement(Verdict.HEALTHY, None, typical, "")
            return Judgement(Verdict.BELOW, None, typical, "memory clocks throttled, or another process is busy")
    return Judgement(Verdict.NO_REFERENCE, None, None, "no reference figure for this GPU")
