"""`gpudiag nvlink`: each GPU's NVLinks as `nvidia-smi nvlink` prints them: a line per GPU
(``GPU 0: NAME (UUID: …)``), then per link its speed (``-s``), error counters (``-e``) or throughput
counters (``-gt d|r``), each line led by a tab and a blank as nvidia-smi's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudiag.model import Gpu, Reading
from gpudiag.render.printable import printable
from gpudiag.serialize import to_data

if TYPE_CHECKING:
    from gpudiag.details import NvLink

SCHEMA = "gpudiag.nvlink/1"
LEAD = "\t "
# -gt's counters: (label, NvLink field) for data (payload) and raw (all traffic).
THROUGHPUT = {
    "d": (("Data Tx", "data_tx_kib"), ("Data Rx", "data_rx_kib")),
    "r": (("Raw Tx", "raw_tx_kib"), ("Raw Rx", "raw_rx_kib")),
}
ERRORS = (("Replay Errors", "replay_errors"), ("Recovery Errors", "recovery_errors"), ("CRC Errors", "crc_flit_errors"))


def gpu_line(gpu: Gpu) -> str:
    return f"GPU {gpu.index}: {printable(gpu.name.get('N/A'))} (UUID: {printable(gpu.uuid.get('N/A'))})"


def _value(reading: Reading[Any], unit: str = "") -> str:
    if reading.value is None:
        return f"N/A ({reading.detail or (reading.reason.label if reading.reason else '')})"
    return f"{reading.value}{unit}"


def _no_links(links: Reading[Any]) -> list[str]:
    why = links.detail or (links.reason.label if links.reason else "")
    return [f"{LEAD}<N/A: {printable(why)}>"]


def status(gpu: Gpu, links: Reading[tuple[NvLink, ...]]) -> list[str]:
    """`nvidia-smi nvlink -s`: each link's speed, or <inactive>."""
    lines = [gpu_line(gpu)]
    if links.value is None:
        return lines + _no_links(links)
    for link in links.value:
        if not link.active.get(False):
            state = "<inactive>" if link.active.value is not None else _value(link.active)
            lines.append(f"{LEAD}Link {link.link}: {state}")
        else:
            speed = link.speed_mbps
            shown = f"{speed.value / 1000:.3f} GB/s" if speed.value is not None else _value(speed)
            lines.append(f"{LEAD}Link {link.link}: {shown}")
    return lines


def errors(gpu: Gpu, links: Reading[tuple[NvLink, ...]]) -> list[str]:
    """`nvidia-smi nvlink -e`: each link's replay, recovery and CRC error counters, a blank line apart."""
    lines = [gpu_line(gpu)]
    if links.value is None:
        return lines + _no_links(links)
    for n, link in enumerate(links.value):
        if n:
            lines.append("")
        lines += [f"{LEAD}Link {link.link}: {label}: {_value(getattr(link, field))}" for label, field in ERRORS]
    return lines


def throughput(gpu: Gpu, links: Reading[tuple[NvLink, ...]], kind: str) -> list[str]:
    """`nvidia-smi nvlink -gt d|r`: each link's data (or raw) KiB sent and received since the driver loaded."""
    lines = [gpu_line(gpu)]
    if links.value is None:
        return lines + _no_links(links)
    for link in links.value:
        lines += [
            f"{LEAD}Link {link.link}: {label}: {_value(getattr(link, field), ' KiB')}"
            for label, field in THROUGHPUT[kind]
        ]
    return lines


def to_json(entries: list[tuple[Gpu, Reading[tuple[NvLink, ...]]]]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "gpus": [
            {"index": gpu.index, "name": to_data(gpu.name), "uuid": to_data(gpu.uuid), "nvlinks": to_data(links)}
            for gpu, links in entries
        ],
    }
