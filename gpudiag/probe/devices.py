"""Host facts the driver needs: /dev/nvidia* nodes, the nvidia_uvm module, no nouveau.

Missing /dev/nvidia-uvm (or the nvidia_uvm module) is the classic cause of PyTorch's
"CUDA unknown error" (999); a GPU bound to nouveau is invisible to the NVIDIA driver.
CUDA itself runs the setuid ``nvidia-modprobe`` helper, when installed, to load nvidia_uvm
and create missing nodes on first use, so whether that helper exists matters too.

Every path is a parameter so tests can point them at a temporary tree. Only the live
machine is read: a replayed snapshot does not record these facts.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import msgspec

# A pattern string, not a compiled one: compiled on first use (re caches it), not at every start-up.
_PCI_ADDRESS = r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"

MODPROBE_HELPERS = (Path("/usr/bin/nvidia-modprobe"), Path("/usr/local/bin/nvidia-modprobe"))


class DeviceNode(msgspec.Struct, frozen=True):
    path: str
    exists: bool
    accessible: bool  # readable and writable by this user


class DeviceFacts(msgspec.Struct, frozen=True):
    nodes: tuple[DeviceNode, ...]
    modules: frozenset[str]  # loaded kernel modules (from /proc/modules)
    modules_known: bool  # False when /proc/modules could not be read
    nouveau_bound: tuple[str, ...] = ()  # PCI addresses bound to the nouveau driver
    modprobe_helper: bool = False  # a setuid-root nvidia-modprobe exists (CUDA loads nvidia_uvm with it)


def read_device_facts(
    minor_numbers: tuple[int, ...],
    dev: Path = Path("/dev"),
    proc_modules: Path = Path("/proc/modules"),
    nouveau_driver: Path = Path("/sys/bus/pci/drivers/nouveau"),
    modprobe_helpers: tuple[Path, ...] = MODPROBE_HELPERS,
) -> DeviceFacts:
    names = ["nvidiactl", "nvidia-uvm", *(f"nvidia{n}" for n in minor_numbers)]
    nodes = []
    for name in names:
        path = dev / name
        exists = path.exists()
        nodes.append(DeviceNode(str(path), exists, exists and os.access(path, os.R_OK | os.W_OK)))
    try:
        lines = proc_modules.read_text().splitlines()
        modules, known = frozenset(line.split()[0] for line in lines if line.strip()), True
    except OSError:
        modules, known = frozenset(), False
    return DeviceFacts(
        nodes=tuple(nodes),
        modules=modules,
        modules_known=known,
        nouveau_bound=_bound(nouveau_driver),
        modprobe_helper=any(_setuid_root(p) for p in modprobe_helpers),
    )


def _bound(driver_dir: Path) -> tuple[str, ...]:
    """The PCI devices a driver is bound to: its sysfs directory holds one link per device."""
    try:
        return tuple(sorted(entry.name for entry in driver_dir.iterdir() if re.match(_PCI_ADDRESS, entry.name)))
    except OSError:
        return ()


def _setuid_root(path: Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == 0 and bool(st.st_mode & stat.S_ISUID) and bool(st.st_mode & stat.S_IXOTH)
