"""Host memory next to the GPU: run on the CPUs of the GPU's NUMA node while allocating and
copying, as nvbandwidth does (``nvmlDeviceGetCpuAffinity``). Linux first-touch places the
buffers' pages on the node of the CPU that touches them.
"""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

NODE_ROOT = Path("/sys/devices/system/node")
PCI_ROOT = Path("/sys/bus/pci/devices")


class Placement(str, enum.Enum):
    LOCAL = "local"  # pinned to the GPU's node's CPUs
    SINGLE_NODE = "single_node"  # one NUMA node: every placement is local
    NODE_UNKNOWN = "node_unknown"  # several nodes, the GPU's is not reported
    NOT_PINNED = "not_pinned"  # several nodes, we could not run on the GPU's

    @property
    def may_be_remote(self) -> bool:
        return self in (Placement.NODE_UNKNOWN, Placement.NOT_PINNED)


@dataclass(frozen=True)
class Placed:
    placement: Placement
    gpu_node: int | None
    detail: str


def cpu_list(text: str) -> set[int]:
    """'0-15,32-47' -> {0..15, 32..47} (sysfs cpulist format)."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.strip().split(","))):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def nodes_with_cpus(root: Path = NODE_ROOT) -> dict[int, set[int]]:
    nodes: dict[int, set[int]] = {}
    try:
        entries = list(root.glob("node[0-9]*"))
    except OSError:
        return nodes
    for entry in entries:
        try:
            cpus = cpu_list((entry / "cpulist").read_text())
        except (OSError, ValueError):
            continue
        if cpus:
            nodes[int(entry.name[4:])] = cpus
    return nodes


def pci_numa_node(bus_id: str, root: Path = PCI_ROOT) -> int | None:
    """The NUMA node sysfs gives a PCI device ('00000000:18:00.0' or '0000:18:00.0'), or None."""
    from gpudiag.bench.preflight import pci_key

    name = pci_key(bus_id)
    if name.count(":") != 2:
        return None
    try:
        node = int((root / name / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


@contextlib.contextmanager
def placed_on(
    node: int | None,
    nodes: dict[int, set[int]],
    get_affinity: Callable[[int], set[int]] | None = None,
    set_affinity: Callable[[int, set[int]], None] | None = None,
) -> Iterator[Placed]:
    """Run the block on ``node``'s CPUs (those this process may use); restore afterwards."""
    if len(nodes) <= 1:
        yield Placed(Placement.SINGLE_NODE, node, "one NUMA node: host memory is local")
        return
    if node is None or node < 0:
        yield Placed(Placement.NODE_UNKNOWN, None, "the GPU's NUMA node is not reported: host memory placed by the OS")
        return
    get = get_affinity or getattr(os, "sched_getaffinity", None)
    put = set_affinity or getattr(os, "sched_setaffinity", None)
    if get is None or put is None:
        yield Placed(Placement.NOT_PINNED, node, "this system cannot set CPU affinity: host memory placed by the OS")
        return
    before = set(get(0))
    cpus = nodes.get(node, set()) & before
    if not cpus:
        yield Placed(
            Placement.NOT_PINNED,
            node,
            f"no CPU of NUMA node {node} is allowed to this process (cpuset): host memory may be remote",
        )
        return
    try:
        put(0, cpus)
    except (OSError, ValueError) as exc:
        yield Placed(Placement.NOT_PINNED, node, f"could not run on NUMA node {node}'s CPUs ({exc})")
        return
    try:
        yield Placed(Placement.LOCAL, node, f"host memory on NUMA node {node}, the GPU's")
    finally:
        with contextlib.suppress(OSError, ValueError):
            put(0, before)
