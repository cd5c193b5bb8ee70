"""`gpudiag list --details` (``-q``): every fact of each GPU, in `nvidia-smi -q`'s sections and words.

Plain text (no colour, no rich), laid out as driver 580's nvidia-smi lays out ``-q`` (the H100's
``docs/hardware/h100-80gb-hbm3-driver580/nvidia-smi-q.txt``): the same labels in the same order.
A missing value prints ``N/A`` with its reason. What gpudiag shows beyond nvidia-smi (the NVML
index, NVLink, topology, per-process load, the absolute temperature limits, ...) follows in one
last section per GPU, ``gpudiag``; a machine with more than one GPU ends with the
`nvidia-smi topo -m` matrix. ``--display`` keeps the sections nvidia-smi's ``-d`` keeps; the same
lines, with their XML element names, make ``-q -x`` (:mod:`gpudiag.render.details_xml`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.errors import UsageError
from gpudiag.model import Gpu, GpuState, Machine, Reading, Reason, cuda_version_text
from gpudiag.readings import CLOCK_EVENTS, GPU_READINGS, pick, reading_at
from gpudiag.render.details_lines import Q_LINES, SKELETON
from gpudiag.render.format import Q_NA_RULES, VALUE_FORMATS, as_nvidia_smi_shows
from gpudiag.render.printable import printable
from gpudiag.units import mib

if TYPE_CHECKING:
    from gpudiag.details import GpuDetails

KEY_WIDTH = 55  # "    Key ... : value", as driver 580's nvidia-smi -q aligns its values

# A line: (indent level, its label in the text or None when only -q -x has it, its value or None for
# a heading, its -q -x element or None when only the text has it).
Line = tuple[int, "str | None", "str | None", "str | None"]
Block = Callable[["Machine", "Gpu", "GpuDetails | None", "frozenset[str] | None"], list[Line]]

# nvidia-smi -d's names and the sections (-q's top-level labels) each keeps.
DISPLAY: dict[str, tuple[str, ...]] = {
    "MEMORY": ("FB Memory Usage", "BAR1 Memory Usage", "Conf Compute Protected Memory Usage"),
    "UTILIZATION": ("Utilization",),
    "ECC": ("ECC Mode", "ECC Errors"),
    "TEMPERATURE": ("Temperature",),
    "POWER": (
        "GPU Power Readings",
        "GPU Memory Power Readings",
        "Module Power Readings",
        "Power Smoothing",
        "Workload Power Profiles",
    ),
    "CLOCK": (
        "Clocks",
        "Applications Clocks",
        "Default Applications Clocks",
        "Deferred Clocks",
        "Max Clocks",
        "Max Customer Boost Clocks",
        "Clock Policy",
    ),
    "COMPUTE": ("Compute Mode",),
    "PIDS": ("Processes",),
    "PERFORMANCE": (
        "Performance State",
        "Clocks Event Reasons",
        "Clocks Event Reasons Counters",
        "Sparse Operation Mode",
    ),
    "SUPPORTED_CLOCKS": ("Supported Clocks",),
    "PAGE_RETIREMENT": ("Retired Pages",),
    "ACCOUNTING": ("Accounting Mode", "Accounting Mode Buffer Size"),
    "ENCODER_STATS": ("Encoder Stats",),
    "SUPPORTED_GPU_TARGET_TEMP": ("Supported GPU Target Temp",),
    "VOLTAGE": ("Voltage",),
    "FBC_STATS": ("FBC Stats",),
    "ROW_REMAPPER": ("Remapped Rows",),
    "RESET_STATUS": ("GPU Recovery Action",),
    "GSP_FIRMWARE_VERSION": ("GSP Firmware Version",),
    "POWER_SMOOTHING": ("Power Smoothing",),
    "POWER_PROFILES": ("Workload Power Profiles",),
}


def display_sections(spec: str) -> frozenset[str]:
    """The sections ``--display`` names (nvidia-smi's -d names, comma-separated, any case)."""
    names = [part.strip().upper().replace(" ", "_") for part in spec.split(",") if part.strip()]
    unknown = [name for name in names if name not in DISPLAY]
    if unknown or not names:
        known = ", ".join(DISPLAY)
        raise UsageError(
            f"--display {spec!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'} (known: {known})"
        )
    return frozenset(section for name in names for section in DISPLAY[name])


def _na(reading: Reading[Any]) -> str:
    note = reading.detail or (reading.reason.label if reading.reason else "")
    return f"N/A ({note})" if note else "N/A"


def show(reading: Reading[Any], fmt: Callable[[Any], str] = str) -> str:
    return fmt(reading.value) if reading.value is not None else _na(reading)


def _mib(b: int) -> str:
    return f"{mib(b)} MiB"  # rounded up, as nvidia-smi rounds (gpudiag.units.mib)


def _yes(v: bool) -> str:
    return "Yes" if v else "No"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days} days, {clock}" if days else clock


