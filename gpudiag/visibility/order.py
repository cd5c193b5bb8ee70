"""CUDA's device order before CUDA_VISIBLE_DEVICES applies (CUDA_DEVICE_ORDER)."""

from __future__ import annotations

import re

from gpudiag.model import Gpu, GpuState, Machine
from gpudiag.selection import normalize_bus_id


def _bus_key(gpu: Gpu) -> tuple[int, int, int, int, int]:
    """Sort key for PCI order: domain, bus, device, function; unknown bus ids last."""
    bus = gpu.pci_bus_id.value
    if bus is None:
        return (1, 0, 0, 0, gpu.index)
    match = re.match(r"([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)", normalize_bus_id(bus))
    if not match:
        return (1, 0, 0, 0, gpu.index)
    domain, b, d, f = (int(x, 16) for x in match.groups())
    return (0, domain, b, d, f)


def kind(gpu: Gpu) -> tuple[str | None, tuple[int, int] | None]:
    return gpu.name.value, gpu.compute_capability.value


def enumeration_order(machine: Machine, order: str) -> tuple[tuple[Gpu, ...], bool]:
    """CUDA's device order before CUDA_VISIBLE_DEVICES, and whether it is a guess.

    PCI_BUS_ID is exact. FASTEST_FIRST (the default) is NVIDIA's unpublished heuristic: with
    identical GPUs it is PCI order (as the CUDA_VISIBLE_DEVICES documentation's "as determined by
    nvidia-smi" implies); with different GPUs gpudiag puts the higher compute capability first
    and says the order is a heuristic.
    """
    usable = [g for g in machine.gpus if g.state is GpuState.OK]
    by_bus = sorted(usable, key=_bus_key)
    if order == "PCI_BUS_ID":
        return tuple(by_bus), False
    if len({kind(g) for g in by_bus}) <= 1:
        return tuple(by_bus), False
    ranked = sorted(by_bus, key=lambda g: tuple(-x for x in g.compute_capability.get((0, 0))))
    return tuple(ranked), True
