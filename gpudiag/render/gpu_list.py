"""`list -L` (nvidia-smi -L): one line per GPU and per MIG device; and nvidia-smi's line for a GPU
that NVML cannot open, which every per-GPU output prints in that GPU's place."""

from __future__ import annotations

from typing import Any

from gpudiag.model import Gpu, GpuState, Machine

GPUS_SCHEMA = "gpudiag.gpus/1"


def smi_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` as nvidia-smi writes it in messages, ``0000:3B:00.0``."""
    domain, _, rest = bus_id.partition(":")
    return f"{domain[-4:]}:{rest}" if rest else bus_id


def handle_error(gpu: Gpu) -> str:
    """What nvidia-smi prints for a GPU whose handle NVML cannot give (driver 580): lost (fallen off
    the bus, XID 79), or another error."""
    where = smi_bus_id(gpu.pci_bus_id.value) if gpu.pci_bus_id.value else str(gpu.index)
    if gpu.state is GpuState.LOST:
        return (
            f"Unable to determine the device handle for GPU {where}: GPU is lost. Reboot the system to recover this GPU"
        )
    return f"Unable to determine the device handle for GPU {where}: Unknown Error"


def _uuid(gpu_or_mig: Any) -> str:
    return str(gpu_or_mig.uuid.get("N/A"))


def render(machine: Machine, gpus: tuple[Gpu, ...]) -> str:
    """``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)``, and under a GPU with MIG each MIG device as
    ``  MIG 3g.20gb     Device  0: (UUID: MIG-…)``."""
    lines = []
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            lines.append(handle_error(gpu))
            continue
        lines.append(f"GPU {gpu.index}: {gpu.name.get('N/A')} (UUID: {_uuid(gpu)})")
        for mig in gpu.mig_devices:
            profile = str(mig.name.get("")).rpartition(" ")[2] or "N/A"
            lines.append(f"  MIG {profile:<12}Device {mig.index:>2}: (UUID: {_uuid(mig)})")
    return "".join(line + "\n" for line in lines)


def document(machine: Machine, gpus: tuple[Gpu, ...]) -> dict[str, Any]:
    """The same as JSON (schema gpudiag.gpus/1): each GPU's index, name, UUID, state and MIG devices."""
    from gpudiag.serialize import to_data

    return {
        "schema": GPUS_SCHEMA,
        "gpus": [
            {
                "index": gpu.index,
                "state": gpu.state.value,
                "name": to_data(gpu.name),
                "uuid": to_data(gpu.uuid),
                "pci_bus_id": to_data(gpu.pci_bus_id),
                "mig_devices": [
                    {"index": mig.index, "name": to_data(mig.name), "uuid": to_data(mig.uuid)}
                    for mig in gpu.mig_devices
                ],
                **({"error": handle_error(gpu)} if gpu.state is not GpuState.OK else {}),
            }
            for gpu in gpus
        ],
    }
