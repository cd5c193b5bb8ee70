"""`gpudiag list --details` (``-q``): every fact of each GPU, grouped like `nvidia-smi -q`.

Plain text (no colour, no rich): each missing value prints ``N/A`` with its reason, and a
machine with more than one GPU ends with the `nvidia-smi topo -m` matrix.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.model import Gpu, GpuState, Machine, Reading, cuda_version_text
from gpudiag.readings import CLOCK_EVENTS, GPU_READINGS, Spec, pick, reading_at
from gpudiag.render.format import VALUE_FORMATS
from gpudiag.render.printable import printable

if TYPE_CHECKING:
    from gpudiag.details import GpuDetails

KEY_WIDTH = 46  # "    Key ... : value", as nvidia-smi -q aligns its values
MIB = 1024 * 1024

Line = tuple[int, str, str | None]  # (indent level, key, value or None for a heading)
Block = Callable[["Machine", "Gpu", "GpuDetails | None"], list[Line]]


def _na(reading: Reading[Any]) -> str:
    note = reading.detail or (reading.reason.label if reading.reason else "")
    return f"N/A ({note})" if note else "N/A"


def show(reading: Reading[Any], fmt: Callable[[Any], str] = str) -> str:
    return fmt(reading.value) if reading.value is not None else _na(reading)


def _mib(b: int) -> str:
    return f"{(b + MIB // 2) // MIB} MiB"


def _yes(v: bool) -> str:
    return "Yes" if v else "No"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days} days, {clock}" if days else clock


def _format(lines: list[Line]) -> str:
    out = []
    for level, key, value in lines:
        indent = "    " * level
        if value is None:
            out.append(f"{indent}{printable(key)}")
        else:
            out.append(f"{indent}{printable(key):<{max(1, KEY_WIDTH - len(indent))}}: {printable(value)}")
    return "\n".join(out)


def render(machine: Machine, gpus: tuple[Gpu, ...]) -> str:
    """The whole report for ``gpus`` (a selection of ``machine.gpus``)."""
    nvml = machine.nvml
    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(machine.collected_at))
    lines: list[Line] = [
        (0, "==============GPUDIAG LOG==============", None),
        (0, "", None),
        (0, "Timestamp", stamp),
        (0, "Driver Version", show(nvml.driver_version)),
        (0, "CUDA Version", show(nvml.cuda_driver_version, cuda_version_text)),
        (0, "NVML Version", show(nvml.nvml_version)),
        (0, "", None),
        (0, "Attached GPUs", str(len(machine.gpus))),
    ]
    for gpu in gpus:
        lines += gpu_lines(machine, gpu)
    text = _format(lines)
    if len(machine.gpus) > 1:
        text += "\n\n" + topology_matrix(machine)
    return text + "\n"


# The lines of a GPU in `-q`, in order and indented as shown: nvidia-smi -q's lines, in its words, in
# gpudiag's order. A line is a reading's (the row whose ``q`` names its path, in gpudiag.readings or
# gpudiag.details): it shows when the GPU's details are recorded or the reading is not one of them; a
# heading shows when a line under it does, and a line no reading fills yet shows nothing (so a new
# reading of nvidia-smi's names only its row). {name}: lines built below (composite readings);
# [details] ... [/details]: only when the details are recorded.
SKELETON = """
{index}
Product Name
Product Brand
Product Architecture
GPU UUID
GPU PDI
Minor Number
Persistence Mode
MIG Mode
    Current
    Pending
{details}
[details]
Display Mode
Display Active
Addressing Mode
Accounting Mode
Accounting Mode Buffer Size
Serial Number
VBIOS Version
MultiGPU Board
Board ID
Board Part Number
GPU Part Number
FRU Part Number
Module Id
Inforom Version
    Image Version
    OEM Object
    ECC Object
    Power Management Object
    Checksum Validation
GPU C2C Mode
GPU Virtualization Mode
    Virtualization Mode
    Host VGPU Mode
GPU Recovery Action
GSP Firmware Version
GSP Firmware Mode
    Current
    Default
[/details]
PCI
    Bus
    Device
    Domain
    Base Classcode
    Sub Classcode
    Device Id
    Bus Id
    Sub System Id
    GPU Link Info
        PCIe Generation
            Max
            Current
            Device Current
            Device Max
            Host Max
        Link Width
            Max
            Current
    Replays Since Reset
    Replay Number Rollovers
    Tx Throughput
    Rx Throughput
Fan Speed
Performance State
{clock_events}
Clocks Event Reasons Counters
    SW Power Cap
    Sync Boost
    SW Thermal Slowdown
    HW Thermal Slowdown
    HW Power Brake Slowdown
Sparse Operation Mode
{memory}
Compute Mode
Utilization
    GPU
    Memory
    Encoder
    Decoder
    JPEG
    OFA