def timestamp(machine: Machine) -> str:
    """-q's Timestamp: when the machine was read (a replay: when its snapshot was taken)."""
    if machine.collected_at <= 0:
        return _na(Reading.missing(Reason.NOT_RECORDED))
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(machine.collected_at))


def _format(lines: list[Line]) -> str:
    out = []
    for level, key, value, _ in lines:
        if key is None:
            continue  # -q -x only
        indent = "    " * level
        if value is None:
            out.append(f"{indent}{printable(key)}")
        else:
            out.append(f"{indent}{printable(key):<{max(1, KEY_WIDTH - len(indent))}}: {printable(value)}")
    return "\n".join(out)


def header(machine: Machine) -> list[Line]:
    """The lines above the GPUs."""
    nvml = machine.nvml
    return [
        (0, "Timestamp", timestamp(machine), "timestamp"),
        (0, "Driver Version", show(nvml.driver_version), "driver_version"),
        (0, "CUDA Version", show(nvml.cuda_driver_version, cuda_version_text), "cuda_version"),
        (0, "", None, None),
        (0, "Attached GPUs", str(len(machine.gpus)), "attached_gpus"),
    ]


def render(machine: Machine, gpus: tuple[Gpu, ...], display: frozenset[str] | None = None) -> str:
    """The whole report for ``gpus`` (a selection of ``machine.gpus``); ``display``: only these sections."""
    text = "\n==============GPUDIAG LOG==============\n\n" + _format(header(machine))
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            from gpudiag.render.gpu_list import handle_error

            text += "\n" + handle_error(gpu)  # nvidia-smi's line for a GPU NVML cannot open
            continue
        text += f"\nGPU {printable(show(gpu.pci_bus_id))}\n" + _format(gpu_lines(machine, gpu, display))
    if len(machine.gpus) > 1 and display is None:
        text += "\n\n" + (topology_matrix(machine) if _peers_read(machine) else _NO_MATRIX.format(len(machine.gpus)))
    return text + "\n"


_NO_MATRIX = "Topology\n{} GPUs: how each reaches each other one is `gpudiag topo`'s to show"


def _peers_read(machine: Machine) -> bool:
    """Whether the details list each GPU's peers: not beyond PEERS_READ_UP_TO usable GPUs (N² lines)."""
    from gpudiag.details import PEERS_READ_UP_TO

    return sum(g.state is GpuState.OK for g in machine.gpus) <= PEERS_READ_UP_TO


# nvidia-smi writes "GPU Memory Power Readings " with a trailing blank (driver 580); gpudiag's output
# carries no blanks at line ends (render.printable.strip_trailing_blanks), so it does not.
_TEXT_LABELS: dict[str, str] = {}


class _Shown(msgspec.Struct, frozen=True):
    """A reading's -q line: its key, the part of its value shown, and how."""

    key: str
    part: int | str | None
    show: Callable[[Any], str]
    unit: str
    details: bool  # a reading of the details


class _Entry(msgspec.Struct, frozen=True):
    """One line of the skeleton."""

    level: int
    path: str  # its labels from the GPU down, "/"-joined
    xml: str | None
    block: str  # a block's name, or ""
    details_only: bool
    text: bool  # shown in the text
    xml_too: bool  # shown in -q -x
    on_display: bool  # in the text only when --display names its section
    reason: str  # a line NVML has no call for: why


def _q_lines(units: dict[str, str]) -> dict[str, _Shown]:
    """Each -q line a reading fills (Q_LINES: ``PATH[:PART][=FORMAT]``), by its path."""
    out = {}
    for key, entries in Q_LINES.items():
        for entry in entries:
            entry, _, fmt = entry.partition("=")
            path, _, part = entry.partition(":")
            index: int | str | None = int(part) if part.isdigit() else part or None
            out[path] = _Shown(key, index, VALUE_FORMATS[fmt], units[key], key.startswith("details."))
    return out


