"""Whether a node has NVIDIA GPUs at all, from sysfs: node-problem-detector's plugin answers
"unknown" on a node without one rather than reporting a problem there.

NVML cannot say it: without a driver it answers nothing, with or without GPUs. The PCI bus
can: an NVIDIA function (vendor 0x10de) of class display controller (0x03xxxx) is a GPU,
whichever driver holds it, if any. Containers see the host's PCI devices in /sys.
"""

from __future__ import annotations

from pathlib import Path

PCI_DEVICES = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS = "0x03"  # VGA (0x0300) and 3D (0x0302) controllers; NVIDIA's audio and USB functions are not GPUs


def nvidia_gpus(root: Path | None = None) -> int | None:
    """How many NVIDIA GPUs sit on the PCI bus; None when sysfs cannot be read (then nobody knows)."""
    try:
        entries = list((PCI_DEVICES if root is None else root).iterdir())
    except OSError:
        return None
    count = 0
    for entry in entries:
        try:
            vendor = (entry / "vendor").read_text().strip().lower()
            device_class = (entry / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and device_class.startswith(DISPLAY_CLASS):
            count += 1
    return count