Encoder Stats
    Active Sessions
    Average FPS
    Average Latency
ECC Mode
    Current
    Pending
ECC Errors
    Volatile
        {ecc_volatile}
        Total Correctable
        Total Uncorrectable
    Aggregate
        {ecc_aggregate}
        Total Correctable
        Total Uncorrectable
    {sram}
Retired Pages
    Single Bit ECC
    Double Bit ECC
    Pending Page Blacklist
{remapped_rows}
Temperature
    GPU Current Temp
    GPU T.Limit Temp (margin)
    GPU Shutdown Temp
    GPU Slowdown Temp
    GPU Max Operating Temp
    Memory Current Temp
    Memory Max Operating Temp
GPU Power Readings
    Power Management
    Power Draw
    Average Power Draw
    Instantaneous Power Draw
    Current Power Limit
    Requested Power Limit
    Default Power Limit
    Min Power Limit
    Max Power Limit
    Total Energy Consumption
Clocks
    Graphics
    SM
    Memory
    Video
Applications Clocks
    Graphics
    Memory
Default Applications Clocks
    Graphics
    Memory
Max Clocks
    Graphics
    SM
    Memory
    Video
[details]
{nvlink}
{topology}
[/details]
{processes}
"""


class _Shown(msgspec.Struct, frozen=True):
    """A row's -q line: the reading's key, the part of its value shown, and how."""

    key: str
    part: int | str | None
    show: Callable[[Any], str]
    unit: str
    details: bool  # a reading of the details


def _q_lines(rows: tuple[Spec, ...]) -> dict[str, _Shown]:
    out = {}
    for row in rows:
        for entry in filter(None, row.q.split(";")):
            entry, _, fmt = entry.partition("=")
            path, _, part = entry.partition(":")
            index: int | str | None = int(part) if part.isdigit() else part or None
            shown = VALUE_FORMATS[fmt or row.q_show or row.show]
            out[path] = _Shown(row.key, index, shown, row.unit, row.key.startswith("details."))
    return out


@functools.cache
def layout() -> tuple[tuple[int, str, str, bool], ...]:
    """The skeleton as (level, path, block name or "", only with details)."""
    out = []
    headings: list[str] = []
    details_only = False
    for raw in SKELETON.strip("\n").splitlines():
        text = raw.strip()
        if text in ("[details]", "[/details]"):
            details_only = text == "[details]"
            continue
        level = (len(raw) - len(raw.lstrip())) // 4 + 1
        del headings[level - 1 :]
        if text.startswith("{"):
            out.append((level, "/".join(headings), text[1:-1], details_only))
            continue
        headings.append(text)
        out.append((level, "/".join(headings), "", details_only))
    return tuple(out)


@functools.cache
def shown_lines() -> dict[str, _Shown]:
    """Each -q line a reading's row declares, by its path."""
    from gpudiag.details import DETAIL_READINGS

    return _q_lines((*GPU_READINGS, *DETAIL_READINGS))


def _reading_line(gpu: Gpu, shown: _Shown) -> str:
    reading = reading_at(gpu, shown.key)
    if shown.part is not None and reading.value is not None:
        value = pick(reading.value, shown.part)
        reading = value if isinstance(value, Reading) else Reading.of(value)
    if reading.value is None:
        return _na(reading)
    text = shown.show(reading.value)
    return f"{text} {shown.unit}" if shown.unit else text


def gpu_lines(machine: Machine, gpu: Gpu) -> list[Line]:
    lines: list[Line] = [(0, f"GPU {show(gpu.pci_bus_id)}", None)]
    if gpu.state is not GpuState.OK:
        return [*lines, (1, "State", f"{gpu.state.value}: {gpu.state_detail}")]
    d = gpu.details.value
    rows = shown_lines()
    headings: list[list[Any]] = []  # [level, key, shown yet] of the headings above the current line
    for level, path, custom, details_only in layout():
        if details_only and d is None:
            continue
        del headings[level - 1 :]
        key = path.rsplit("/", 1)[-1]
        if custom:
            block = _BLOCKS[custom](machine, gpu, d)
        elif path in rows:
            shown = rows[path]
            block = [] if shown.details and d is None else [(level, key, _reading_line(gpu, shown))]
        else:
            headings.append([level, key, False])
            continue
        if block:
            lines += [(lv, name, None) for lv, name, done in headings if not done]
            for heading in headings:
                heading[2] = True
            lines += block
    return lines


