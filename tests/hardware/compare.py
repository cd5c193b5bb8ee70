"""gpudiag's output against nvidia-smi's of the same GPU: field by field, label by label.

Pure functions over the two outputs (text, XML, CSV), used by ``python -m tests.acceptance``: each
difference is classed, with its reason, as one of

- ``moment``: a reading that changes from one moment to the next (power, temperature, clocks,
  utilization, PCIe traffic, memory in use, the timestamp): the two tools read it a moment apart;
- ``not in NVML``: nvidia-smi prints a value NVML has no call for (gpudiag says N/A and why);
- ``board`` / ``not recorded``: offline only, where the captures mix boards of one kind or predate
  a call (see :data:`OFFLINE_ONLY`);
- ``DIFF``: anything else, a bug to fix (the acceptance fails).

A gpudiag ``N/A (reason)`` matches nvidia-smi's ``N/A``; gpudiag's own section of ``-q`` (``gpudiag``)
is not nvidia-smi's and is not compared.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field

MOMENT, NOT_IN_NVML, BOARD, NOT_RECORDED, DIFF = "moment", "not in NVML", "board", "not recorded", "DIFF"

# -q lines (their paths under the GPU) whose values change from moment to moment, and why.
MOMENT_LINES: dict[str, str] = {
    "Timestamp": "the time each tool read the GPU",
    "PCI/Tx Throughput": "PCIe traffic over the last 20 ms",
    "PCI/Rx Throughput": "PCIe traffic over the last 20 ms",
    "PCI/GPU Link Info/PCIe Generation/Current": "the link trains down when the GPU idles",
    "PCI/GPU Link Info/PCIe Generation/Device Current": "the link trains down when the GPU idles",
    "PCI/GPU Link Info/Link Width/Current": "the link narrows when the GPU idles",
    "Fan Speed": "the fan follows the temperature",
    "Performance State": "the power state follows the load",
    "Clocks Event Reasons/*": "which reasons hold the clocks changes with the load",
    "Clocks Event Reasons Counters/*": "time spent in each reason keeps counting",
    "FB Memory Usage/Used": "memory in use",
    "FB Memory Usage/Free": "memory in use",
    "BAR1 Memory Usage/Used": "BAR1 mappings come and go",
    "BAR1 Memory Usage/Free": "BAR1 mappings come and go",
    "Utilization/*": "load sampled over the last period",
    "Encoder Stats/*": "encoder sessions come and go",
    "FBC Stats/*": "frame-capture sessions come and go",
    "Temperature/GPU Current Temp": "temperature",
    "Temperature/GPU T.Limit Temp": "temperature (distance to the T.Limit)",
    "Temperature/Memory Current Temp": "temperature",
    "GPU Power Readings/Average Power Draw": "power over the last second",
    "GPU Power Readings/Instantaneous Power Draw": "power now",
    "GPU Memory Power Readings/*": "the memory's power",
    "Module Power Readings/Average Power Draw": "power over the last second",
    "Module Power Readings/Instantaneous Power Draw": "power now",
    "Clocks/*": "clocks follow the load",
    "Processes": "processes start and end",
    "Processes/*": "processes start and end",
    "MIG Devices/*": "memory in use by MIG devices",
}
# -q lines NVML has no call for: nvidia-smi prints a value, gpudiag N/A with the reason.
NOT_IN_NVML_LINES: dict[str, str] = {
    "GPU Part Number": "nvidia-smi reads it outside NVML (no nvmlDevice* call)",
    "Sparse Operation Mode": "nvidia-smi reads it outside NVML (no nvmlDevice* call)",
}
# -q -x elements, by their path under <gpu>, classed as the text's lines.
MOMENT_ELEMENTS: dict[str, str] = {
    "timestamp": "the time each tool read the GPU",
    "pci/tx_util": "PCIe traffic over the last 20 ms",
    "pci/rx_util": "PCIe traffic over the last 20 ms",
    "pci/pci_gpu_link_info/pcie_gen/current_link_gen": "the link trains down when the GPU idles",
    "pci/pci_gpu_link_info/pcie_gen/device_current_link_gen": "the link trains down when the GPU idles",
    "pci/pci_gpu_link_info/link_widths/current_link_width": "the link narrows when the GPU idles",
    "fan_speed": "the fan follows the temperature",
    "performance_state": "the power state follows the load",
    "gpu_power_readings/power_state": "the power state follows the load",
    "module_power_readings/power_state": "the power state follows the load",
    "clocks_event_reasons/*": "which reasons hold the clocks changes with the load",
    "clocks_event_reasons_counters/*": "time spent in each reason keeps counting",
    "fb_memory_usage/used": "memory in use",
    "fb_memory_usage/free": "memory in use",
    "bar1_memory_usage/used": "BAR1 mappings come and go",
    "bar1_memory_usage/free": "BAR1 mappings come and go",
    "utilization/*": "load sampled over the last period",
    "encoder_stats/*": "encoder sessions come and go",
    "fbc_stats/*": "frame-capture sessions come and go",
    "temperature/gpu_temp": "temperature",
    "temperature/gpu_temp_tlimit": "temperature (distance to the T.Limit)",
    "temperature/memory_temp": "temperature",
    "gpu_power_readings/average_power_draw": "power over the last second",
    "gpu_power_readings/instant_power_draw": "power now",
    "gpu_memory_power_readings/*": "the memory's power",
    "module_power_readings/average_power_draw": "power over the last second",
    "module_power_readings/instant_power_draw": "power now",
    "clocks/*": "clocks follow the load",
    "processes/*": "processes start and end",
    "mig_devices/*": "memory in use by MIG devices",
}
NOT_IN_NVML_ELEMENTS = {
    "gpu_part_number": "nvidia-smi reads it outside NVML (no nvmlDevice* call)",
    "sparse_operation_mode": "nvidia-smi reads it outside NVML (no nvmlDevice* call)",
}
# --query-gpu fields whose values change from moment to moment.
MOMENT_FIELDS: dict[str, str] = {
    "timestamp": "the time each tool read the GPU",
    "fan.speed": "the fan follows the temperature",
    "pstate": "the power state follows the load",
    "clocks_event_reasons.active": "which reasons hold the clocks changes with the load",
    "clocks_event_reasons.*": "which reasons hold the clocks changes with the load",
    "clocks_event_reasons_counters.*": "time spent in each reason keeps counting",
    "memory.used": "memory in use",
    "memory.free": "memory in use",
    "utilization.*": "load sampled over the last period",
    "encoder.stats.*": "encoder sessions come and go",
    "temperature.gpu": "temperature",
    "temperature.gpu.tlimit": "temperature (distance to the T.Limit)",
    "temperature.memory": "temperature",
    "power.draw": "power now",
    "power.draw.average": "power over the last second",
    "power.draw.instant": "power now",
    "clocks.current.*": "clocks follow the load",
    "pcie.link.gen.current": "the link trains down when the GPU idles",
    "pcie.link.gen.gpucurrent": "the link trains down when the GPU idles",
    "pcie.link.width.current": "the link narrows when the GPU idles",
}
# Offline only, for the H100's capture (tests/acceptance.py's CAPTURES): it was taken on several boards
# of one kind (docs/hardware's README), and before gpudiag read nvmlDeviceGetPlatformInfo; on a GPU
# machine, or in a capture of one board, everything is one board, one moment.
OFFLINE_ONLY: dict[str, tuple[str, str]] = {
    "uuid": (BOARD, "the field capture is another board's"),
    "serial": (BOARD, "the field capture is another board's"),
    "platform.module_id": (BOARD, "the field capture is another board's"),
    **{
        f"platform.{name}": (
            NOT_RECORDED,
            "nvmlDeviceGetPlatformInfo was not captured (nvml_getters.py records it now)",
        )
        for name in ("chassis_serial_number", "slot_number", "tray_index", "host_id", "peer_type", "gpu_fabric_guid")
    },
}


@dataclass
class Difference:
    check: str
    where: str
    nvidia_smi: str
    gpudiag: str
    kind: str
    reason: str = ""


@dataclass
class Result:
    """One comparison: what was compared, and every difference with its class."""

    check: str
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    skipped: str = ""  # why the check could not run
    notes: list[str] = field(default_factory=list)  # what the summary says besides (each part's time)

    @property
    def failures(self) -> list[Difference]:
        return [d for d in self.differences if d.kind == DIFF]

    @property
    def matched(self) -> int:
        return self.compared - len(self.differences)


def _lookup(table: dict[str, str], path: str) -> str | None:
    """A path's entry: itself, or a ``prefix/*`` that covers it."""
    if path in table:
        return table[path]
    parts = path.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        found = table.get("/".join(parts[:cut]) + "/*")
        if found is not None:
            return found
    return None


