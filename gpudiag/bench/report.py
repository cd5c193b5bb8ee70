"""Measurements + what NVML says about each GPU -> judged rows."""

from __future__ import annotations

from gpudiag.bench.engine import Measurement
from gpudiag.bench.link import Judgement, Verdict, judge_d2d, judge_host
from gpudiag.bench.plan import Mode
from gpudiag.bench.stats import GB
from gpudiag.model import Gpu
from gpudiag.render.bench_view import Row


def rows(
    measurements: list[Measurement],
    gpus: dict[int, Gpu | None],  # torch ordinal -> NVML GPU
    links: dict[int, tuple[int, int] | None],  # torch ordinal -> (gen, width) read after warm-up
) -> list[Row]:
    pinned: dict[tuple[int, str, int], float] = {}
    for m in measurements:
        if m.mode in (Mode.H2D_PINNED, Mode.D2H_PINNED):
            pinned[(m.device, m.mode.value[:3], m.nbytes)] = m.bandwidth.median
    out = []
    for m in measurements:
        gpu = gpus.get(m.device)
        label = f"GPU {gpu.index}" if gpu is not None else f"cuda:{m.device}"
        peer_gpu = gpus.get(m.peer) if m.peer is not None else None
        peer_label = "" if m.peer is None else (f"GPU {peer_gpu.index}" if peer_gpu else f"cuda:{m.peer}")
        link = links.get(m.device)
        gen_max = gpu.pcie.gen_max.value if gpu else None
        width_max = gpu.pcie.width_max.value if gpu else None
        link_text = ""
        if link is not None:
            link_text = f"Gen{link[0]} x{link[1]}"
            if gen_max and width_max and (link[0], link[1]) != (gen_max, width_max):
                link_text += f" (max Gen{gen_max} x{width_max})"
        gbps = m.bandwidth.median / GB
        judgement: Judgement
        if m.mode.is_host:
            ref = pinned.get((m.device, m.mode.value[:3], m.nbytes))
            judgement = judge_host(
                m.mode,
                gbps,
                link[0] if link else None,
                link[1] if link else None,
                gen_max,
                width_max,
                ref / GB if ref else None,
            )
        elif m.mode is Mode.D2D:
            judgement = judge_d2d(gbps, gpu.name.get("") if gpu else "")
        else:
            judgement = Judgement(Verdict.NO_REFERENCE, None, None, "NVLink/PCIe peer path: see `nvidia-smi topo -m`")
        out.append(Row(m, label, peer_label, judgement, link_text))
    return out