@functools.cache
def layout() -> tuple[_Entry, ...]:
    """The skeleton, parsed."""
    out = []
    headings: list[str] = []
    shy: list[bool] = []  # whether each heading above shows in the text only on --display
    details_only = text_only = False
    for raw in SKELETON.strip("\n").splitlines():
        stripped = raw.strip()
        if stripped in ("[details]", "[/details]"):
            details_only = stripped == "[details]"
            continue
        if stripped in ("[text]", "[/text]"):
            text_only = stripped == "[text]"
            continue
        level = (len(raw) - len(raw.lstrip())) // 4 + 1
        del headings[level - 1 :]
        del shy[level - 1 :]
        body, _, reason = stripped.partition(" !")
        flags = {word for word in body.split() if word.startswith("%")}
        body = " ".join(word for word in body.split() if not word.startswith("%"))
        label, _, xml = body.partition(" @")
        if label.startswith("{"):
            out.append(
                _Entry(level, "/".join(headings), None, label[1:-1], details_only, True, not text_only, False, "")
            )
            continue
        headings.append(label)
        shy.append("%display" in flags or any(shy))
        out.append(
            _Entry(
                level,
                "/".join(headings),
                xml or None,
                "",
                details_only,
                "%xml" not in flags,
                not text_only,
                shy[-1],
                reason,
            )
        )
    return tuple(out)


@functools.cache
def shown_lines() -> dict[str, _Shown]:
    """Each -q line a reading fills, by its path."""
    from gpudiag.details import DETAIL_READINGS

    return _q_lines({row.key: row.unit for row in (*GPU_READINGS, *DETAIL_READINGS)})


def _reading_line(gpu: Gpu, shown: _Shown, xml: bool) -> str:
    reading = as_nvidia_smi_shows(shown.key, reading_at(gpu, shown.key), Q_NA_RULES)
    if shown.part is not None and reading.value is not None:
        value = pick(reading.value, shown.part)
        reading = value if isinstance(value, Reading) else Reading.of(value)
    if reading.value is None:
        return "N/A" if xml else _na(reading)
    text = shown.show(reading.value)
    return f"{text} {shown.unit}" if shown.unit else text


def gpu_lines(machine: Machine, gpu: Gpu, display: frozenset[str] | None = None, xml: bool = False) -> list[Line]:
    """A GPU's lines under its ``GPU <bus id>`` line: the text's (``xml`` False) or -q -x's, only
    ``display``'s sections when given."""
    d = gpu.details.value
    rows = shown_lines()
    lines: list[Line] = []
    headings: list[list[Any]] = []  # [line, shown yet] of the headings above the current line
    for entry in layout():
        if (entry.details_only and d is None) or not (entry.xml_too if xml else entry.text):
            continue
        if not xml and entry.on_display and (display is None or entry.path.split("/")[0] not in display):
            continue
        del headings[entry.level - 1 :]
        key = entry.path.rsplit("/", 1)[-1] if entry.path else ""
        label = _TEXT_LABELS.get(key, key)
        if entry.block:
            block = [line for line in _BLOCKS[entry.block](machine, gpu, d, display) if _kept(line, xml)]
        elif entry.path in rows:
            shown = rows[entry.path]
            value = _reading_line(gpu, shown, xml)
            block = [] if shown.details and d is None else [(entry.level, label, value, entry.xml)]
        elif entry.reason:
            value = "N/A" if xml else f"N/A ({entry.reason})"
            block = [(entry.level, label, value, entry.xml)]
        else:
            headings.append([(entry.level, label, None, entry.xml), False])
            continue
        if block:
            lines += [line for line, done in headings if not done]
            for heading in headings:
                heading[1] = True
            lines += block
    if display is not None:
        lines = _sections(lines, display)
    return lines


def _kept(line: Line, xml: bool) -> bool:
    return line[3] is not None if xml else line[1] is not None


def _sections(lines: list[Line], display: frozenset[str]) -> list[Line]:
    """Only the top-level sections ``display`` names, with everything under them."""
    out: list[Line] = []
    keep = False
    for line in lines:
        if line[0] == 1:
            keep = (line[1] or "").rstrip() in display
        if keep:
            out.append(line)
    return out


# -- the blocks: composite readings, laid out by hand -------------------------------------------