def same(smi: str, ours: str) -> bool:
    """Whether gpudiag's value says what nvidia-smi's says (an N/A with its reason is an N/A)."""
    smi, ours = smi.strip(), ours.strip()
    if smi == ours:
        return True
    na = ("N/A", "[N/A]")
    return smi in na and (ours in na or ours.startswith(("N/A (", "[N/A]")))


# -- nvidia-smi -q, the text ------------------------------------------------------------------

_LINE = re.compile(r"^(?P<indent> *)(?P<label>.*?)\s+: (?P<value>.*)$")


def q_entries(text: str) -> list[tuple[str, str | None]]:
    """Each line of a -q text as (path, value or None for a heading): paths start at each GPU's
    sections ("Temperature/GPU Current Temp"); the header's lines are at the top ("Timestamp");
    gpudiag's own ``gpudiag`` section and the banner are left out."""
    out: list[tuple[str, str | None]] = []
    stack: list[str] = []
    skipping = False
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("=====") or line.startswith(("Topology", "Legend")):
            continue
        indent = (len(line) - len(line.lstrip(" "))) // 4
        match = _LINE.match(line)
        label = (match["label"] if match else line.strip()).strip()
        if indent == 0 and label.startswith("GPU "):
            stack, skipping = [], False
            out.append((f"GPU {label[4:]}", None))
            continue
        del stack[max(indent - 1, 0) :]  # a GPU's sections are at indent 1, the header's lines at 0
        if indent == 1:
            skipping = label == "gpudiag"
        if skipping:
            continue
        stack.append(label)
        out.append(("/".join(stack), match["value"].strip() if match else None))
    return out


