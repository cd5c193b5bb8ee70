"""nvidia-smi's ``--query-gpu=… --format=csv`` for users whose scripts speak it.

One declarative table, :data:`FIELDS`: every name (and alias) that driver 580's nvidia-smi
accepts, with its unit, the reading behind it and how nvidia-smi prints it. Names that NVML
cannot answer through gpudiag (vGPU, Windows driver model, power smoothing, fabric, ...) are
accepted and print what nvidia-smi prints when a value is missing. Checked field by field
against the real H100's output in ``docs/hardware/h100-80gb-hbm3-driver580/``.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.errors import UsageError
from gpudiag.model import (
    FactGroup,
    Gpu,
    GpuProcess,
    Machine,
    ProcessKind,
    Reading,
    Reason,
    cuda_version_text,
)
from gpudiag.readings import ADDRESSING_MODES, CLOCK_EVENTS, RECOVERY_ACTION_NAMES
from gpudiag.units import mib

if TYPE_CHECKING:
    from gpudiag.details import GpuDetails

Reader = Callable[[Machine, Gpu], Reading[Any]]
Formatter = Callable[[Any], str]

_G = FactGroup


class Field(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str  # "[unit]" in the header; after each value unless nounits
    read: Reader | None  # None: nvidia-smi knows the name, NVML cannot answer it here
    show: Formatter = str
    group: FactGroup | None = None  # what the source must read for it; None: identity or system facts
    missing: str = "[N/A]"  # what nvidia-smi prints without a value


# -- readers ----------------------------------------------------------------------------


def _gpu(pick: Callable[[Gpu], Reading[Any]]) -> Reader:
    return lambda m, g: pick(g)


def _det(pick: Callable[[GpuDetails], Reading[Any]]) -> Reader:
    def read(m: Machine, g: Gpu) -> Reading[Any]:
        if g.details.value is None:
            return Reading.missing_like(g.details)
        return pick(g.details.value)

    return read


def _mem(attr: str) -> Reader:
    return lambda m, g: g.memory.map(lambda x: getattr(x, attr))


def _reserved(m: Machine, g: Gpu) -> Reading[Any]:
    if g.memory.value is None:
        return Reading.missing_like(g.memory)
    return g.memory.value.reserved_bytes


def _ecc_total(attr: str) -> Reader:
    return lambda m, g: getattr(g.ecc_errors, attr)


def _ecc_at(location: str, attr: str) -> Reader:
    def pick(d: GpuDetails) -> Reading[Any]:
        for loc in d.memory_health.ecc_by_location:
            if loc.location == location:
                return getattr(loc, attr)  # type: ignore[no-any-return]
        return Reading.missing(Reason.NOT_SUPPORTED)

    return _det(pick)


def _event(bit: int) -> Reader:
    return lambda m, g: g.clock_event_reasons.map(lambda mask: bool(mask & bit))


def _event_counter(name: str) -> Reader:
    return _det(lambda d: dict(d.clocks.event_reason_counters_us)[name])


def _clock(kind: str, clock: str) -> Reader:
    return _det(lambda d: getattr(getattr(d.clocks, kind), clock))


def _retired(attr: str) -> Reader:
    return lambda m, g: g.retired_pages.map(lambda r: getattr(r, attr))


def _remapped(attr: str) -> Reader:
    return lambda m, g: g.remapped_rows.map(lambda r: getattr(r, attr))


def _histogram(attr: str) -> Reader:
    return _det(lambda d: d.memory_health.row_remap_histogram.map(lambda h: getattr(h, attr)))


def _protected(i: int) -> Reader:
    return _det(lambda d: d.identity.protected_memory_bytes.map(lambda t: t[i]))


# -- formatters (nvidia-smi's spelling) -------------------------------------------------


def _mib(b: int) -> str:
    return str(mib(b))  # rounded up, as nvidia-smi does


def _w(w: float) -> str:
    return f"{w:.2f}"


def _enabled(v: bool) -> str:
    return "Enabled" if v else "Disabled"


def _yes(v: bool) -> str:
    return "Yes" if v else "No"


def _active(v: bool) -> str:
    return "Active" if v else "Not Active"


def _hex(width: int) -> Formatter:
    return lambda v: f"0x{int(v):0{width}X}"


def _timestamp(t: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def F(  # noqa: N802 - reads as a table row
    name: str,
    read: Reader | None,
    show: Formatter = str,
    unit: str = "",
    aliases: tuple[str, ...] = (),
    group: FactGroup | None = None,
    missing: str = "[N/A]",
) -> Field:
    return Field(name, aliases, unit, read, show, group, missing)


def D(name: str, pick: Callable[[GpuDetails], Reading[Any]], show: Formatter = str, unit: str = "", **kw: Any) -> Field:  # noqa: N802
    return F(name, _det(pick), show, unit, group=_G.DETAILS, **kw)


def _unanswered(*names: str, missing: str = "[N/A]") -> list[Field]:
    return [F(n, None, missing=missing) for n in names]


_VGPU = (
    "vgpu_device_capability.fractional_multiVgpu",
    "vgpu_device_capability.heterogeneous_timeSlice_profile",
    "vgpu_device_capability.heterogeneous_timeSlice_sizes",
    "vgpu_device_capability.homogeneous_placements",
    "vgpu_device_capability.mig_timeSlicing",
    "vgpu_device_capability.mig_timeSlicing_mode",
)
_ECC_KINDS = (
    ("corrected", "volatile", "volatile_corrected"),
    ("corrected", "aggregate", "aggregate_corrected"),
    ("uncorrected", "volatile", "volatile_uncorrected"),
    ("uncorrected", "aggregate", "aggregate_uncorrected"),
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
# The clock events --query-gpu knows (display_clock_setting it does not), in its order.
_EVENTS = tuple(
    (name, {e.query: e.bit for e in CLOCK_EVENTS}[name])
    for name in (
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "sw_thermal_slowdown",
        "sync_boost",
    )
)
_POWER_SMOOTHING = (
    "delayed_power_smoothing_supported",
    "primary_power_floor",
    "secondary_power_floor",
    "min_primary_floor_activation_offset",
    "min_primary_floor_activation_point",
    "window_multiplier",
    "curr_profile.secondary_power_floor",
    "curr_profile.primary_floor_act_window_multiplier",
    "curr_profile.primary_floor_tar_window_multiplier",
    "curr_profile.primary_floor_act_offset",
    "admin_override.secondary_power_floor",
    "admin_override.primary_floor_act_window_multiplier",
    "admin_override.primary_floor_tar_window_multiplier",
    "admin_override.primary_floor_act_offset",
)
_FABRIC = (
    "state",
    "status",
    "cliqueId",
    "clusterUuid",
    "health.summary",
    "health.bandwidth",
    "health.route_recovery_in_progress",
    "health.route_unhealthy",
    "health.access_timeout_recovery",
    "health.incorrect_configuration",
    "health.partition_assigned",
)

_SRAM_NUMBERS = (
    ("volatile.sram.parity", "volatile_uncorrected_parity"),
    ("volatile.sram.secded", "volatile_uncorrected_secded"),
    ("aggregate.sram.parity", "aggregate_uncorrected_parity"),
    ("aggregate.sram.secded", "aggregate_uncorrected_secded"),
)
_SRAM_UNITS = ("l2", "sm", "mcu", "pcie", "other")


def _sram_reading(d: GpuDetails, attr: str) -> Reading[Any]:
    return d.memory_health.sram.map(lambda e: getattr(e, attr))


def _sram(attr: str) -> Callable[[GpuDetails], Reading[Any]]:
    return lambda d: _sram_reading(d, attr)


# The table, in nvidia-smi's order (`nvidia-smi --help-query-gpu`).
FIELDS: tuple[Field, ...] = (
    F("timestamp", lambda m, g: Reading.of(m.collected_at), _timestamp),
    F("driver_version", lambda m, g: m.nvml.driver_version),
    *_unanswered("vgpu_driver_capability.heterogenous_multivGPU"),
    F("count", lambda m, g: Reading.of(len(m.gpus))),
    F("name", _gpu(lambda g: g.name), aliases=("gpu_name",)),
    D("serial", lambda d: d.identity.serial, aliases=("gpu_serial",)),
    F("uuid", _gpu(lambda g: g.uuid), aliases=("gpu_uuid",)),
    F("pci.bus_id", _gpu(lambda g: g.pci_bus_id), aliases=("gpu_bus_id",)),
    D("pci.domain", lambda d: d.identity.pci_domain, _hex(4)),
    D("pci.bus", lambda d: d.identity.pci_bus, _hex(2)),
    D("pci.device", lambda d: d.identity.pci_device, _hex(2)),
    D("pci.baseClass", lambda d: d.identity.pci_base_class, lambda v: f"0x{v:X}"),
    D("pci.subClass", lambda d: d.identity.pci_sub_class, lambda v: f"0x{v:X}"),
    D("pci.device_id", lambda d: d.identity.pci_device_id, _hex(8)),
    D("pci.sub_device_id", lambda d: d.identity.pci_subsystem_id, _hex(8)),
    *_unanswered(*_VGPU),
    F("pcie.link.gen.current", _gpu(lambda g: g.pcie.gen_current), group=_G.PCIE),
    F("pcie.link.gen.gpucurrent", _gpu(lambda g: g.pcie.gen_current), group=_G.PCIE),
    F("pcie.link.gen.max", _gpu(lambda g: g.pcie.gen_max), group=_G.PCIE),
    F("pcie.link.gen.gpumax", _gpu(lambda g: g.pcie.gen_gpu_max), group=_G.PCIE),
    *_unanswered("pcie.link.gen.hostmax"),  # nvidia-smi prints [N/A] on this driver
    F("pcie.link.width.current", _gpu(lambda g: g.pcie.width_current), group=_G.PCIE),
    F("pcie.link.width.max", _gpu(lambda g: g.pcie.width_max), group=_G.PCIE),
    F("index", lambda m, g: Reading.of(g.index)),
    D("display_mode", lambda d: d.identity.display_mode, lambda v: "[Requested functionality has been deprecated]"),
    D("display_attached", lambda d: d.identity.display_mode, _yes),
    D("display_active", lambda d: d.identity.display_active, _enabled),
    F("persistence_mode", _gpu(lambda g: g.persistence_mode), _enabled, group=_G.MODES),
    D("addressing_mode", lambda d: d.identity.addressing_mode, lambda v: ADDRESSING_MODES.get(v, str(v))),
    D("accounting.mode", lambda d: d.identity.accounting_mode, _enabled),
    D("accounting.buffer_size", lambda d: d.identity.accounting_buffer_size),
    *_unanswered("driver_model.current", "driver_model.pending"),  # Windows only
    D("vbios_version", lambda d: d.identity.vbios_version),
    D("inforom.img", lambda d: d.identity.inforom_image, aliases=("inforom.image",)),
    D("inforom.oem", lambda d: d.identity.inforom_oem),
    D("inforom.ecc", lambda d: d.identity.inforom_ecc),
    D("inforom.pwr", lambda d: d.identity.inforom_power, aliases=("inforom.power",)),
    F(
        "inforom.checksum_validation",
        _gpu(lambda g: g.inforom_valid),
        lambda v: "valid" if v else "invalid",
        group=_G.INFOROM,
    ),
    F(
        "gpu_recovery_action",
        _gpu(lambda g: g.recovery_action),
        lambda v: RECOVERY_ACTION_NAMES.get(v, str(v)),
        group=_G.RECOVERY,
    ),
    # GPU operation mode: Tesla K-series only.
    F("gom.current", None, aliases=("gpu_operation_mode.current",)),
    F("gom.pending", None, aliases=("gpu_operation_mode.pending",)),
    F("fan.speed", _gpu(lambda g: g.fan_percent), unit="%", group=_G.THERMAL),
    F("pstate", _gpu(lambda g: g.pstate), lambda p: f"P{p}", group=_G.PERFORMANCE),
    D(
        "clocks_event_reasons.supported",
        lambda d: d.clocks.event_reasons_supported,
        _hex(16),
        aliases=("clocks_throttle_reasons.supported",),
    ),
    F(
        "clocks_event_reasons.active",
        _gpu(lambda g: g.clock_event_reasons),
        _hex(16),
        aliases=("clocks_throttle_reasons.active",),
        group=_G.CLOCK_EVENTS,
    ),
    *(
        F(
            f"clocks_event_reasons.{name}",
            _event(bit),
            _active,
            aliases=(f"clocks_throttle_reasons.{name}",),
            group=_G.CLOCK_EVENTS,
        )
        for name, bit in _EVENTS
    ),
    *(
        F(f"clocks_event_reasons_counters.{e.query}", _event_counter(e.query), unit="us", group=_G.DETAILS)
        for e in CLOCK_EVENTS
        if e.counter_field
    ),
    F("memory.total", _mem("total_bytes"), _mib, "MiB", group=_G.MEMORY),
    F("memory.reserved", _reserved, _mib, "MiB", group=_G.MEMORY),
    F("memory.used", _mem("used_bytes"), _mib, "MiB", group=_G.MEMORY),
    F("memory.free", _mem("free_bytes"), _mib, "MiB", group=_G.MEMORY),
    F("compute_mode", _gpu(lambda g: g.compute_mode), lambda c: c.value, group=_G.MODES),
    F("compute_cap", _gpu(lambda g: g.compute_capability), lambda c: f"{c[0]}.{c[1]}", group=_G.CAPABILITY),
    F("utilization.gpu", lambda m, g: g.utilization.map(lambda u: u.gpu_percent), unit="%", group=_G.UTILIZATION),
    F("utilization.memory", lambda m, g: g.utilization.map(lambda u: u.memory_percent), unit="%", group=_G.UTILIZATION),
    D("utilization.encoder", lambda d: d.codecs.encoder_percent, unit="%"),
    D("utilization.decoder", lambda d: d.codecs.decoder_percent, unit="%"),
    D("utilization.jpeg", lambda d: d.codecs.jpeg_percent, unit="%"),
    D("utilization.ofa", lambda d: d.codecs.ofa_percent, unit="%"),
    D("encoder.stats.sessionCount", lambda d: d.codecs.encoder_sessions),
    D("encoder.stats.averageFps", lambda d: d.codecs.encoder_average_fps),
    D("encoder.stats.averageLatency", lambda d: d.codecs.encoder_average_latency_us),
    *_unanswered("dramEncryption.mode.current", "dramEncryption.mode.pending"),
    F("ecc.mode.current", _gpu(lambda g: g.ecc_mode_current), _enabled, group=_G.ECC),
    F("ecc.mode.pending", _gpu(lambda g: g.ecc_mode_pending), _enabled, group=_G.ECC),
    *(
        field
        for kind, counter, attr in _ECC_KINDS
        for field in (
            *(
                F(f"ecc.errors.{kind}.{counter}.{place}", _ecc_at(location, attr), group=_G.DETAILS)
                for place, location in _ECC_PLACES
            ),
            F(f"ecc.errors.{kind}.{counter}.total", _ecc_total(attr), group=_G.ECC),
        )
    ),
    *(D(f"ecc.errors.uncorrected.{name}", _sram(attr)) for name, attr in _SRAM_NUMBERS),
    D(
        "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded",
        lambda d: _sram_reading(d, "threshold_exceeded"),
        _yes,
    ),
    *(D(f"ecc.errors.uncorrected.aggregate.sram.{name}", _sram(f"aggregate_{name}")) for name in _SRAM_UNITS),
    F(
        "retired_pages.single_bit_ecc.count",
        _retired("single_bit"),
        aliases=("retired_pages.sbe",),
        group=_G.MEMORY_HEALTH,
    ),
    F("retired_pages.double_bit.count", _retired("double_bit"), aliases=("retired_pages.dbe",), group=_G.MEMORY_HEALTH),
    F("retired_pages.pending", _retired("pending"), _yes, group=_G.MEMORY_HEALTH),
    F("remapped_rows.correctable", _remapped("correctable"), aliases=("remapped_rows.sbe",), group=_G.MEMORY_HEALTH),
    D("remapped_rows.correctable_inactive", lambda d: d.memory_health.remapped_inactive_correctable),
    F(
        "remapped_rows.uncorrectable",
        _remapped("uncorrectable"),
        aliases=("remapped_rows.dbe",),
        group=_G.MEMORY_HEALTH,
    ),
    D("remapped_rows.uncorrectable_inactive", lambda d: d.memory_health.remapped_inactive_uncorrectable),
    F("remapped_rows.pending", _remapped("pending"), _yes, group=_G.MEMORY_HEALTH),
    F("remapped_rows.failure", _remapped("failure"), _yes, group=_G.MEMORY_HEALTH),
    *(
        F(f"remapped_rows.histogram.{a}", _histogram(a), group=_G.DETAILS)
        for a in ("max", "high", "partial", "low", "none")
    ),
    F("temperature.gpu", _gpu(lambda g: g.temperature_c), group=_G.THERMAL),
    D("temperature.gpu.tlimit", lambda d: d.temperatures.margin_c),
    D("temperature.memory", lambda d: d.temperatures.memory_c),
    D("power.management", lambda d: d.power.management, _enabled),
    F("power.draw", _gpu(lambda g: g.power_draw_w), _w, "W", group=_G.POWER),
    D("power.draw.average", lambda d: d.power.average_w, _w, "W", aliases=("gpu.power.draw.average",)),
    D("power.draw.instant", lambda d: d.power.instant_w, _w, "W", aliases=("gpu.power.draw.instant",)),
    D("power.limit", lambda d: d.power.requested_limit_w, _w, "W", aliases=("gpu.power.requested_limit",)),
    F(
        "enforced.power.limit",
        _gpu(lambda g: g.power_limit_w),
        _w,
        "W",
        aliases=("gpu.power.current_limit",),
        group=_G.POWER,
    ),
    D("power.default_limit", lambda d: d.power.default_limit_w, _w, "W", aliases=("gpu.power.default_limit",)),
    D("power.min_limit", lambda d: d.power.min_limit_w, _w, "W", aliases=("gpu.power.min_limit",)),
    D("power.max_limit", lambda d: d.power.max_limit_w, _w, "W", aliases=("gpu.power.max_limit",)),
    # Module (GPU + CPU superchip) power: Grace Hopper only.
    *_unanswered("module.power.draw.average", "module.power.draw.instant"),
    F("module.power.limit", None, aliases=("module.power.requested_limit",)),
    F("module.enforced.power.limit", None, aliases=("module.power.current_limit",)),
    *_unanswered("module.power.default_limit", "module.power.min_limit", "module.power.max_limit"),
    *_unanswered(*(f"power_smoothing.{n}" for n in _POWER_SMOOTHING)),
    F("clocks.current.graphics", _clock("current", "graphics"), unit="MHz", aliases=("clocks.gr",), group=_G.DETAILS),
    F("clocks.current.sm", _clock("current", "sm"), unit="MHz", aliases=("clocks.sm",), group=_G.DETAILS),
    F("clocks.current.memory", _clock("current", "memory"), unit="MHz", aliases=("clocks.mem",), group=_G.DETAILS),
    F("clocks.current.video", _clock("current", "video"), unit="MHz", aliases=("clocks.video",), group=_G.DETAILS),
    F(
        "clocks.applications.graphics",
        _clock("applications", "graphics"),
        unit="MHz",
        aliases=("clocks.applications.gr",),
        group=_G.DETAILS,
    ),
    F(
        "clocks.applications.memory",
        _clock("applications", "memory"),
        unit="MHz",
        aliases=("clocks.applications.mem",),
        group=_G.DETAILS,
    ),
    F(
        "clocks.default_applications.graphics",
        _clock("default_applications", "graphics"),
        unit="MHz",
        aliases=("clocks.default_applications.gr",),
        group=_G.DETAILS,
    ),
    F(
        "clocks.default_applications.memory",
        _clock("default_applications", "memory"),
        unit="MHz",
        aliases=("clocks.default_applications.mem",),
        group=_G.DETAILS,
    ),
    F("clocks.max.graphics", _clock("max", "graphics"), unit="MHz", aliases=("clocks.max.gr",), group=_G.DETAILS),
    F("clocks.max.sm", _clock("max", "sm"), unit="MHz", group=_G.DETAILS),
    F("clocks.max.memory", _clock("max", "memory"), unit="MHz", aliases=("clocks.max.mem",), group=_G.DETAILS),
    F("mig.mode.current", _gpu(lambda g: g.mig_mode_current), _enabled, group=_G.MIG),
    F("mig.mode.pending", _gpu(lambda g: g.mig_mode_pending), _enabled, group=_G.MIG),
    D("gsp.mode.current", lambda d: d.identity.gsp_mode_current, _enabled),
    D("gsp.mode.default", lambda d: d.identity.gsp_mode_default, _enabled),
    D("c2c.mode", lambda d: d.identity.c2c_enabled, _enabled),
    F("protected_memory.total", _protected(0), _mib, "MiB", group=_G.DETAILS),
    F("protected_memory.used", _protected(1), _mib, "MiB", group=_G.DETAILS),
    F("protected_memory.free", _protected(2), _mib, "MiB", group=_G.DETAILS),
    # Fabric (NVSwitch/NVL systems) and platform (GB200 racks): not read; nvidia-smi prints bare N/A.
    *_unanswered(*(f"fabric.{n}" for n in _FABRIC), missing="N/A"),
    *_unanswered(
        "platform.chassis_serial_number",
        "platform.slot_number",
        "platform.tray_index",
        "platform.host_id",
        "platform.peer_type",
    ),
    D("platform.module_id", lambda d: d.identity.module_id),
    *_unanswered("platform.gpu_fabric_guid", "hostname"),
)

# gpudiag's own, from before the full table (not nvidia-smi names): kept so scripts keep working.
EXTRAS: tuple[Field, ...] = (
    F("cuda_version", lambda m, g: m.nvml.cuda_driver_version.map(cuda_version_text)),
    F("temperature", _gpu(lambda g: g.temperature_c), group=_G.THERMAL),
)

# Every accepted spelling, lower-cased (nvidia-smi matches names case-insensitively).
BY_NAME: dict[str, Field] = {n.lower(): f for f in (*FIELDS, *EXTRAS) for n in (f.name, *f.aliases)}
_SPELLING = {n.lower(): n for f in FIELDS for n in (f.name, *f.aliases)}


def answered(field: Field) -> bool:
    return field.read is not None


class CsvFormat(msgspec.Struct, frozen=True):
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


class Column(msgspec.Struct, frozen=True):
    typed: str  # the name as the user wrote it: the header shows it, as nvidia-smi does
    field: Field


def parse_query(spec: str) -> list[Column]:
    columns = []
    for raw in spec.split(","):
        typed = raw.strip()
        if not typed:
            continue
        field = BY_NAME.get(typed.lower())
        if field is None:
            close = difflib.get_close_matches(typed.lower(), BY_NAME, n=1)
            hint = f"; did you mean {_SPELLING.get(close[0], close[0])!r}?" if close else ""
            raise UsageError(f"--query: unknown field {typed!r}{hint} (nvidia-smi --help-query-gpu lists them)")
        columns.append(Column(typed, field))
    if not columns:
        raise UsageError("--query needs at least one field, e.g. --query name,memory.used")
    return columns


def groups(columns: list[Column]) -> frozenset[FactGroup]:
    """The fact groups the source must read for these fields (nothing else is read)."""
    return frozenset(c.field.group for c in columns if c.field.group is not None)


def value(machine: Machine, gpu: Gpu, field: Field, units: bool = True) -> str:
    """One cell as nvidia-smi prints it."""
    if field.read is None:
        return field.missing
    reading = field.read(machine, gpu)
    if reading.value is None:
        return field.missing
    text = field.show(reading.value)
    return f"{text} {field.unit}" if units and field.unit else text


def render_csv(machine: Machine, gpus: tuple[Gpu, ...], columns: list[Column], fmt: CsvFormat) -> str:
    """Rows joined with ", ", as nvidia-smi writes them; the header keeps units even with nounits."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{c.typed} [{c.field.unit}]" if c.field.unit else c.typed for c in columns))
    for gpu in gpus:
        lines.append(", ".join(value(machine, gpu, c.field, fmt.units) for c in columns))
    return "".join(line + "\n" for line in lines)