def _index(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    return [(2, "Index", str(gpu.index), None)]


def _details_missing(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    return [(2, "Details", _na(gpu.details), None)] if d is None else []


def _memory_lines(level: int, label: str, xml: str, reading: Reading[Any], parts: tuple[str, ...]) -> list[Line]:
    """A memory section: Total, Used, Free (and Reserved) in whole MiB, rounded up as nvidia-smi does."""
    value = reading.value
    if value is None:
        return [(level, label, _na(reading), None), (level, None, "N/A", xml)]
    lines: list[Line] = [(level, label, None, xml)]
    for part in parts:
        amount = getattr(value, f"{part}_bytes")
        text = show(amount, _mib) if isinstance(amount, Reading) else _mib(amount)
        lines.append((level + 1, part.title(), text, part))
    return lines


def _memory(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    lines = _memory_lines(1, "FB Memory Usage", "fb_memory_usage", gpu.memory, ("total", "reserved", "used", "free"))
    if d is not None:
        lines += _memory_lines(1, "BAR1 Memory Usage", "bar1_memory_usage", d.bar1, ("total", "used", "free"))
        protected = d.identity.protected_memory_bytes
        if protected.value is None:
            lines += [(1, "Conf Compute Protected Memory Usage", _na(protected), None)]
            lines += [(1, None, "N/A", "cc_protected_memory_usage")]
        else:
            lines += [(1, "Conf Compute Protected Memory Usage", None, "cc_protected_memory_usage")]
            lines += [
                (2, label.title(), _mib(n), label)
                for label, n in zip(("total", "used", "free"), protected.value, strict=True)
            ]
    return lines


def _has_bit(bit: int, mask: int) -> bool:
    return bool(mask & bit)


# Driver 580's order of the clock event reasons in -q, and which it shows under HW Slowdown.
_EVENT_ORDER = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "display_clock_setting",
)
_UNDER_HW_SLOWDOWN = ("hw_thermal_slowdown", "hw_power_brake_slowdown")
_EVENT_XML = {"display_clock_setting": "display_clocks_setting"}


def _clock_events(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """Each clock event reason, active or not ("not supported" where the GPU's mask lacks it)."""
    lines: list[Line] = [(1, "Clocks Event Reasons", None, "clocks_event_reasons")]
    active = gpu.clock_event_reasons
    supported = d.clocks.event_reasons_supported.value if d is not None else None
    events = {event.query: event for event in CLOCK_EVENTS}
    for name in _EVENT_ORDER:
        event = events[name]
        if supported is not None and not supported & event.bit:
            value = "N/A (not supported)"
        else:
            value = show(active.map(functools.partial(_has_bit, event.bit)), VALUE_FORMATS["active"])
        xml = f"clocks_event_reason_{_EVENT_XML.get(name, name)}"
        xml_value = "N/A" if value.startswith("N/A") else value
        if name in _UNDER_HW_SLOWDOWN:  # nested in the text, not in the XML
            lines += [(3, event.label, value, None), (2, None, xml_value, xml)]
        else:
            lines += [(2, event.label, value, None), (2, None, xml_value, xml)]
    return lines


def _sram(d: GpuDetails) -> Any:
    return d.memory_health.sram.value


def _location(d: GpuDetails, name: str) -> Any:
    return next((loc for loc in d.memory_health.ecc_by_location if loc.location == name), None)


def _count(location: Any, attr: str) -> str:
    return show(getattr(location, attr)) if location is not None else "N/A (not supported)"


def _ecc_counts(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """ECC counts by kind: driver 580's SRAM (parity, SEC-DED) and DRAM lines where the GPU reports
    SRAM errors by kind (Hopper and later), the SRAM and DRAM counts of each location before."""
    if d is None:
        return []
    dram, sram_location, sram = _location(d, "device_memory"), _location(d, "sram"), _sram(d)
    lines: list[Line] = []
    for counter in ("volatile", "aggregate"):
        lines.append((2, counter.title(), None, counter))
        if sram is not None:
            cells = [
                ("SRAM Correctable", str(getattr(sram, f"{counter}_corrected")), "sram_correctable"),
                (
                    "SRAM Uncorrectable Parity",
                    str(getattr(sram, f"{counter}_uncorrected_parity")),
                    "sram_uncorrectable_parity",
                ),
                (
                    "SRAM Uncorrectable SEC-DED",
                    str(getattr(sram, f"{counter}_uncorrected_secded")),
                    "sram_uncorrectable_secded",
                ),
            ]
        else:
            cells = [
                ("SRAM Correctable", _count(sram_location, f"{counter}_corrected"), "sram_correctable"),
                ("SRAM Uncorrectable", _count(sram_location, f"{counter}_uncorrected"), "sram_uncorrectable"),
            ]
        cells += [
            ("DRAM Correctable", _count(dram, f"{counter}_corrected"), "dram_correctable"),
            ("DRAM Uncorrectable", _count(dram, f"{counter}_uncorrected"), "dram_uncorrectable"),
        ]
        if counter == "aggregate" and sram is not None:
            cells.append(("SRAM Threshold Exceeded", _yes(sram.threshold_exceeded), "sram_threshold_exceeded"))
        lines += [(3, label, value, xml) for label, value, xml in cells]
    if sram is not None:
        lines.append((2, "Aggregate Uncorrectable SRAM Sources", None, "aggregate_uncorrectable_sram_sources"))
        for label, attr, xml in (
            ("SRAM L2", "aggregate_l2", "sram_l2"),
            ("SRAM SM", "aggregate_sm", "sram_sm"),
            ("SRAM Microcontroller", "aggregate_mcu", "sram_microcontroller"),
            ("SRAM PCIE", "aggregate_pcie", "sram_pcie"),
            ("SRAM Other", "aggregate_other", "sram_other"),
        ):
            lines.append((3, label, str(getattr(sram, attr)), xml))
    return lines


def _retired_pages(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """The counts in the text; in -q -x each cause's count and its pages' addresses, as nvidia-smi nests them."""
    pages = gpu.retired_pages
    if pages.reason is Reason.NOT_READ:
        return []
    p = pages.value
    lines: list[Line] = [(1, "Retired Pages", None, "retired_pages")]
    lines += [
        (2, "Single Bit ECC", show(pages, lambda v: str(v.single_bit)), None),
        (2, "Double Bit ECC", show(pages, lambda v: str(v.double_bit)), None),
        (2, "Pending Page Blacklist", show(pages, lambda v: _yes(v.pending)), None),
    ]
    for cause, attr, key in (
        ("multiple_single_bit_retirement", "single_bit", "retired_single_bit_addresses"),
        ("double_bit_retirement", "double_bit", "retired_double_bit_addresses"),
    ):
        lines.append((2, None, None, cause))
        lines.append((3, None, str(getattr(p, attr)) if p is not None else "N/A", "retired_count"))
        addresses = reading_at(gpu, f"details.memory_health.{key}").value if p is not None else None
        if addresses:
            lines.append((3, None, None, "retired_pagelist"))
            lines += [(4, None, f"0x{a:016x}", "retired_page_address") for a in addresses]
        else:
            lines.append((3, None, "N/A" if p is None or addresses is None else "None", "retired_pagelist"))
    pending = _yes(p.pending) if p is not None else "N/A"
    lines += [(2, None, pending, "pending_blacklist"), (2, None, pending, "pending_retirement")]
    return lines


def _remapped_rows(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    rr = gpu.remapped_rows
    if rr.reason is Reason.NOT_READ:
        return []
    if rr.value is None:
        return [(1, "Remapped Rows", _na(rr), None), (1, None, "N/A", "remapped_rows")]
    r = rr.value
    lines: list[Line] = [
        (1, "Remapped Rows", None, "remapped_rows"),
        (2, "Correctable Error", str(r.correctable), "remapped_row_corr"),
    ]
    h = d.memory_health if d is not None else None
    if h is not None:
        lines.append(
            (2, "Inactive Correctable Error", show(h.remapped_inactive_correctable), "remapped_row_corr_inactive")
        )
    lines.append((2, "Uncorrectable Error", str(r.uncorrectable), "remapped_row_unc"))
    if h is not None:
        lines.append(
            (2, "Inactive Uncorrectable Error", show(h.remapped_inactive_uncorrectable), "remapped_row_unc_inactive")
        )
    lines += [
        (2, "Pending", _yes(r.pending), "remapped_row_pending"),
        (2, "Remapping Failure Occurred", _yes(r.failure), "remapped_row_failure"),
    ]
    if h is not None:
        histogram = h.row_remap_histogram
        if histogram.value is None:
            lines += [
                (2, "Bank Remap Availability Histogram", _na(histogram), None),
                (2, None, "N/A", "row_remapper_histogram"),
            ]
        else:
            lines.append((2, "Bank Remap Availability Histogram", None, "row_remapper_histogram"))
            for key in ("max", "high", "partial", "low", "none"):
                count = f"{getattr(histogram.value, key)} bank(s)"
                lines.append((3, key.title(), count, f"row_remapper_histogram_{key}"))
    return lines


def _supported_clocks(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """In -q -x always; in the text only with --display SUPPORTED_CLOCKS, as nvidia-smi."""
    if d is None:
        return []
    text = display is not None and "Supported Clocks" in display
    supported = d.clocks.supported
    if supported.value is None:
        return [(1, "Supported Clocks" if text else None, _na(supported), None), (1, None, "N/A", "supported_clocks")]
    lines: list[Line] = [(1, "Supported Clocks" if text else None, None, "supported_clocks")]
    for memory, graphics in supported.value:
        lines += [(2, None, None, "supported_mem_clock"), (3, None, f"{memory} MHz", "value")]
        lines += [(3, None, f"{clock} MHz", "supported_graphics_clock") for clock in graphics]
        if text:
            lines.append((2, "Memory", f"{memory} MHz", None))
            lines += [(3, "Graphics", f"{clock} MHz", None) for clock in graphics]
    return lines


def _instance(value: int | None) -> str:
    return "N/A" if value is None else str(value)


def _processes(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """nvidia-smi's process list: each process's instance ids, PID, type, name and GPU memory."""
    procs = gpu.processes
    if procs.value is None:
        return [
            (1, "Processes", _na(procs), None),
            (1, None, "N/A", "processes"),
            (1, None, None, "accounted_processes"),
        ]
    if not procs.value:
        return [(1, "Processes", "None", None), (1, None, None, "processes"), (1, None, None, "accounted_processes")]
    lines: list[Line] = [(1, "Processes", None, "processes")]
    for p in procs.value:
        used = show(p.used_memory_bytes, _mib)
        gi, ci = _instance(p.gpu_instance_id), _instance(p.compute_instance_id)
        kind = p.kind.value
        lines += [
            (2, "GPU instance ID", gi, None),
            (2, "Compute instance ID", ci, None),
            (2, "Process ID", str(p.pid), None),
            (3, "Type", kind, None),
            (3, "Name", show(p.host.name), None),
            (3, "Used GPU Memory", used, None),
            (2, None, None, "process_info"),
            (3, None, gi, "gpu_instance_id"),
            (3, None, ci, "compute_instance_id"),
            (3, None, str(p.pid), "pid"),
            (3, None, kind, "type"),
            (3, None, show(p.host.name), "process_name"),
            (3, None, "N/A" if p.used_memory_bytes.value is None else used, "used_memory"),
        ]
    return [*lines, (1, None, None, "accounted_processes")]


def _mig_devices(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """Each MIG device: its instances, what it is given of the GPU, its memory and BAR1."""
    if gpu.mig_mode_current.value is not True:
        return [(1, None, "None", "mig_devices")]
    if not gpu.mig_devices:
        return [(1, "MIG Devices", "None", "mig_devices")]
    lines: list[Line] = [(1, "MIG Devices", None, "mig_devices")]
    for mig in gpu.mig_devices:
        lines += [
            (2, "MIG Device", None, "mig_device"),
            (3, "Index", str(mig.index), "index"),
            (3, "GPU Instance ID", show(mig.gpu_instance_id), "gpu_instance_id"),
            (3, "Compute Instance ID", show(mig.compute_instance_id), "compute_instance_id"),
        ]
        attributes = mig.attributes.value
        if attributes is None:
            lines += [(3, "Device Attributes", _na(mig.attributes), None), (3, None, "N/A", "device_attributes")]
        else:
            lines += [(3, "Device Attributes", None, "device_attributes"), (4, "Shared", None, "shared")]
            lines += [
                (5, label, str(getattr(attributes, attr)), xml)
                for label, attr, xml in (
                    ("Multiprocessor count", "multiprocessors", "multiprocessor_count"),
                    ("Copy Engine count", "copy_engines", "copy_engine_count"),
                    ("Encoder count", "encoders", "encoder_count"),
                    ("Decoder count", "decoders", "decoder_count"),
                    ("OFA count", "ofas", "ofa_count"),
                    ("JPG count", "jpeg_decoders", "jpg_count"),
                )
            ]
        lines += _memory_lines(
            3, "FB Memory Usage", "fb_memory_usage", mig.memory, ("total", "reserved", "used", "free")
        )
        lines += _memory_lines(3, "BAR1 Memory Usage", "bar1_memory_usage", mig.bar1, ("total", "used", "free"))
    return lines


def _process_load(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    """Each process's share of the GPU (nvmlDeviceGetProcessUtilization) and its host view."""
    if d is None or not gpu.processes.get(()):
        return []
    if d.process_load.value is None:
        return [(2, "Process Load", _na(d.process_load), None)]
    loads = {p.pid: p for p in d.process_load.value}
    lines: list[Line] = [(2, "Process Load", None, None)]
    for p in gpu.processes.get(()):
        load = loads.get(p.pid)
        if load is None:
            lines.append((3, f"Process {p.pid}", "no sample", None))
            continue
        lines += [
            (3, f"Process {p.pid}", None, None),
            (4, "SM Utilization", f"{load.sm_percent} %", None),
            (4, "Memory Bandwidth", f"{load.memory_percent} %", None),
            (4, "Encoder / Decoder", f"{load.encoder_percent} % / {load.decoder_percent} %", None),
            (4, "Host CPU", show(load.cpu_percent, lambda v: f"{v:.1f} %"), None),
            (4, "Host Memory (RSS)", show(load.rss_bytes, _mib), None),
            (4, "Running Time", show(load.started_at, lambda t: _running(machine, t)), None),
        ]
    return lines


def _running(machine: Machine, started: float) -> str:
    """How long a process had run when the machine was read (a snapshot without its time: unknown)."""
    if machine.collected_at <= 0:
        return _na(Reading.missing(Reason.NOT_RECORDED, "the snapshot does not say when it was taken"))
    return _duration(machine.collected_at - started)


def _nvlink(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    if d is None:
        return []
    if d.nvlinks.value is None:
        return [(2, "NVLink", _na(d.nvlinks), None)]
    lines: list[Line] = [(2, "NVLink", f"{sum(1 for x in d.nvlinks.value if x.active.get(False))} active", None)]
    for link in d.nvlinks.value:
        state = show(link.active, lambda a: "Active" if a else "Inactive")
        lines += [
            (3, f"Link {link.link}", state, None),
            (4, "Version", show(link.version), None),
            (4, "Speed", show(link.speed_mbps, lambda v: f"{v / 1000:.3f} GB/s"), None),
            (4, "Remote", f"{show(link.remote_type)} {show(link.remote_pci_bus_id)}", None),
            (4, "Replay Errors", show(link.replay_errors), None),
            (4, "Recovery Errors", show(link.recovery_errors), None),
            (4, "CRC Flit Errors", show(link.crc_flit_errors), None),
            (4, "CRC Data Errors", show(link.crc_data_errors), None),
        ]
    return lines


def _topology(machine: Machine, gpu: Gpu, d: GpuDetails | None, display: frozenset[str] | None) -> list[Line]:
    if d is None:
        return []
    if d.affinity.value is None:
        return [(2, "Topology", _na(d.affinity), None)]
    a = d.affinity.value
    lines: list[Line] = [
        (2, "Topology", None, None),
        (3, "CPU Affinity", show(a.cpus), None),
        (3, "NUMA Affinity", show(a.numa_nodes), None),
        (3, "GPU NUMA ID", show(gpu.numa_node), None),
    ]
    for peer in a.peers:
        link = f"NV{peer.nvlinks}" if peer.nvlinks else show(peer.common_ancestor)
        lines.append((3, f"GPU {peer.gpu}", f"{link}, P2P read {show(peer.p2p_read)}", None))
    if not a.peers and not _peers_read(machine):
        lines.append((3, "Peers", f"{len(machine.gpus) - 1} GPUs, not listed here: see gpudiag topo", None))
    return lines


_BLOCKS: dict[str, Block] = {
    "index": _index,
    "details": _details_missing,
    "mig_devices": _mig_devices,
    "clock_events": _clock_events,
    "memory": _memory,
    "ecc_counts": _ecc_counts,
    "retired_pages": _retired_pages,
    "remapped_rows": _remapped_rows,
    "supported_clocks": _supported_clocks,
    "processes": _processes,
    "process_load": _process_load,
    "nvlink": _nvlink,
    "topology": _topology,
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
