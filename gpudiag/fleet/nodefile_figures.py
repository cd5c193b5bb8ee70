"""A node's figures from its GPUs in a node file: the sums and extremes a fleet report compares."""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.fleet.faults import remedy
from gpudiag.fleet.nodefile_schema import CheckGpu, FullCheckGpu


def gpu_figures(gpus: Sequence[FullCheckGpu | CheckGpu]) -> tuple[tuple[str, ...], dict[str, float], str]:
    """Per node: GPU models (the caller shares them), the hottest GPU, the slowest matmul, error counts summed."""
    names = []
    ecc_u = ecc_c = rows = pages = 0
    seen_ecc_u = seen_ecc_c = seen_rows = seen_pages = False
    hottest: float | None = None
    slowest: float | None = None
    actions: list[int | None] = []
    pending: list[bool | None] = []
    for g in gpus:  # one pass, unrolled: this runs for every GPU of every node file
        names.append(g.name or "unknown GPU")
        if g.ecc_aggregate_uncorrected is not None:
            ecc_u += g.ecc_aggregate_uncorrected
            seen_ecc_u = True
        if g.ecc_aggregate_corrected is not None:
            ecc_c += g.ecc_aggregate_corrected
            seen_ecc_c = True
        if g.remapped_rows_correctable is not None:
            rows += g.remapped_rows_correctable + (g.remapped_rows_uncorrectable or 0)
            seen_rows = True
        if g.retired_pages is not None:
            pages += g.retired_pages
            seen_pages = True
        if g.temperature_c is not None and (hottest is None or g.temperature_c > hottest):
            hottest = g.temperature_c
        if g.matmul_tflops is not None and (slowest is None or g.matmul_tflops < slowest):
            slowest = g.matmul_tflops
        if g.recovery_action:
            actions.append(g.recovery_action)
        if g.remap_pending:
            pending.append(True)
    sums: dict[str, float] = {}
    for metric, total, seen in (
        ("ecc_uncorrected", ecc_u, seen_ecc_u),
        ("ecc_corrected", ecc_c, seen_ecc_c),
        ("remapped_rows", rows, seen_rows),
        ("retired_pages", pages, seen_pages),
    ):
        if seen:
            sums[metric] = float(total)
    if hottest is not None:
        sums["temperature_c"] = float(hottest)
    if slowest is not None:
        sums["matmul_tflops"] = slowest
    return tuple(names), sums, remedy(actions, pending) if actions or pending else ""


# Per GPU in `check --json` → the node's figure (the slowest GPU's): the outlier figures of `check --level 2-4`.
DEEP_FIGURES = (
    ("stress_tflops", "stress_tflops"),
    ("memtest_gbps", "memtest_gbps"),
    ("h2d_gbps", "h2d_gbps"),
    ("d2h_gbps", "d2h_gbps"),
    ("d2d_gbps", "d2d_gbps"),
    ("peer_min_gbps", "peer_gbps"),
    ("allreduce_busbw_gbps", "allreduce_busbw_gbps"),
)


def has_deep(gpu: FullCheckGpu | CheckGpu) -> bool:
    return any(getattr(gpu, key) is not None for key, _ in DEEP_FIGURES)


def deep_figures(gpus: Sequence[FullCheckGpu | CheckGpu], metrics: dict[str, float]) -> dict[str, int]:
    """Add the slowest GPU's deep figures to ``metrics``; which GPU each came from."""
    where: dict[str, int] = {}
    for key, figure in DEEP_FIGURES:
        slowest: FullCheckGpu | CheckGpu | None = None
        for g in gpus:
            value = getattr(g, key)
            if value is not None and (slowest is None or value < getattr(slowest, key)):
                slowest = g
        if slowest is not None:
            metrics[figure] = float(getattr(slowest, key))
            if slowest.index is not None:
                where[figure] = slowest.index
    return where
