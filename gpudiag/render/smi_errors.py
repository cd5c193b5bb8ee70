"""The one-line errors nvidia-smi prints where NVML cannot serve it, for the views that stand in for
its subcommands (`dmon`, `pmon`, `topo`, `nvlink`, `mig`, `stat`): a script that greps nvidia-smi's
words finds them here too, with nvidia-smi's exit codes (gpudiag.exitcodes)."""

from __future__ import annotations

from gpudiag.model import Gpu, GpuState, NvmlInfo, NvmlStatus

# nvidia-smi's words for each NVML start-up failure (its first line where it prints two).
NVML_FAILURES = {
    NvmlStatus.LIBRARY_NOT_FOUND: "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure "
    "that the NVIDIA Display Driver is properly installed and present in your system.",
    NvmlStatus.DRIVER_NOT_LOADED: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.",
    NvmlStatus.VERSION_MISMATCH: "Failed to initialize NVML: Driver/library version mismatch",
    NvmlStatus.NO_PERMISSION: "Failed to initialize NVML: Insufficient Permissions",
    NvmlStatus.ERROR: "Failed to initialize NVML: Unknown Error",
}
NO_DEVICES = "No devices were found"
NO_MIG = "No MIG-enabled devices found."


def nvml_failure(info: NvmlInfo) -> str:
    return NVML_FAILURES.get(info.status, f"Failed to initialize NVML: {info.detail}")


def unusable_gpu(gpu: Gpu) -> str:
    """nvidia-smi's line for a GPU whose handle NVML cannot give (driver 5xx's form, with the bus id
    when the snapshot knows it): "Unable to determine the device handle for GPU2: 0000:0B:00.0: GPU is
    lost.  Reboot the system to recover this GPU"."""
    bus = gpu.pci_bus_id.value
    where = f"{_short_bus(bus)}: " if bus else ""
    why = "GPU is lost.  Reboot the system to recover this GPU" if gpu.state is GpuState.LOST else "Unknown Error"
    return f"Unable to determine the device handle for GPU{gpu.index}: {where}{why}"


def _short_bus(bus_id: str) -> str:
    """NVML's 8-digit PCI domain as nvidia-smi prints it in this message: 00000000:0B:00.0 -> 0000:0B:00.0."""
    domain, _, rest = bus_id.partition(":")
    return f"{domain[-4:]}:{rest.upper()}" if rest else bus_id
