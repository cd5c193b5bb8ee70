"""Comparing what the real CUDA runtime enumerated (visible --probe) with the computed mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpudiag.selection import normalize_bus_id
from gpudiag.visibility.result import Resolution, VisibleDevice


@dataclass(frozen=True)
class ProbedDevice:
    ordinal: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total_bytes: int | None


@dataclass(frozen=True)
class ProbeSource:
    name: str  # "driver" or "torch"
    label: str  # for people: "CUDA driver API (cuInit in a child process)", "torch 2.5.1 (CUDA 12.4)"
    devices: tuple[ProbedDevice, ...] | None  # None: this source could not answer
    detail: str  # why not, or a remark


@dataclass(frozen=True)
class ProbeReport:
    status: str  # agrees | disagrees | could_not_run | not_compared
    summary: str
    sources: tuple[ProbeSource, ...]
    disagreements: tuple[str, ...]
    notes: tuple[str, ...]
    torch_count_before_init: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "agrees"


def _uuid_core(uuid: str | None) -> str:
    if not uuid:
        return ""
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _probed_devices(raw: Any) -> tuple[ProbedDevice, ...] | None:
    if not isinstance(raw, list):
        return None
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        out.append(
            ProbedDevice(
                ordinal=i,
                name=str(item.get("name") or ""),
                uuid=str(item.get("uuid") or ""),
                pci_bus_id=str(item.get("pci_bus_id") or ""),
                memory_total_bytes=_int_or_none(item.get("total_memory_bytes")),
            )
        )
    return tuple(out)


def _source(name: str, raw: Any) -> ProbeSource | None:
    if not isinstance(raw, Mapping):
        return None
    label = str(raw.get("label") or name)
    devices = _probed_devices(raw.get("devices"))
    error = str(raw.get("error") or "")
    if error:
        devices = None
    return ProbeSource(name, label, devices, error or str(raw.get("detail") or ""))


def _same_device(computed: VisibleDevice, seen: ProbedDevice) -> tuple[bool, str]:
    seen_core = _uuid_core(seen.uuid)
    if seen_core:
        if seen_core == _uuid_core(computed.uuid):
            return True, ""
        if computed.mig is not None and seen_core == _uuid_core(computed.parent_uuid):
            return True, f"cuda:{computed.ordinal}: the runtime reports the parent GPU's UUID for the MIG device"
        return False, ""
    if seen.pci_bus_id and computed.pci_bus_id != "?" and computed.mig is None:
        return normalize_bus_id(seen.pci_bus_id) == normalize_bus_id(computed.pci_bus_id), ""
    if seen.name:
        return seen.name == computed.name, f"cuda:{computed.ordinal}: compared by name only (no UUID or bus id)"
    return True, f"cuda:{computed.ordinal}: nothing to compare it by"


def _describe(seen: ProbedDevice) -> str:
    bits = [seen.name or "?"]
    if seen.uuid:
        bits.append(seen.uuid)
    if seen.pci_bus_id:
        bits.append(seen.pci_bus_id)
    return " ".join(bits)


def probe_report(resolution: Resolution | None, data: Mapping[str, Any]) -> ProbeReport:
    """Compare what the CUDA runtime reported (the child's result) with the computed mapping.

    ``data`` comes from a child process: any shape is accepted, nothing here raises.
    """
    sources = tuple(s for s in (_source("driver", data.get("driver")), _source("torch", data.get("torch"))) if s)
    answered = [s for s in sources if s.devices is not None]
    disagreements: list[str] = []
    notes: list[str] = []
    torch_raw = data.get("torch")
    torch_before = None
    if isinstance(torch_raw, Mapping):
        torch_before = _int_or_none(torch_raw.get("count_before_init"))
    if not answered:
        summary = "could not ask CUDA" if sources else "could not ask CUDA: the probe reported nothing"
        return ProbeReport("could_not_run", summary, sources, (), (), torch_before)
    if resolution is None:
        counts = ", ".join(f"{s.label}: {len(s.devices or ())} device(s)" for s in answered)
        return ProbeReport(
            "not_compared", f"{counts}; gpudiag computed no mapping to compare", sources, (), (), torch_before
        )
    computed = resolution.devices
    driver_raw = data.get("driver")
    if isinstance(driver_raw, Mapping) and resolution.cuinit_error:
        # cuInit failing is CUDA's answer for this setting: the error must be the one predicted too
        code = _int_or_none(driver_raw.get("cuinit_code"))
        as_predicted = code is None or f"({code})" in resolution.cuinit_error
        if not as_predicted:
            disagreements.append(
                f"cuInit returned {driver_raw.get('cuinit_error')}; gpudiag predicted {resolution.cuinit_error}"
            )
    for s in answered:
        seen = s.devices or ()
        if len(seen) != len(computed):
            why = f" ({s.detail})" if s.detail and not seen else ""
            disagreements.append(f"{s.label} sees {len(seen)} device(s){why}, gpudiag computed {len(computed)}")
        for d, p in zip(computed, seen, strict=False):
            same, note = _same_device(d, p)
            if note:
                notes.append(note)
            if not same:
                disagreements.append(
                    f"{s.label}: cuda:{d.ordinal} is {_describe(p)}; gpudiag computed GPU {d.gpu_index} "
                    f"({d.name}, {d.uuid})"
                )
    predicted = resolution.pytorch
    if isinstance(torch_raw, Mapping) and predicted is not None and not predicted.asks_cuda:
        before_error = str(torch_raw.get("count_before_init_error") or "")
        if torch_before is not None and predicted.count_before_init is not None:
            if torch_before != predicted.count_before_init:
                disagreements.append(
                    f"torch.cuda.device_count() before CUDA initialised returned {torch_before}; gpudiag predicted "
                    f"{predicted.count_before_init} from PyTorch's parser"
                )
        elif before_error and predicted.count_before_init is not None:
            disagreements.append(
                f"torch.cuda.device_count() before CUDA initialised raised {before_error}; gpudiag predicted "
                f"{predicted.count_before_init}"
            )
        elif torch_before is not None and predicted.count_before_init is None:
            disagreements.append(
                f"torch.cuda.device_count() before CUDA initialised returned {torch_before}; gpudiag predicted that it "
                f"raises {predicted.error}"
            )
    labels = " and ".join(f"{s.label} ({len(s.devices or ())} device(s))" for s in answered)
    unanswered = [s for s in sources if s.devices is None]
    notes += [f"{s.label} could not answer: {s.detail}" for s in unanswered]
    if disagreements:
        return ProbeReport(
            "disagrees",
            f"DISAGREES with the computed mapping: {labels}",
            sources,
            tuple(dict.fromkeys(disagreements)),
            tuple(dict.fromkeys(notes)),
            torch_before,
        )
    return ProbeReport("agrees", f"agrees: {labels}", sources, (), tuple(dict.fromkeys(notes)), torch_before)


def probe_failed(detail: str) -> ProbeReport:
    """The child itself could not run (timeout, crash, no interpreter)."""
    return ProbeReport("could_not_run", f"could not ask CUDA: the probe process {detail}", (), (), ())
