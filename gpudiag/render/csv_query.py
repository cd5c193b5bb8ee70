"""nvidia-smi's ``--query-gpu=… --format=csv`` for users whose scripts speak it.

Two declarations meet here: nvidia-smi's vocabulary (:data:`NVIDIA_SMI_FIELDS`: every name and
alias that driver 580's nvidia-smi accepts, with its unit, in its order) and gpudiag's readings,
each of which names the fields it answers (``query`` of the rows in :mod:`gpudiag.readings` and
:mod:`gpudiag.details`). A few fields are derived here: the timestamp, the driver version, the GPU
count and index, each clock-event bit, the ECC counts by memory location. A name that nothing
answers (vGPU, Windows driver model, power smoothing, fabric, ...) is accepted and prints what
nvidia-smi prints when a value is missing. Checked field by field against the real H100's output
in ``docs/hardware/h100-80gb-hbm3-driver580/``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import msgspec

from gpudiag.model import FactGroup, Gpu, Machine, Reading, Reason, cuda_version_text
from gpudiag.readings import CLOCK_EVENTS, GPU_READINGS, pick, reading_at
from gpudiag.render.format import QUERY_NA_RULES, VALUE_FORMATS, as_nvidia_smi_shows
from gpudiag.render.printable import csv_field
from gpudiag.render.query_names import QUERY_NAMES

Reader = Callable[[Machine, Gpu], Reading[Any]]
Formatter = Callable[[Any], str]


class Field(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str  # "[unit]" in the header; after each value unless nounits
    read: Reader | None  # None: nvidia-smi knows the name, NVML cannot answer it here
    show: Formatter = str
    group: FactGroup | None = None  # what the source must read for it; None: identity or system facts
    missing: str = "[N/A]"  # what nvidia-smi prints without a value
    keys: tuple[str, ...] = ()  # the readings of its group it shows (gpudiag.readings rows' keys)


# nvidia-smi --help-query-gpu (driver 580), in its order: each name with its aliases and its [unit];
# "=TEXT" where nvidia-smi prints TEXT, not "[N/A]", without a value.
NVIDIA_SMI_FIELDS = """
timestamp
driver_version
vgpu_driver_capability.heterogenous_multivGPU
count
name gpu_name
serial gpu_serial
uuid gpu_uuid
pci.bus_id gpu_bus_id
pci.domain
pci.bus
pci.device
pci.baseClass
pci.subClass
pci.device_id
pci.sub_device_id
vgpu_device_capability.fractional_multiVgpu
vgpu_device_capability.heterogeneous_timeSlice_profile
vgpu_device_capability.heterogeneous_timeSlice_sizes
vgpu_device_capability.homogeneous_placements
vgpu_device_capability.mig_timeSlicing
vgpu_device_capability.mig_timeSlicing_mode
pcie.link.gen.current
pcie.link.gen.gpucurrent
pcie.link.gen.max
pcie.link.gen.gpumax
pcie.link.gen.hostmax
pcie.link.width.current
pcie.link.width.max
index
display_mode
display_attached
display_active
persistence_mode
addressing_mode
accounting.mode
accounting.buffer_size
driver_model.current
driver_model.pending
vbios_version
inforom.img inforom.image
inforom.oem
inforom.ecc
inforom.pwr inforom.power
inforom.checksum_validation
gpu_recovery_action
gom.current gpu_operation_mode.current
gom.pending gpu_operation_mode.pending
fan.speed [%]
pstate
clocks_event_reasons.supported clocks_throttle_reasons.supported
clocks_event_reasons.active clocks_throttle_reasons.active
clocks_event_reasons.gpu_idle clocks_throttle_reasons.gpu_idle
clocks_event_reasons.applications_clocks_setting clocks_throttle_reasons.applications_clocks_setting
clocks_event_reasons.sw_power_cap clocks_throttle_reasons.sw_power_cap
clocks_event_reasons.hw_slowdown clocks_throttle_reasons.hw_slowdown
clocks_event_reasons.hw_thermal_slowdown clocks_throttle_reasons.hw_thermal_slowdown
clocks_event_reasons.hw_power_brake_slowdown clocks_throttle_reasons.hw_power_brake_slowdown
clocks_event_reasons.sw_thermal_slowdown clocks_throttle_reasons.sw_thermal_slowdown
clocks_event_reasons.sync_boost clocks_throttle_reasons.sync_boost
clocks_event_reasons_counters.sw_power_cap [us]
clocks_event_reasons_counters.sync_boost [us]
clocks_event_reasons_counters.sw_thermal_slowdown [us]
clocks_event_reasons_counters.hw_thermal_slowdown [us]
clocks_event_reasons_counters.hw_power_brake_slowdown [us]
memory.total [MiB]
memory.reserved [MiB]
memory.used [MiB]
memory.free [MiB]
compute_mode
compute_cap
utilization.gpu [%]
utilization.memory [%]
utilization.encoder [%]
utilization.decoder [%]
utilization.jpeg [%]
utilization.ofa [%]
encoder.stats.sessionCount
encoder.stats.averageFps
encoder.stats.averageLatency
dramEncryption.mode.current
dramEncryption.mode.pending
ecc.mode.current
ecc.mode.pending
ecc.errors.corrected.volatile.device_memory
ecc.errors.corrected.volatile.dram
ecc.errors.corrected.volatile.register_file
ecc.errors.corrected.volatile.l1_cache
ecc.errors.corrected.volatile.l2_cache
ecc.errors.corrected.volatile.texture_memory
ecc.errors.corrected.volatile.cbu
ecc.errors.corrected.volatile.sram
ecc.errors.corrected.volatile.total
ecc.errors.corrected.aggregate.device_memory
ecc.errors.corrected.aggregate.dram
ecc.errors.corrected.aggregate.register_file
ecc.errors.corrected.aggregate.l1_cache
ecc.errors.corrected.aggregate.l2_cache
ecc.errors.corrected.aggregate.texture_memory
ecc.errors.corrected.aggregate.cbu
ecc.errors.corrected.aggregate.sram
ecc.errors.corrected.aggregate.total
ecc.errors.uncorrected.volatile.device_memory
ecc.errors.uncorrected.volatile.dram
ecc.errors.uncorrected.volatile.register_file
ecc.errors.uncorrected.volatile.l1_cache
ecc.errors.uncorrected.volatile.l2_cache
ecc.errors.uncorrected.volatile.texture_memory
ecc.errors.uncorrected.volatile.cbu
ecc.errors.uncorrected.volatile.sram
ecc.errors.uncorrected.volatile.total
ecc.errors.uncorrected.aggregate.device_memory
ecc.errors.uncorrected.aggregate.dram
ecc.errors.uncorrected.aggregate.register_file
ecc.errors.uncorrected.aggregate.l1_cache
ecc.errors.uncorrected.aggregate.l2_cache
ecc.errors.uncorrected.aggregate.texture_memory
ecc.errors.uncorrected.aggregate.cbu
ecc.errors.uncorrected.aggregate.sram
ecc.errors.uncorrected.aggregate.total
ecc.errors.uncorrected.volatile.sram.parity
ecc.errors.uncorrected.volatile.sram.secded
ecc.errors.uncorrected.aggregate.sram.parity
ecc.errors.uncorrected.aggregate.sram.secded
ecc.errors.uncorrected.aggregate.sram.thresholdExceeded
ecc.errors.uncorrected.aggregate.sram.l2
ecc.errors.uncorrected.aggregate.sram.sm
ecc.errors.uncorrected.aggregate.sram.mcu
ecc.errors.uncorrected.aggregate.sram.pcie
ecc.errors.uncorrected.aggregate.sram.other
retired_pages.single_bit_ecc.count retired_pages.sbe
retired_pages.double_bit.count retired_pages.dbe
retired_pages.pending
remapped_rows.correctable remapped_rows.sbe
remapped_rows.correctable_inactive
remapped_rows.uncorrectable remapped_rows.dbe
remapped_rows.uncorrectable_inactive
remapped_rows.pending
remapped_rows.failure
remapped_rows.histogram.max
remapped_rows.histogram.high
remapped_rows.histogram.partial
remapped_rows.histogram.low
remapped_rows.histogram.none
temperature.gpu
temperature.gpu.tlimit
temperature.memory
power.management
power.draw [W]
power.draw.average gpu.power.draw.average [W]
power.draw.instant gpu.power.draw.instant [W]
power.limit gpu.power.requested_limit [W]
enforced.power.limit gpu.power.current_limit [W]
power.default_limit gpu.power.default_limit [W]
power.min_limit gpu.power.min_limit [W]
power.max_limit gpu.power.max_limit [W]
module.power.draw.average
module.power.draw.instant
module.power.limit module.power.requested_limit
module.enforced.power.limit module.power.current_limit
module.power.default_limit
module.power.min_limit
module.power.max_limit
power_smoothing.delayed_power_smoothing_supported
power_smoothing.primary_power_floor
power_smoothing.secondary_power_floor
power_smoothing.min_primary_floor_activation_offset
power_smoothing.min_primary_floor_activation_point
power_smoothing.window_multiplier
power_smoothing.curr_profile.secondary_power_floor
power_smoothing.curr_profile.primary_floor_act_window_multiplier
power_smoothing.curr_profile.primary_floor_tar_window_multiplier
power_smoothing.curr_profile.primary_floor_act_offset
power_smoothing.admin_override.secondary_power_floor
power_smoothing.admin_override.primary_floor_act_window_multiplier
power_smoothing.admin_override.primary_floor_tar_window_multiplier
power_smoothing.admin_override.primary_floor_act_offset
clocks.current.graphics clocks.gr [MHz]
clocks.current.sm clocks.sm [MHz]
clocks.current.memory clocks.mem [MHz]
clocks.current.video clocks.video [MHz]
clocks.applications.graphics clocks.applications.gr [MHz]
clocks.applications.memory clocks.applications.mem [MHz]
clocks.default_applications.graphics clocks.default_applications.gr [MHz]
clocks.default_applications.memory clocks.default_applications.mem [MHz]
clocks.max.graphics clocks.max.gr [MHz]
clocks.max.sm [MHz]
clocks.max.memory clocks.max.mem [MHz]
mig.mode.current
mig.mode.pending
gsp.mode.current
gsp.mode.default
c2c.mode
protected_memory.total [MiB]
protected_memory.used [MiB]
protected_memory.free [MiB]
fabric.state =N/A
fabric.status =N/A
fabric.cliqueId =N/A
fabric.clusterUuid =N/A
fabric.health.summary =N/A
fabric.health.bandwidth =N/A
fabric.health.route_recovery_in_progress =N/A
fabric.health.route_unhealthy =N/A
fabric.health.access_timeout_recovery =N/A
fabric.health.incorrect_configuration =N/A
fabric.health.partition_assigned =N/A
platform.chassis_serial_number
platform.slot_number
platform.tray_index
platform.host_id
platform.peer_type
platform.module_id
platform.gpu_fabric_guid
hostname
"""
# gpudiag's own names besides those of its readings' table (render.query_names) that nvidia-smi has not.
GPUDIAG_FIELDS = ("cuda_version",)


class _Name(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str
    missing: str


@functools.cache
def _vocabulary() -> tuple[_Name, ...]:
    names = []
    for line in NVIDIA_SMI_FIELDS.strip().splitlines():
        line, _, missing = line.partition(" =")
        line, _, unit = line.partition(" [")
        name, *aliases = line.split()
        names.append(_Name(name, tuple(aliases), unit.rstrip("]"), missing or "[N/A]"))
    return tuple(names)


# -- what answers each name: a reading's row, or a field derived here -------------------------


class _Answer(msgspec.Struct, frozen=True):
    read: Reader
    show: Formatter = str
    group: FactGroup | None = None
    keys: tuple[str, ...] = ()  # the rows it reads (none beyond identity and the system's facts: ())


def _row_reader(key: str, part: str) -> Reader:
    """The reading at a row's key, or one part of its value (an attribute, an index)."""
    index: int | str | None = int(part) if part.isdigit() else part or None

    def read(m: Machine, g: Gpu) -> Reading[Any]:
        reading = as_nvidia_smi_shows(key, reading_at(g, key), QUERY_NA_RULES)
        if index is None or reading.value is None:
            return reading
        value = pick(reading.value, index)
        return value if isinstance(value, Reading) else Reading.of(value)

    return read