# -- --query-compute-apps ---------------------------------------------------------------


class AppField(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str
    read: Callable[[Machine, Gpu, GpuProcess], Reading[Any]]
    show: Formatter = str
    group: FactGroup | None = None


# nvidia-smi --help-query-compute-apps, in its order.
APP_FIELDS: tuple[AppField, ...] = (
    AppField("timestamp", (), "", lambda m, g, p: Reading.of(m.collected_at), _timestamp),
    AppField("gpu_name", (), "", lambda m, g, p: g.name),
    AppField("gpu_bus_id", (), "", lambda m, g, p: g.pci_bus_id),
    AppField("gpu_serial", (), "", lambda m, g, p: _det(lambda d: d.identity.serial)(m, g), group=_G.DETAILS),
    AppField("gpu_uuid", (), "", lambda m, g, p: g.uuid),
    AppField("pid", (), "", lambda m, g, p: Reading.of(p.pid)),
    AppField("process_name", ("name",), "", lambda m, g, p: p.host.name),
    AppField("used_gpu_memory", ("used_memory",), "MiB", lambda m, g, p: p.used_memory_bytes, _mib),
)
APPS_BY_NAME: dict[str, AppField] = {n.lower(): f for f in APP_FIELDS for n in (f.name, *f.aliases)}


def parse_apps_query(spec: str) -> list[tuple[str, AppField]]:
    columns = []
    for raw in spec.split(","):
        typed = raw.strip()
        if not typed:
            continue
        field = APPS_BY_NAME.get(typed.lower())
        if field is None:
            close = difflib.get_close_matches(typed.lower(), APPS_BY_NAME, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(f.name for f in APP_FIELDS)
            raise UsageError(f"--query-compute-apps: unknown field {typed!r}{hint} (known: {known})")
        columns.append((typed, field))
    if not columns:
        raise UsageError("--query-compute-apps needs at least one field, e.g. pid,process_name,used_memory")
    return columns


def render_apps_csv(
    machine: Machine, gpus: tuple[Gpu, ...], columns: list[tuple[str, AppField]], fmt: CsvFormat
) -> str:
    """One row per compute process (graphics-only processes are left out, as nvidia-smi does)."""
    lines = []
    if fmt.header:
        lines.append(", ".join(f"{typed} [{f.unit}]" if f.unit else typed for typed, f in columns))
    for gpu in gpus:
        for proc in gpu.processes.get(()):
            if proc.kind is ProcessKind.GRAPHICS:
                continue
            cells = []
            for _, f in columns:
                reading = f.read(machine, gpu, proc)
                if reading.value is None:
                    cells.append("[N/A]")
                else:
                    text = f.show(reading.value)
                    cells.append(f"{text} {f.unit}" if fmt.units and f.unit else text)
            lines.append(", ".join(cells))
    return "".join(line + "\n" for line in lines)
