"""nvidia-smi's ``--query-gpu=… --format=csv`` for users whose scripts speak it.

Field names and units follow nvidia-smi, so `gpudiag list --query name,memory.used
--format csv` prints what `nvidia-smi --query-gpu=name,memory.used --format=csv` would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudiag.errors import UsageError
from gpudiag.model import FactGroup, Gpu, Machine, Reading, cuda_version_text
from gpudiag.units import mib

_G = FactGroup


@dataclass(frozen=True)
class Field:
    unit: str  # shown in the header as "[unit]" and after values unless nounits
    read: Callable[[Machine, Gpu], Reading[str]]
    group: FactGroup | None = None  # what the source must read for it; None: identity or system facts


def _mib(r: Reading[int]) -> Reading[str]:
    return r.map(lambda b: str(mib(b)))


def _watts(r: Reading[float]) -> Reading[str]:
    return r.map(lambda w: f"{w:.2f}")


def _on_off(r: Reading[bool], on: str = "Enabled", off: str = "Disabled") -> Reading[str]:
    return r.map(lambda v: on if v else off)


FIELDS: dict[str, Field] = {
    "index": Field("", lambda m, g: Reading.of(str(g.index))),
    "uuid": Field("", lambda m, g: g.uuid),
    "name": Field("", lambda m, g: g.name),
    "pci.bus_id": Field("", lambda m, g: g.pci_bus_id),
    "driver_version": Field("", lambda m, g: m.nvml.driver_version),
    "cuda_version": Field("", lambda m, g: m.nvml.cuda_driver_version.map(cuda_version_text)),
    "memory.total": Field("MiB", lambda m, g: _mib(g.memory.map(lambda x: x.total_bytes)), _G.MEMORY),
    "memory.used": Field("MiB", lambda m, g: _mib(g.memory.map(lambda x: x.used_bytes)), _G.MEMORY),
    "memory.free": Field("MiB", lambda m, g: _mib(g.memory.map(lambda x: x.free_bytes)), _G.MEMORY),
    "memory.reserved": Field("MiB", lambda m, g: _reserved(g), _G.MEMORY),
    "utilization.gpu": Field("%", lambda m, g: g.utilization.map(lambda u: str(u.gpu_percent)), _G.UTILIZATION),
    "utilization.memory": Field("%", lambda m, g: g.utilization.map(lambda u: str(u.memory_percent)), _G.UTILIZATION),
    "temperature.gpu": Field("", lambda m, g: g.temperature_c.map(str), _G.THERMAL),
    "fan.speed": Field("%", lambda m, g: g.fan_percent.map(str), _G.THERMAL),
    "power.draw": Field("W", lambda m, g: _watts(g.power_draw_w), _G.POWER),
    "power.limit": Field("W", lambda m, g: _watts(g.power_limit_w), _G.POWER),
    "pstate": Field("", lambda m, g: g.pstate.map(lambda p: f"P{p}"), _G.PERFORMANCE),
    "persistence_mode": Field("", lambda m, g: _on_off(g.persistence_mode), _G.MODES),
    "compute_mode": Field("", lambda m, g: g.compute_mode.map(lambda c: c.value), _G.MODES),
    "compute_cap": Field("", lambda m, g: g.compute_capability.map(lambda c: f"{c[0]}.{c[1]}"), _G.CAPABILITY),
    "pcie.link.gen.current": Field("", lambda m, g: g.pcie.gen_current.map(str), _G.PCIE),
    "pcie.link.gen.max": Field("", lambda m, g: g.pcie.gen_max.map(str), _G.PCIE),
    "pcie.link.width.current": Field("", lambda m, g: g.pcie.width_current.map(str), _G.PCIE),
    "pcie.link.width.max": Field("", lambda m, g: g.pcie.width_max.map(str), _G.PCIE),
    "ecc.mode.current": Field("", lambda m, g: _on_off(g.ecc_mode_current), _G.ECC),
    "ecc.errors.uncorrected.volatile.total": Field("", lambda m, g: g.ecc_errors.volatile_uncorrected.map(str), _G.ECC),
    "mig.mode.current": Field("", lambda m, g: _on_off(g.mig_mode_current), _G.MIG),
}

# nvidia-smi's aliases for the same fields.
ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "temperature": "temperature.gpu",
    "power.draw.instant": "power.draw",
    "enforced.power.limit": "power.limit",
}


def _reserved(g: Gpu) -> Reading[str]:
    if g.memory.value is None:
        return Reading(reason=g.memory.reason, detail=g.memory.detail)
    return _mib(g.memory.value.reserved_bytes)


@dataclass(frozen=True)
class CsvFormat:
    header: bool = True
    units: bool = True


def parse_format(spec: str) -> CsvFormat:
    """``csv``, ``csv,noheader``, ``csv,noheader,nounits`` as nvidia-smi takes them."""
    parts = [p.strip().lower() for p in spec.split(",") if p.strip()]
    if not parts or parts[0] != "csv":
        raise UsageError(f"--format {spec!r}: only csv is supported (csv[,noheader][,nounits])")
    unknown = set(parts[1:]) - {"noheader", "nounits"}
    if unknown:
        raise UsageError(f"--format: unknown option(s) {', '.join(sorted(unknown))} (noheader, nounits)")
    return CsvFormat(header="noheader" not in parts, units="nounits" not in parts)


def parse_query(spec: str) -> list[str]:
    names = []
    for raw in spec.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        name = ALIASES.get(name, name)
        if name not in FIELDS:
            raise UsageError(f"--query: unknown field {raw.strip()!r}; known: {', '.join(FIELDS)}")
        names.append(name)
    if not names:
        raise UsageError("--query needs at least one field, e.g. --query name,memory.used")
    return names


def groups(names: list[str]) -> frozenset[FactGroup]:
    """The fact groups the source must read for these fields (nothing else is read)."""
    return frozenset(g for g in (FIELDS[n].group for n in names) if g is not None)


def render_csv(machine: Machine, gpus: tuple[Gpu, ...], names: list[str], fmt: CsvFormat) -> str:
    """Rows joined with ", " and missing values as ``[N/A]``, exactly as nvidia-smi writes them."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{n} [{FIELDS[n].unit}]" if FIELDS[n].unit and fmt.units else n for n in names))
    for gpu in gpus:
        row = []
        for name in names:
            reading = FIELDS[name].read(machine, gpu)
            if reading.value is None:
                row.append("[N/A]")
            elif fmt.units and FIELDS[name].unit:
                row.append(f"{reading.value} {FIELDS[name].unit}")
            else:
                row.append(reading.value)
        lines.append(", ".join(row))
    return "".join(line + "\n" for line in lines)