def _answers() -> dict[str, _Answer]:
    """Each --query-gpu name a reading answers (QUERY_NAMES: ``NAME[:PART][=FORMAT]``)."""
    groups = {row.key: row.group for row in GPU_READINGS}
    out = {}
    for key, entries in QUERY_NAMES.items():
        group = groups.get(key, FactGroup.DETAILS)
        for entry in entries:
            entry, _, show = entry.partition("=")
            name, _, part = entry.partition(":")
            out[name] = _Answer(_row_reader(key, part), VALUE_FORMATS[show], group, (key,))
    return out


def timestamp(t: float) -> str:
    """nvidia-smi's CSV timestamp, in local time."""
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def recorded_at(machine: Machine) -> Reading[float]:
    """When the machine was read (a replay: when its snapshot was taken); 0 means not recorded."""
    if machine.collected_at > 0:
        return Reading.of(machine.collected_at)
    return Reading.missing(Reason.NOT_RECORDED, "the snapshot does not say when it was taken")


def _event(bit: int) -> Reader:
    return lambda m, g: g.clock_event_reasons.map(lambda mask: bool(mask & bit))


def _ecc_at(location: str, attr: str) -> Reader:
    """One count of the ECC errors at a memory location (a composite reading of the details)."""

    def read(m: Machine, g: Gpu) -> Reading[Any]:
        locations = reading_at(g, "details.memory_health.ecc_by_location")
        if locations.value is None:
            return locations
        for loc in locations.value:
            if loc.location == location:
                return getattr(loc, attr)  # type: ignore[no-any-return]
        return Reading.missing(Reason.NOT_SUPPORTED)

    return read