def compare_q(smi_text: str, ours_text: str) -> Result:
    """The labels (in order) and values of -q."""
    result = Result("-q (labels and values)")
    smi, ours = q_entries(smi_text), q_entries(ours_text)
    ours_by_path: dict[str, list[str | None]] = {}
    for path, value in ours:
        ours_by_path.setdefault(path, []).append(value)
    result.differences += _order(result.check, [p for p, _ in smi], [p for p, _ in ours], "label")
    seen: dict[str, int] = {}
    for path, value in smi:
        if value is None:
            continue
        n = seen[path] = seen.get(path, -1) + 1
        theirs = ours_by_path.get(path, [])
        if n >= len(theirs) or theirs[n] is None:
            continue  # reported as a label difference
        result.compared += 1
        mine = theirs[n] or ""
        if not same(value, mine):
            result.differences.append(_classed(result.check, path, value, mine, path, MOMENT_LINES, NOT_IN_NVML_LINES))
    return result


def _order(check: str, smi: list[str], ours: list[str], what: str) -> list[Difference]:
    """Where two sequences of labels (or elements) part: each line only one side has."""
    import difflib

    out = []
    for line in difflib.unified_diff(smi, ours, lineterm="", n=0):
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            theirs, mine = ("present", "absent") if line[0] == "-" else ("absent", "present")
            out.append(Difference(check, line[1:], theirs, mine, DIFF, f"the {what} is on one side only"))
    return out


def _classed(
    check: str, where: str, smi: str, ours: str, key: str, moment: dict[str, str], absent: dict[str, str]
) -> Difference:
    reason = _lookup(moment, key)
    if reason is not None:
        return Difference(check, where, smi, ours, MOMENT, reason)
    reason = _lookup(absent, key)
    if reason is not None:
        return Difference(check, where, smi, ours, NOT_IN_NVML, reason)
    return Difference(check, where, smi, ours, DIFF)


# -- nvidia-smi -q -x -------------------------------------------------------------------------


