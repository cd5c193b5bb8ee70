"""Host facts the driver needs: /dev/nvidia* nodes, the nvidia_uvm module, no nouveau.

Missing /dev/nvidia-uvm is the classic cause of PyTorch's "CUDA unknown error" (999).
Paths are parameters so tests can point them at a temporary tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DeviceNode:
    path: str
    exists: bool
    accessible: bool  # readable and writable by this user


@dataclass(frozen=True)
class DeviceFacts:
    nodes: tuple[DeviceNode, ...]
    modules: frozenset[str]  # loaded kernel modules (from /proc/modules)
    modules_known: bool  # False when /proc/modules could not be read


def read_device_facts(
    minor_numbers: tuple[int, ...], dev: Path = Path("/dev"), proc: Path = Path("/proc")
) -> DeviceFacts:
    names = ["nvidiactl", "nvidia-uvm", *(f"nvidia{n}" for n in minor_numbers)]
    nodes = []
    for name in names:
        path = dev / name
        exists = path.exists()
        nodes.append(DeviceNode(str(path), exists, exists and os.access(path, os.R_OK | os.W_OK)))
    try:
        modules = frozenset(line.split()[0] for line in (proc / "modules").read_text().splitlines() if line.strip())
        known = True
    except OSError:
        modules, known = frozenset(), False
    return DeviceFacts(tuple(nodes), modules, known)
