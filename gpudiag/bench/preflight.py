"""Before starting torch: is there any chance of a usable CUDA device? And how the NVML view
of the machine lines up with the devices torch numbers. Pure, over the machine model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpudiag.model import Gpu, Machine, NvmlStatus, Reading, Reason, TorchBuild


def torch_reason(build: Reading[TorchBuild]) -> str:
    """Why torch cannot use CUDA, read from its files without importing it; '' if it may."""
    if build.value is None:
        if build.reason is Reason.NOT_FOUND:
            return "torch is not installed (pip install 'gpudiag[torch]')"
        return ""  # unreadable build facts: let the child try, it will say why
    if build.value.cuda is None:
        if build.value.hip:
            return f"torch {build.value.version} is a ROCm build: bench-transfer measures NVIDIA GPUs"
        return f"torch {build.value.version} is a CPU-only build"
    return ""


def nvml_reason(machine: Machine) -> str:
    """Why the driver cannot give us a GPU (NVML's own words); '' if it can."""
    if machine.nvml.status is not NvmlStatus.OK:
        return machine.nvml.detail or f"NVML: {machine.nvml.status.value}"
    if not machine.gpus:
        return "the NVIDIA driver sees no GPU"
    return ""


def uuid_key(uuid: str) -> str:
    return uuid.strip().lower().removeprefix("gpu-")


def pci_key(bus_id: str) -> str:
    """'00000000:18:00.0' (NVML) and '0000:18:00.0' (sysfs, torch) -> '0000:18:00.0'."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    try:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    except ValueError:
        return bus_id.strip().lower()


def numa_maps(
    gpus: Sequence[Gpu], sysfs_node: Callable[[str], int | None]
) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """The CPU-side NUMA node of each GPU's PCI device (sysfs), by UUID and by PCI address.

    Host buffers are pinned there. NVML's nvmlDeviceGetNumaNodeId is not that node: it is the
    GPU memory's own node on coherent systems (Grace Hopper) and not supported elsewhere (an
    H100 behind x86, as captured), so it is not asked.
    """
    by_uuid: dict[str, int | None] = {}
    by_pci: dict[str, int | None] = {}
    for gpu in gpus:
        bus = gpu.pci_bus_id.value
        node = sysfs_node(bus) if bus else None
        if node is not None and node < 0:
            node = None
        if gpu.uuid.value:
            by_uuid[uuid_key(gpu.uuid.value)] = node
        if bus:
            by_pci[pci_key(bus)] = node
    return by_uuid, by_pci


def match_gpu(uuid: str, pci_bus_id: str | None, gpus: Sequence[Gpu]) -> Gpu | None:
    """The NVML GPU behind a torch device: by UUID, else by PCI address."""
    for gpu in gpus:
        if gpu.uuid.value and uuid and uuid_key(gpu.uuid.value) == uuid_key(uuid):
            return gpu
    if pci_bus_id:
        for gpu in gpus:
            if gpu.pci_bus_id.value and pci_key(gpu.pci_bus_id.value) == pci_key(pci_bus_id):
                return gpu
    return None
