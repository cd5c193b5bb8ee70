"""`gpudiag topo`: how each GPU reaches each other one, as `nvidia-smi topo -m` and `topo -p2p` print it.

nvidia-smi's layout, tab-separated, the header underlined (an escape sequence nvidia-smi writes even
into a file; gpudiag only where colour is on): the captured H100's is
docs/hardware/h100-80gb-hbm3-driver580/nvidia-smi-topo-m.txt. The cells come from the GPUs' affinity
(gpudiag.details.Affinity, read by probe.details), the same readings `list -q` shows; `list -q`'s matrix
takes its cells from :func:`cell` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.model import Reading
from gpudiag.readings import P2P_ABBREVIATIONS
from gpudiag.render.printable import printable
from gpudiag.serialize import to_data

if TYPE_CHECKING:
    from gpudiag.details import Affinity, PeerLink

SCHEMA = "gpudiag.topo/1"
UNDERLINE, RESET = "\x1b[4m", "\x1b[0m"
NOT_RECORDED = "N/A"

LEGEND_M = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
LEGEND_P2P = """Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  DR   = Disabled by regkey
  U    = Unknown
"""
NOT_RECORDED_LEGEND = "  N/A  = Not read: not recorded in this snapshot, or NVML gave no answer\n"

# `topo -p2p`'s capability letters, the PeerLink reading each shows, and its name in --json.
P2P_CAPABILITIES = {
    "r": ("p2p_read", "read"),
    "w": ("p2p_write", "write"),
    "n": ("p2p_nvlink", "nvlink"),
    "a": ("p2p_atomics", "atomics"),
    "p": ("p2p_prop", "prop"),
}


class Node(msgspec.Struct, frozen=True):
    """One GPU as the matrix shows it."""

    index: int
    affinity: Reading[Affinity]
    numa_node: Reading[int]


def _peer(node: Node, other: int) -> PeerLink | None:
    affinity = node.affinity.value
    if affinity is None:
        return None
    return next((p for p in affinity.peers if p.gpu == other), None)


def cell(node: Node, other: int, unknown: str = NOT_RECORDED, no_answer: str = NOT_RECORDED) -> str:
    """How ``node`` reaches GPU ``other``: X, NV# (NVLinks), or PCIe's PIX/PXB/PHB/NODE/SYS;
    ``unknown`` when the pair was not read, ``no_answer`` when NVML gave no level for it."""
    if other == node.index:
        return "X"
    peer = _peer(node, other)
    if peer is None:
        return unknown
    if peer.nvlinks:
        return f"NV{peer.nvlinks}"
    return peer.common_ancestor.get(no_answer)


def p2p_cell(node: Node, other: int, capability: str) -> str:
    if other == node.index:
        return "X"
    peer = _peer(node, other)
    if peer is None:
        return NOT_RECORDED
    status = getattr(peer, P2P_CAPABILITIES[capability][0]).value
    return NOT_RECORDED if status is None else P2P_ABBREVIATIONS.get(status, "U")


def _head(cells: list[str], underline: bool) -> str:
    text = "\t".join(cells)
    return f"\t{UNDERLINE}{text}{RESET}" if underline else f"\t{text}"


def matrix(nodes: list[Node], underline: bool) -> str:
    """`nvidia-smi topo -m`."""
    lines = [_head([*(f"GPU{n.index}" for n in nodes), "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"], underline)]
    missing = False
    for node in nodes:
        cells = [
            f" {cell(node, other.index)} " if other.index == node.index else cell(node, other.index) for other in nodes
        ]
        affinity = node.affinity.value
        cpus = affinity.cpus.get(NOT_RECORDED) if affinity else NOT_RECORDED
        numa = affinity.numa_nodes.get(NOT_RECORDED) if affinity else NOT_RECORDED
        gpu_numa = str(node.numa_node.value) if node.numa_node.value is not None else "N/A"
        missing = missing or NOT_RECORDED in cells or affinity is None
        lines.append("\t".join([f"GPU{node.index}", *cells, printable(cpus), printable(numa), "", gpu_numa]))
    legend = LEGEND_M + (NOT_RECORDED_LEGEND if missing else "")
    return "\n".join(lines) + "\n\n" + legend


def p2p_matrix(nodes: list[Node], capability: str, underline: bool) -> str:
    """`nvidia-smi topo -p2p r|w|n|a|p`."""
    lines = [_head([f"GPU{n.index}" for n in nodes], underline)]
    missing = False
    for node in nodes:
        cells = [p2p_cell(node, other.index, capability) for other in nodes]
        missing = missing or NOT_RECORDED in cells
        lines.append(" " + "\t".join([f"GPU{node.index}", *cells]))
    legend = LEGEND_P2P + (NOT_RECORDED_LEGEND if missing else "")
    return "\n".join(lines) + "\n\n" + legend


def to_json(nodes: list[Node]) -> dict[str, Any]:
    gpus = []
    for node in nodes:
        affinity = node.affinity.value
        entry: dict[str, Any] = {"index": node.index, "gpu_numa_id": to_data(node.numa_node)}
        if affinity is None:
            entry["affinity"] = to_data(node.affinity)
        else:
            entry["cpu_affinity"] = to_data(affinity.cpus)
            entry["numa_affinity"] = to_data(affinity.numa_nodes)
            entry["peers"] = [
                {
                    "gpu": peer.gpu,
                    "link": cell(node, peer.gpu),
                    "common_ancestor": to_data(peer.common_ancestor),
                    "nvlinks": peer.nvlinks,
                    "p2p": {name: to_data(getattr(peer, attr)) for attr, name in P2P_CAPABILITIES.values()},
                }
                for peer in affinity.peers
            ]
        gpus.append(entry)
    return {"schema": SCHEMA, "gpus": gpus}