def xml_entries(document: str) -> list[tuple[str, str]]:
    """Each element as (path, its text), in document order; a GPU's paths start below <gpu>."""
    root = ET.fromstring(document)

    def walk(element: ET.Element, path: str) -> Iterable[tuple[str, str]]:
        for child in element:
            here = f"{path}/{child.tag}" if path else child.tag
            if child.tag == "gpu":
                here = f"gpu[{child.get('id')}]"
            yield here, (child.text or "").strip()
            yield from walk(child, here)

    return list(walk(root, ""))


def compare_xml(smi_xml: str, ours_xml: str) -> Result:
    """Element names, nesting and order, and each element's value, of -q -x."""
    result = Result("-q -x (elements and values)")
    try:
        ours = xml_entries(ours_xml)
    except ET.ParseError as exc:
        result.differences.append(Difference(result.check, "document", "XML", "not XML", DIFF, f"{exc}"))
        return result
    smi = xml_entries(smi_xml)
    if [p for p, _ in smi] != [p for p, _ in ours]:
        result.differences += _order(result.check, [p for p, _ in smi], [p for p, _ in ours], "element")
        return result
    for (path, value), (_, mine) in zip(smi, ours, strict=True):
        result.compared += 1
        if same(value, mine):
            continue
        inner = path.split("/", 1)[1] if path.startswith("gpu[") and "/" in path else path
        result.differences.append(
            _classed(result.check, path, value, mine, inner, MOMENT_ELEMENTS, NOT_IN_NVML_ELEMENTS)
        )
    return result


# -- nvidia-smi --query-gpu --------------------------------------------------------------------


def csv_rows(text: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(text), skipinitialspace=True) if row]


def compare_query(
    pairs: list[tuple[str, str, str]], offline: bool, exempt: dict[str, tuple[str, str]] | None = None
) -> Result:
    """Each field as (name, nvidia-smi's value, gpudiag's value); offline, ``exempt`` classes the fields
    a capture cannot hold to one board (:data:`OFFLINE_ONLY` for the H100's)."""
    result = Result("--query-gpu (every field)")
    for name, smi, mine in pairs:
        result.compared += 1
        if same(smi, mine):
            continue
        if offline and exempt and name in exempt:
            kind, reason = exempt[name]
            result.differences.append(Difference(result.check, name, smi, mine, kind, reason))
            continue
        reason = MOMENT_FIELDS.get(name) or _field_prefix(name)
        kind = MOMENT if reason else DIFF
        result.differences.append(Difference(result.check, name, smi, mine, kind, reason or ""))
    return result


def _field_prefix(name: str) -> str:
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found = MOMENT_FIELDS.get(".".join(parts[:cut]) + ".*")
        if found:
            return found
    return ""


def compare_headers(check: str, smi_text: str, ours_text: str) -> Result:
    """The column headers (``#`` lines) of dmon / pmon: the same columns in the same order."""
    result = Result(check)
    smi = [line.split() for line in smi_text.splitlines() if line.startswith("#")][:2]
    ours = [line.split() for line in ours_text.splitlines() if line.startswith("#")][:2]
    result.compared = sum(len(row) for row in smi)
    if smi != ours:
        theirs, mine = (" | ".join(" ".join(row) for row in rows) for rows in (smi, ours))
        result.differences.append(Difference(check, "header", theirs, mine, DIFF, "columns"))
    return result


def summary(results: list[Result]) -> str:
    """A plain report: each check's counts, then every difference with its class and reason."""
    lines = []
    for r in results:
        if r.skipped:
            lines.append(f"SKIP  {r.check}: {r.skipped}")
            continue
        kinds: dict[str, int] = {}
        for d in r.differences:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        verdict = "FAIL" if r.failures else "PASS"
        lines.append(
            f"{verdict}  {r.check}: {r.compared} compared, {r.matched} equal" + (f"; {counts}" if counts else "")
        )
    for r in results:
        lines += [f"  [note] {r.check}: {note}" for note in r.notes]
        for d in r.differences:
            why = f" ({d.reason})" if d.reason else ""
            lines.append(f"  [{d.kind}] {d.check}: {d.where}: nvidia-smi {d.nvidia_smi!r}, gpudiag {d.gpudiag!r}{why}")
    return "\n".join(lines) + "\n"
