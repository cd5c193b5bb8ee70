"""`gpudiag list -q -x`: the details as XML in nvidia-smi -q -x's schema (``nvsmi_device_v13.dtd``).

The same lines as the text (:func:`gpudiag.render.details_view.gpu_lines`), each under its element
name, nested as nvidia-smi nests them (``docs/hardware/h100-80gb-hbm3-driver580/nvidia-smi-q.xml``):
tab-indented, a missing value as ``N/A`` (the reason is the text's and JSON's). gpudiag's own
section (NVLink, topology, per-process load) is not in nvidia-smi's schema, so not here; a GPU
NVML cannot open is left out (its line goes to stderr, as for every output).
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from gpudiag.model import Gpu, GpuState, Machine
from gpudiag.render.details_view import Line, gpu_lines, header, show
from gpudiag.render.printable import printable

DOCTYPE = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">'


def _value(element: str, value: str) -> str:
    """A value as -q -x writes it: the PCI ids without their ``0x`` (``<pci_bus>00</pci_bus>``)."""
    if element.startswith("pci_") and value.startswith("0x"):
        value = value[2:]
    return escape(printable(value))


def _elements(lines: list[Line], base: int) -> list[str]:
    """Lines (level, _, value, element) as nested elements: a line with a value is a leaf; one
    without, a parent of the deeper lines after it (empty when none follow)."""
    out: list[str] = []
    open_: list[tuple[int, str]] = []  # (level, element) of the parents not yet closed
    for level, _, value, element in lines:
        if element is None:
            continue
        while open_ and open_[-1][0] >= level:
            done_level, done = open_.pop()
            out.append(f"{_tabs(base + done_level)}</{done}>")
        if value is None:
            out.append(f"{_tabs(base + level)}<{element}>")
            open_.append((level, element))
        elif element == "mig_devices":  # "None" on a line of its own, as nvidia-smi writes it
            out += [
                f"{_tabs(base + level)}<{element}>",
                f"{_tabs(base + level + 1)}{value}",
                f"{_tabs(base + level)}</{element}>",
            ]
        else:
            out.append(f"{_tabs(base + level)}<{element}>{_value(element, value)}</{element}>")
    while open_:
        done_level, done = open_.pop()
        out.append(f"{_tabs(base + done_level)}</{done}>")
    return out


def _tabs(n: int) -> str:
    return "\t" * n


def render(machine: Machine, gpus: tuple[Gpu, ...]) -> str:
    """The whole document for ``gpus`` (a selection of ``machine.gpus``)."""
    head = [
        (level + 1, label, "N/A" if value and value.startswith("N/A") else value, xml)
        for level, label, value, xml in header(machine)
    ]
    out = ['<?xml version="1.0" ?>', DOCTYPE, "<nvidia_smi_log>", *_elements(head, 0)]
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            continue
        out.append(f"\t<gpu id={quoteattr(printable(show(gpu.pci_bus_id)))}>")
        out += _elements(gpu_lines(machine, gpu, xml=True), 1)
        out.append("\t</gpu>")
    out += ["", "</nvidia_smi_log>"]
    return "\n".join(out) + "\n"
