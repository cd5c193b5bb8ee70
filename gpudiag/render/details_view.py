"""`gpudiag list --details` (``-q``): every fact of each GPU, grouped like `nvidia-smi -q`.

Plain text (no colour, no rich): each missing value prints ``N/A`` with its reason, and a
machine with more than one GPU ends with the `nvidia-smi topo -m` matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudiag.model import Gpu, GpuState, Machine, Reading, cuda_version_text
from gpudiag.readings import ADDRESSING_MODES, CLOCK_EVENTS

if TYPE_CHECKING:
    from gpudiag.details import ClockSet, GpuDetails

KEY_WIDTH = 46  # "    Key ... : value", as nvidia-smi -q aligns its values
MIB = 1024 * 1024

Line = tuple[int, str, str | None]  # (indent level, key, value or None for a heading)


def _na(reading: Reading[Any]) -> str:
    note = reading.detail or (reading.reason.label if reading.reason else "")
    return f"N/A ({note})" if note else "N/A"


def show(reading: Reading[Any], fmt: Callable[[Any], str] = str) -> str:
    return fmt(reading.value) if reading.value is not None else _na(reading)


def _mib(b: int) -> str:
    return f"{(b + MIB // 2) // MIB} MiB"


def _enabled(v: bool) -> str:
    return "Enabled" if v else "Disabled"


def _yes(v: bool) -> str:
    return "Yes" if v else "No"


def _w(v: float) -> str:
    return f"{v:.2f} W"


def _c(v: int) -> str:
    return f"{v} C"


def _mhz(v: int) -> str:
    return f"{v} MHz"


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
            out.append(f"{indent}{key}")
        else:
            out.append(f"{indent}{key:<{max(1, KEY_WIDTH - len(indent))}}: {value}")
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


def gpu_lines(machine: Machine, gpu: Gpu) -> list[Line]:
    lines: list[Line] = [(0, f"GPU {show(gpu.pci_bus_id)}", None)]
    if gpu.state is not GpuState.OK:
        return [*lines, (1, "State", f"{gpu.state.value}: {gpu.state_detail}")]
    lines += [
        (1, "Index", str(gpu.index)),
        (1, "Product Name", show(gpu.name)),
        (1, "GPU UUID", show(gpu.uuid)),
        (1, "Minor Number", show(gpu.minor_number)),
        (1, "Persistence Mode", show(gpu.persistence_mode, _enabled)),
        (1, "MIG Mode", None),
        (2, "Current", show(gpu.mig_mode_current, _enabled)),
        (2, "Pending", show(gpu.mig_mode_pending, _enabled)),
    ]
    d = gpu.details.value
    if d is None:
        lines.append((1, "Details", _na(gpu.details)))
    else:
        lines += _identity(gpu, d)
    lines += _pci(gpu, d)
    lines += [
        (1, "Fan Speed", show(gpu.fan_percent, lambda v: f"{v} %")),
        (1, "Performance State", show(gpu.pstate, lambda p: f"P{p}")),
    ]
    lines += _events(gpu, d)
    lines += _memory(gpu, d)
    lines += [(1, "Compute Mode", show(gpu.compute_mode, lambda c: c.value))]
    lines += _utilization(gpu, d)
    lines += _ecc(gpu, d)
    lines += _temperature(gpu, d)
    lines += _power(gpu, d)
    if d is not None:
        lines += _clocks(d)
        lines += _nvlink(d)
        lines += _affinity(machine, gpu, d)
    lines += _processes(machine, gpu, d)
    return lines


def _identity(gpu: Gpu, d: GpuDetails) -> list[Line]:
    i = d.identity
    return [
        (1, "Display Mode", show(i.display_mode, _enabled)),
        (1, "Display Active", show(i.display_active, _enabled)),
        (1, "Addressing Mode", show(i.addressing_mode, lambda v: ADDRESSING_MODES.get(v, str(v)))),
        (1, "Accounting Mode", show(i.accounting_mode, _enabled)),
        (1, "Accounting Mode Buffer Size", show(i.accounting_buffer_size)),
        (1, "Serial Number", show(i.serial)),
        (1, "VBIOS Version", show(i.vbios_version)),
        (1, "Board ID", show(i.board_id, hex)),
        (1, "Board Part Number", show(i.board_part_number)),
        (1, "Module Id", show(i.module_id)),
        (1, "Inforom Version", None),
        (2, "Image Version", show(i.inforom_image)),
        (2, "OEM Object", show(i.inforom_oem)),
        (2, "ECC Object", show(i.inforom_ecc)),
        (2, "Power Management Object", show(i.inforom_power)),
        (2, "Checksum Validation", show(gpu.inforom_valid, lambda v: "valid" if v else "INVALID")),
        (1, "GPU C2C Mode", show(i.c2c_enabled, _enabled)),
        (1, "GPU Recovery Action", show(gpu.recovery_action, lambda v: "None" if v == 0 else str(v))),
        (1, "GSP Firmware Version", show(i.gsp_firmware_version)),
        (1, "GSP Firmware Mode", None),
        (2, "Current", show(i.gsp_mode_current, _enabled)),
        (2, "Default", show(i.gsp_mode_default, _enabled)),
    ]


def _pci(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    p = gpu.pcie
    lines: list[Line] = [(1, "PCI", None)]
    if d is not None:
        i = d.identity
        lines += [
            (2, "Bus", show(i.pci_bus, lambda v: f"0x{v:02X}")),
            (2, "Device", show(i.pci_device, lambda v: f"0x{v:02X}")),
            (2, "Domain", show(i.pci_domain, lambda v: f"0x{v:04X}")),
            (2, "Base Classcode", show(i.pci_base_class, lambda v: f"0x{v:X}")),
            (2, "Sub Classcode", show(i.pci_sub_class, lambda v: f"0x{v:X}")),
            (2, "Device Id", show(i.pci_device_id, lambda v: f"0x{v:08X}")),
        ]
    lines.append((2, "Bus Id", show(gpu.pci_bus_id)))
    if d is not None:
        lines.append((2, "Sub System Id", show(d.identity.pci_subsystem_id, lambda v: f"0x{v:08X}")))
    lines += [
        (2, "GPU Link Info", None),
        (3, "PCIe Generation", None),
        (4, "Max", show(p.gen_max)),
        (4, "Current", show(p.gen_current)),
        (4, "Device Max", show(p.gen_gpu_max)),
        (3, "Link Width", None),
        (4, "Max", show(p.width_max, lambda v: f"{v}x")),
        (4, "Current", show(p.width_current, lambda v: f"{v}x")),
    ]
    if d is not None:
        lines += [
            (2, "Replays Since Reset", show(d.pcie.replay_counter)),
            (2, "Tx Throughput", show(d.pcie.tx_kbps, lambda v: f"{v} KB/s")),
            (2, "Rx Throughput", show(d.pcie.rx_kbps, lambda v: f"{v} KB/s")),
        ]
    return lines


def _bit_state(bit: int) -> Callable[[int], str]:
    return lambda mask: "Active" if mask & bit else "Not Active"


def _events(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    lines: list[Line] = [(1, "Clocks Event Reasons", None)]
    active = gpu.clock_event_reasons
    supported = d.clocks.event_reasons_supported.value if d is not None else None
    for event in CLOCK_EVENTS:
        if supported is not None and not supported & event.bit:
            value = "N/A (not supported)"
        else:
            value = show(active, _bit_state(event.bit))
        lines.append((2, event.label, value))
    if d is not None:
        lines.append((1, "Clocks Event Reasons Counters", None))
        labels = {event.query: event.label for event in CLOCK_EVENTS}
        for name, reading in d.clocks.event_reason_counters_us:
            lines.append((2, labels[name], show(reading, lambda v: f"{v} us")))
    return lines


def _memory(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
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


def _utilization(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    lines: list[Line] = [
        (1, "Utilization", None),
        (2, "GPU", show(gpu.utilization, lambda u: f"{u.gpu_percent} %")),
        (2, "Memory", show(gpu.utilization, lambda u: f"{u.memory_percent} %")),
    ]
    if d is not None:
        c = d.codecs
        pct = lambda v: f"{v} %"  # noqa: E731
        lines += [
            (2, "Encoder", show(c.encoder_percent, pct)),
            (2, "Decoder", show(c.decoder_percent, pct)),
            (2, "JPEG", show(c.jpeg_percent, pct)),
            (2, "OFA", show(c.ofa_percent, pct)),
            (1, "Encoder Stats", None),
            (2, "Active Sessions", show(c.encoder_sessions)),
            (2, "Average FPS", show(c.encoder_average_fps)),
            (2, "Average Latency", show(c.encoder_average_latency_us, lambda v: f"{v} us")),
        ]
    return lines


def _ecc(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    e = gpu.ecc_errors
    lines: list[Line] = [
        (1, "ECC Mode", None),
        (2, "Current", show(gpu.ecc_mode_current, _enabled)),
        (2, "Pending", show(gpu.ecc_mode_pending, _enabled)),
        (1, "ECC Errors", None),
    ]
    for counter in ("volatile", "aggregate"):
        lines.append((2, counter.title(), None))
        if d is not None:
            for loc in d.memory_health.ecc_by_location:
                corrected, uncorrected = getattr(loc, f"{counter}_corrected"), getattr(loc, f"{counter}_uncorrected")
                if corrected.value is None and uncorrected.value is None:
                    continue  # this GPU has no such memory or does not count it
                label = loc.location.replace("_", " ").title().replace("Sram", "SRAM").replace("Cbu", "CBU")
                lines += [
                    (3, f"{label} Correctable", show(corrected)),
                    (3, f"{label} Uncorrectable", show(uncorrected)),
                ]
        lines += [
            (3, "Total Correctable", show(getattr(e, f"{counter}_corrected"))),
            (3, "Total Uncorrectable", show(getattr(e, f"{counter}_uncorrected"))),
        ]
    if d is not None:
        lines += _sram(d)
    rp = gpu.retired_pages
    lines += [
        (1, "Retired Pages", None),
        (2, "Single Bit ECC", show(rp, lambda r: str(r.single_bit))),
        (2, "Double Bit ECC", show(rp, lambda r: str(r.double_bit))),
        (2, "Pending Page Blacklist", show(rp, lambda r: _yes(r.pending))),
    ]
    rr = gpu.remapped_rows
    lines += [
        (1, "Remapped Rows", None if rr.ok else _na(rr)),
    ]
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


def _sram(d: GpuDetails) -> list[Line]:
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


def _temperature(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    lines: list[Line] = [
        (1, "Temperature", None),
        (2, "GPU Current Temp", show(gpu.temperature_c, _c)),
    ]
    if d is not None:
        lines.append((2, "GPU T.Limit Temp (margin)", show(d.temperatures.margin_c, _c)))
    lines += [
        (2, "GPU Shutdown Temp", show(gpu.temperature_shutdown_c, _c)),
        (2, "GPU Slowdown Temp", show(gpu.temperature_slowdown_c, _c)),
    ]
    if d is not None:
        t = d.temperatures
        lines += [
            (2, "GPU Max Operating Temp", show(t.gpu_max_c, _c)),
            (2, "Memory Current Temp", show(t.memory_c, _c)),
            (2, "Memory Max Operating Temp", show(t.memory_max_c, _c)),
        ]
    return lines


def _power(gpu: Gpu, d: GpuDetails | None) -> list[Line]:
    lines: list[Line] = [(1, "GPU Power Readings", None)]
    if d is not None:
        p = d.power
        lines += [
            (2, "Power Management", show(p.management, _enabled)),
            (2, "Power Draw", show(gpu.power_draw_w, _w)),
            (2, "Average Power Draw", show(p.average_w, _w)),
            (2, "Instantaneous Power Draw", show(p.instant_w, _w)),
            (2, "Current Power Limit", show(gpu.power_limit_w, _w)),
            (2, "Requested Power Limit", show(p.requested_limit_w, _w)),
            (2, "Default Power Limit", show(p.default_limit_w, _w)),
            (2, "Min Power Limit", show(p.min_limit_w, _w)),
            (2, "Max Power Limit", show(p.max_limit_w, _w)),
            (2, "Total Energy Consumption", show(p.energy_mj, lambda mj: f"{mj / 1000:.3f} J")),
        ]
    else:
        lines += [
            (2, "Power Draw", show(gpu.power_draw_w, _w)),
            (2, "Current Power Limit", show(gpu.power_limit_w, _w)),
        ]
    return lines


def _clock_lines(title: str, clocks: ClockSet, which: tuple[str, ...]) -> list[Line]:
    return [
        (1, title, None),
        *((2, name.title() if name != "sm" else "SM", show(getattr(clocks, name), _mhz)) for name in which),
    ]


def _clocks(d: GpuDetails) -> list[Line]:
    c = d.clocks
    four = ("graphics", "sm", "memory", "video")
    return [
        *_clock_lines("Clocks", c.current, four),
        *_clock_lines("Applications Clocks", c.applications, ("graphics", "memory")),
        *_clock_lines("Default Applications Clocks", c.default_applications, ("graphics", "memory")),
        *_clock_lines("Max Clocks", c.max, four),
    ]


def _nvlink(d: GpuDetails) -> list[Line]:
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


def _affinity(machine: Machine, gpu: Gpu, d: GpuDetails) -> list[Line]:
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


def topology_matrix(machine: Machine) -> str:
    """`nvidia-smi topo -m`: how each GPU reaches each other one, and its CPU / NUMA affinity."""
    gpus = [g for g in machine.gpus if g.state is GpuState.OK]
    names = [f"GPU{g.index}" for g in gpus]
    header = ["", *names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    rows = [header]
    for g in gpus:
        d = g.details.value
        a = d.affinity.value if d is not None else None
        cells = [f"GPU{g.index}"]
        for other in gpus:
            if other.index == g.index:
                cells.append("X")
                continue
            if a is None:
                cells.append("?")
                continue
            peer = next((p for p in a.peers if p.gpu == other.index), None)
            if peer is None:
                cells.append("?")
            elif peer.nvlinks:
                cells.append(f"NV{peer.nvlinks}")
            else:
                cells.append(peer.common_ancestor.get("N/A"))
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