_ECC_KINDS = (
    ("corrected", "volatile"),
    ("corrected", "aggregate"),
    ("uncorrected", "volatile"),
    ("uncorrected", "aggregate"),
)
_ECC_PLACES = (
    ("device_memory", "device_memory"),
    ("dram", "device_memory"),  # NVML's DRAM and device-memory location are one
    ("register_file", "register_file"),
    ("l1_cache", "l1_cache"),
    ("l2_cache", "l2_cache"),
    ("texture_memory", "texture_memory"),
    ("cbu", "cbu"),
    ("sram", "sram"),
)

# The fields derived here rather than read from one reading.
_DERIVED: dict[str, _Answer] = {
    "timestamp": _Answer(lambda m, g: recorded_at(m), timestamp),
    "driver_version": _Answer(lambda m, g: m.nvml.driver_version),
    "count": _Answer(lambda m, g: Reading.of(len(m.gpus))),
    "index": _Answer(lambda m, g: Reading.of(g.index)),
    "cuda_version": _Answer(lambda m, g: m.nvml.cuda_driver_version.map(cuda_version_text)),
    **{
        f"clocks_event_reasons.{e.query}": _Answer(
            _event(e.bit), VALUE_FORMATS["active"], FactGroup.CLOCK_EVENTS, ("clock_event_reasons",)
        )
        for e in CLOCK_EVENTS
    },
    **{
        f"ecc.errors.{kind}.{counter}.{place}": _Answer(_ecc_at(location, f"{counter}_{kind}"), group=FactGroup.DETAILS)
        for kind, counter in _ECC_KINDS
        for place, location in _ECC_PLACES
    },
}


