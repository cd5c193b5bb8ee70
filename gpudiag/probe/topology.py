"""How each GPU reaches each other one (`gpudiag topo`, `nvlink`): the details probe's affinity and NVLink
readers, without the rest of the details (about 7 calls per GPU pair and 8 per NVLink)."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from gpudiag.details import Affinity, NvLink
from gpudiag.model import Gpu, Reading, Reason
from gpudiag.probe.collect import MachineSource
from gpudiag.probe.details import DetailsProbe, affinity_with_nvlink_counts
from gpudiag.probe.nvml_errors import GpuLostError
from gpudiag.probe.nvml_processes import no_process_stats

LOST: Reading[Any] = Reading.missing(Reason.GPU_LOST, "GPU is lost")


def _probe(source: MachineSource) -> DetailsProbe:
    return DetailsProbe(source.session, no_process_stats, source.session.cpu_count)


def nvlinks(source: MachineSource, positions: list[int]) -> dict[int, Reading[tuple[NvLink, ...]]]:
    """Each NVLink of the GPUs at ``positions`` (a GPU without NVLink says why; a lost one, that)."""
    probe = _probe(source)
    handles = dict(source.session.gpu_handles())
    out: dict[int, Reading[tuple[NvLink, ...]]] = {}
    for position in positions:
        if position not in handles:
            continue
        try:
            out[position] = probe.nvlinks(handles[position])
        except GpuLostError:
            out[position] = LOST
    return out


def affinities(source: MachineSource, gpus: tuple[Gpu, ...]) -> dict[int, Reading[Affinity]]:
    """Each usable GPU's CPU / NUMA affinity and how it reaches every other usable GPU (peers named by
    NVML index), NV# counted as `nvidia-smi topo -m` counts it; by position in ``gpus``, the source's
    order."""
    probe = _probe(source)
    handles = dict(source.session.gpu_handles())
    links = nvlinks(source, list(handles))
    by_bus = {g.pci_bus_id.value.lower(): n for n, g in enumerate(gpus) if g.pci_bus_id.value}
    out: dict[int, Reading[Affinity]] = {}
    for position, h in handles.items():
        peers = [(other, oh) for other, oh in handles.items() if other != position]
        try:
            affinity = probe.affinity(h, peers)
        except GpuLostError:
            out[position] = LOST
            continue
        own = links[position].value
        if own is not None:
            affinity = affinity_with_nvlink_counts(affinity, own, by_bus)
        named = tuple(replace(p, gpu=gpus[p.gpu].index) for p in affinity.peers)
        out[position] = Reading.of(replace(affinity, peers=named))
    return out