def _index(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    return [(1, "Index", str(gpu.index))]


def _details_missing(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    return [(1, "Details", _na(gpu.details))] if d is None else []


def _memory(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    lines: list[Line] = [(1, "FB Memory Usage", None)]
    m = gpu.memory.value
    if m is None:
        lines.append((2, "Total", _na(gpu.memory)))
    else:
        lines += [
            (2, "Total", _mib(m.total_bytes)),
            (2, "Reserved", show(m.reserved_bytes, _mib)),
            (2, "Used", _mib(m.used_bytes)),
            (2, "Free", _mib(m.free_bytes)),
        ]
    if d is not None:
        bar1 = d.bar1.value
        lines.append((1, "BAR1 Memory Usage", None if bar1 is not None else _na(d.bar1)))
        if bar1 is not None:
            lines += [
                (2, "Total", _mib(bar1.total_bytes)),
                (2, "Used", _mib(bar1.used_bytes)),
                (2, "Free", _mib(bar1.free_bytes)),
            ]
        prot = d.identity.protected_memory_bytes.value
        lines.append(
            (
                1,
                "Conf Compute Protected Memory Usage",
                None if prot is not None else _na(d.identity.protected_memory_bytes),
            )
        )
        if prot is not None:
            lines += [(2, "Total", _mib(prot[0])), (2, "Used", _mib(prot[1])), (2, "Free", _mib(prot[2]))]
    return lines


def _has_bit(bit: int, mask: int) -> bool:
    return bool(mask & bit)


def _clock_events(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    """Each clock event reason, active or not ("not supported" where the GPU's mask lacks it)."""
    lines: list[Line] = [(1, "Clocks Event Reasons", None)]
    active = gpu.clock_event_reasons
    supported = d.clocks.event_reasons_supported.value if d is not None else None
    for event in CLOCK_EVENTS:
        if supported is not None and not supported & event.bit:
            value = "N/A (not supported)"
        else:
            value = show(active.map(functools.partial(_has_bit, event.bit)), VALUE_FORMATS["active"])
        lines.append((2, event.label, value))
    return lines


def _ecc_at(counter: str) -> Block:
    """The ECC counts of each memory location (a composite reading of the details) of one counter."""

    def block(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
        lines: list[Line] = []
        for loc in d.memory_health.ecc_by_location if d is not None else ():
            corrected, uncorrected = getattr(loc, f"{counter}_corrected"), getattr(loc, f"{counter}_uncorrected")
            if corrected.value is None and uncorrected.value is None:
                continue  # this GPU has no such memory or does not count it
            label = loc.location.replace("_", " ").title().replace("Sram", "SRAM").replace("Cbu", "CBU")
            lines += [(3, f"{label} Correctable", show(corrected)), (3, f"{label} Uncorrectable", show(uncorrected))]
        return lines

    return block


def _remapped_rows(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    rr = gpu.remapped_rows
    lines: list[Line] = [(1, "Remapped Rows", None if rr.ok else _na(rr))]
    if rr.value is not None:
        r = rr.value
        lines += [
            (2, "Correctable Error", str(r.correctable)),
            (2, "Uncorrectable Error", str(r.uncorrectable)),
            (2, "Pending", _yes(r.pending)),
            (2, "Remapping Failure Occurred", _yes(r.failure)),
        ]
        if d is not None:
            h = d.memory_health
            lines += [
                (2, "Inactive Correctable Error", show(h.remapped_inactive_correctable)),
                (2, "Inactive Uncorrectable Error", show(h.remapped_inactive_uncorrectable)),
                (
                    2,
                    "Bank Remap Availability Histogram",
                    None if h.row_remap_histogram.ok else _na(h.row_remap_histogram),
                ),
            ]
            if h.row_remap_histogram.value is not None:
                hist = h.row_remap_histogram.value
                for key in ("max", "high", "partial", "low", "none"):
                    lines.append((3, key.title(), f"{getattr(hist, key)} bank(s)"))
    return lines


def _sram(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    if d is None:
        return []
    sram = d.memory_health.sram
    if sram.value is None:
        return [(2, "SRAM Errors", _na(sram))]
    e = sram.value
    return [
        (2, "SRAM Errors", None),
        (3, "Volatile Uncorrectable Parity", str(e.volatile_uncorrected_parity)),
        (3, "Volatile Uncorrectable SEC-DED", str(e.volatile_uncorrected_secded)),
        (3, "Aggregate Uncorrectable Parity", str(e.aggregate_uncorrected_parity)),
        (3, "Aggregate Uncorrectable SEC-DED", str(e.aggregate_uncorrected_secded)),
        (3, "Aggregate Threshold Exceeded", _yes(e.threshold_exceeded)),
        (
            3,
            "Aggregate Uncorrectable by Unit",
            f"L2 {e.aggregate_l2}, SM {e.aggregate_sm}, "
            f"Microcontroller {e.aggregate_mcu}, PCIe {e.aggregate_pcie}, Other {e.aggregate_other}",
        ),
    ]


def _nvlink(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    if d is None:
        return []
    if d.nvlinks.value is None:
        return [(1, "NVLink", _na(d.nvlinks))]
    lines: list[Line] = [(1, "NVLink", f"{sum(1 for x in d.nvlinks.value if x.active.get(False))} active")]
    for link in d.nvlinks.value:
        state = show(link.active, lambda a: "Active" if a else "Inactive")
        lines += [
            (2, f"Link {link.link}", state),
            (3, "Version", show(link.version)),
            (3, "Speed", show(link.speed_mbps, lambda v: f"{v / 1000:.3f} GB/s")),
            (3, "Remote", f"{show(link.remote_type)} {show(link.remote_pci_bus_id)}"),
            (3, "Replay Errors", show(link.replay_errors)),
            (3, "Recovery Errors", show(link.recovery_errors)),
            (3, "CRC Flit Errors", show(link.crc_flit_errors)),
            (3, "CRC Data Errors", show(link.crc_data_errors)),
        ]
    return lines


def _topology(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    if d is None:
        return []
    if d.affinity.value is None:
        return [(1, "Topology", _na(d.affinity))]
    a = d.affinity.value
    lines: list[Line] = [
        (1, "Topology", None),
        (2, "CPU Affinity", show(a.cpus)),
        (2, "NUMA Affinity", show(a.numa_nodes)),
        (2, "GPU NUMA ID", show(gpu.numa_node)),
    ]
    for peer in a.peers:
        link = f"NV{peer.nvlinks}" if peer.nvlinks else show(peer.common_ancestor)
        lines.append((2, f"GPU {peer.gpu}", f"{link}, P2P read {show(peer.p2p_read)}"))
    return lines


def _processes(machine: Machine, gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    procs = gpu.processes
    if procs.value is None:
        return [(1, "Processes", _na(procs))]
    if not procs.value:
        return [(1, "Processes", "None")]
    loads = {}
    if d is not None and d.process_load.value is not None:
        loads = {p.pid: p for p in d.process_load.value}
    lines: list[Line] = [(1, "Processes", None)]
    for p in procs.value:
        lines += [
            (2, "Process ID", str(p.pid)),
            (3, "Type", p.kind.value),
            (3, "Name", show(p.host.name)),
            (3, "Used GPU Memory", show(p.used_memory_bytes, _mib)),
        ]
        load = loads.get(p.pid)
        if load is not None:
            lines += [
                (3, "SM Utilization", f"{load.sm_percent} %"),
                (3, "Memory Bandwidth", f"{load.memory_percent} %"),
                (3, "Encoder / Decoder", f"{load.encoder_percent} % / {load.decoder_percent} %"),
                (3, "Host CPU", show(load.cpu_percent, lambda v: f"{v:.1f} %")),
                (3, "Host Memory (RSS)", show(load.rss_bytes, _mib)),
                (3, "Running Time", show(load.started_at, lambda t: _duration(machine.collected_at - t))),
            ]
        elif d is not None:
            lines.append((3, "GPU Load", _na(d.process_load) if d.process_load.value is None else "no sample"))
    return lines


# The blocks of lines the skeleton names: composite readings, laid out by hand.
_BLOCKS: dict[str, Block] = {
    "index": _index,
    "details": _details_missing,
    "clock_events": _clock_events,
    "memory": _memory,
    "ecc_volatile": _ecc_at("volatile"),
    "ecc_aggregate": _ecc_at("aggregate"),
    "sram": _sram,
    "remapped_rows": _remapped_rows,
    "nvlink": _nvlink,
    "topology": _topology,
    "processes": _processes,
}


def topology_matrix(machine: Machine) -> str:
    """`nvidia-smi topo -m`: how each GPU reaches each other one, and its CPU / NUMA affinity."""
    gpus = [g for g in machine.gpus if g.state is GpuState.OK]
    names = [f"GPU{g.index}" for g in gpus]
    header = ["", *names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    rows = [header]
    from gpudiag.render.topo_view import Node, cell

    for g in gpus:
        d = g.details.value
        a = d.affinity.value if d is not None else None
        node = Node(g.index, d.affinity if d is not None else Reading.missing_like(g.details), g.numa_node)
        cells = [f"GPU{g.index}", *(cell(node, other.index, unknown="?", no_answer="N/A") for other in gpus)]
        cells += [
            a.cpus.get("N/A") if a else "N/A",
            a.numa_nodes.get("N/A") if a else "N/A",
            str(g.numa_node.value) if g.numa_node.value is not None else "N/A",
        ]
        rows.append([str(c) for c in cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    body = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    legend = (
        "Legend:\n"
        "  X    = Self\n"
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n"
        "  ?    = details not recorded"
    )
    return f"Topology\n{body}\n\n{legend}"