@functools.cache
def _gpu_answers() -> dict[str, _Answer]:
    return {**_answers(), **_DERIVED}


def _field(name: _Name) -> Field:
    answer = _gpu_answers().get(name.name)
    if answer is None:
        return Field(name.name, name.aliases, name.unit, None, missing=name.missing)
    return Field(name.name, name.aliases, name.unit, answer.read, answer.show, answer.group, name.missing, answer.keys)


def fields() -> tuple[Field, ...]:
    """Every --query-gpu field nvidia-smi knows, in its order (the details' rows included)."""
    return tuple(_field(name) for name in _vocabulary())


@functools.cache
def own_names() -> tuple[str, ...]:
    """gpudiag's own names: GPUDIAG_FIELDS, then those QUERY_NAMES gives a reading that nvidia-smi
    does not know (a new reading's name needs no other edit)."""
    known = {n.lower() for name in _vocabulary() for n in (name.name, *name.aliases)}
    named = (entry.partition("=")[0].partition(":")[0] for entries in QUERY_NAMES.values() for entry in entries)
    return GPUDIAG_FIELDS + tuple(name for name in named if name.lower() not in known)


@functools.cache
def _spellings() -> dict[str, _Name]:
    """Every accepted spelling, lower-cased (nvidia-smi matches names case-insensitively)."""
    out = {n.lower(): name for name in _vocabulary() for n in (name.name, *name.aliases)}
    out.update({n: _Name(n, (), "", "[N/A]") for n in own_names()})
    return out


def field(typed: str) -> Field | None:
    """The field a name or alias (in any case) stands for; None: nvidia-smi knows no such name."""
    name = _spellings().get(typed.lower())
    return None if name is None else _field(name)


def answered(field: Field) -> bool:
    return field.read is not None


class CsvFormat(msgspec.Struct, frozen=True):
    header: bool = True
    units: bool = True


class Column(msgspec.Struct, frozen=True):
    typed: str  # the name as the user wrote it: the header shows it, as nvidia-smi does
    field: Field


def spelling(lowered: str) -> str:
    """nvidia-smi's own spelling of a lower-cased name or alias."""
    name = _spellings()[lowered]
    return next((n for n in (name.name, *name.aliases) if n.lower() == lowered), lowered)


def spellings() -> dict[str, Any]:
    """Every accepted spelling, lower-cased."""
    return _spellings()


def groups(columns: list[Column]) -> frozenset[FactGroup]:
    """The fact groups the source must read for these fields (nothing else is read)."""
    return frozenset(c.field.group for c in columns if c.field.group is not None)


def rows(columns: list[Column]) -> frozenset[str]:
    """Of those groups' rows, the ones these fields show: a query asks NVML for nothing else (as
    dmon reads per column group): `temperature.gpu` reads the temperature, not the fan and the
    thresholds beside it in its group."""
    return frozenset(key for c in columns for key in c.field.keys)


def shown(machine: Machine, gpu: Gpu, field: Field, units: bool = True) -> tuple[str, bool]:
    """One cell as nvidia-smi prints it, and whether it is text from outside: a value NVML gives
    as words (a name, a serial, a version), not a number or a state that gpudiag writes."""
    if field.read is None:
        return field.missing, False
    reading = field.read(machine, gpu)
    if reading.value is None:
        return field.missing, False
    text = field.show(reading.value)
    return f"{text} {field.unit}" if units and field.unit else text, type(reading.value) is str


def value(machine: Machine, gpu: Gpu, field: Field, units: bool = True) -> str:
    """One cell as nvidia-smi prints it."""
    return shown(machine, gpu, field, units)[0]


def render_csv(machine: Machine, gpus: tuple[Gpu, ...], columns: list[Column], fmt: CsvFormat) -> str:
    """Rows joined with ", ", as nvidia-smi writes them; the header keeps units even with nounits.
    A text cell that a spreadsheet would run as a formula is neutralised (``csv_field``)."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{c.typed} [{c.field.unit}]" if c.field.unit else c.typed for c in columns))
    for gpu in gpus:
        lines.append(", ".join(csv_field(*shown(machine, gpu, c.field, fmt.units)) for c in columns))
    return "".join(line + "\n" for line in lines)


QUERY_SCHEMA = "gpudiag.query/1"


def typed(text: str) -> Any:
    """A cell written without its unit, as JSON: a whole number or a decimal as a number, "[N/A]" as
    null, anything else as the text nvidia-smi writes."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return None if text in ("[N/A]", "N/A") else text


def document(option: str, headers: list[tuple[str, str]], cells: list[list[str]]) -> dict[str, Any]:
    """A query's rows as JSON (schema gpudiag.query/1): each row an object keyed by the names asked
    for, values as nvidia-smi writes them without units (numbers as numbers, N/A as null), the
    units apart."""
    return {
        "schema": QUERY_SCHEMA,
        "query": option,
        "units": {name: unit for name, unit in headers if unit},
        "rows": [{name: typed(cell) for (name, _), cell in zip(headers, row, strict=True)} for row in cells],
    }


def cells(machine: Machine, gpus: tuple[Gpu, ...], columns: list[Column], units: bool = False) -> list[list[str]]:
    """Each GPU's row as nvidia-smi writes it."""
    return [[value(machine, gpu, c.field, units) for c in columns] for gpu in gpus]
