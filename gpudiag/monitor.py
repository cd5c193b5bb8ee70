"""What `gpudiag dmon` and `gpudiag pmon` show, declared once: nvidia-smi dmon's columns by its `-s`
letters, each with the readings it needs (gpudiag.readings' keys) and how a sample makes its value.

Like DCGM's dmon, which prints fields from one table: a column names its header and unit as nvidia-smi
prints them, its JSON key (unit in the name), the spec rows it reads, and its value from this sample
(and the previous one, for the rates). A monitor reads, per interval, the rows of the selected groups
only. Pure: readings in, values out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from gpudiag.errors import UsageError
from gpudiag.model import Reading, Reason

Readings = Mapping[str, Reading[Any]]
MIB = 1024 * 1024

# One sample of one GPU: its readings and when (seconds, monotonic or the series' time).
Value = Callable[[Readings, "Readings | None", float], Reading[Any]]


class Column(msgspec.Struct, frozen=True):
    name: str  # dmon's header: "pwr"
    unit: str  # dmon's unit line: "W"
    group: str  # dmon's -s letter
    key: str  # in --json, with its unit: "power_w"
    rows: tuple[str, ...]  # the readings it needs, by spec key
    value: Value  # (this sample, the previous one or None, seconds between them) -> the value


def _current(key: str, part: str | int | None = None, scale: float = 1.0) -> Value:
    def value(now: Readings, before: Readings | None, seconds: float) -> Reading[Any]:
        reading = now[key]
        if part is not None:
            reading = reading.map(lambda v: v[part] if isinstance(part, int) else getattr(v, part))
        return reading.map(lambda v: v / scale) if scale != 1.0 else reading

    return value


def _mib(key: str, part: str | int) -> Value:
    """MiB, rounded up as nvidia-smi rounds memory (13 437 304 832 B is 12815 MiB)."""
    read = _current(key, part)
    return lambda now, before, seconds: read(now, before, seconds).map(lambda b: -(-int(b) // MIB))


def _share(key: str) -> Value:
    """The share (%) of the interval a time counter (µs) grew by: the time spent in that state."""

    def value(now: Readings, before: Readings | None, seconds: float) -> Reading[Any]:
        if before is None or seconds <= 0:
            return Reading.missing(Reason.NOT_READ, "needs two samples")
        grown = _grown(now, before, (key,))
        return grown.map(lambda us: max(0.0, min(100.0, us / (seconds * 1e4))))

    return value


def _grew(*keys: str) -> Value:
    """1 when any of these time counters grew since the last sample, else 0 (dmon's tviol flag)."""

    def value(now: Readings, before: Readings | None, seconds: float) -> Reading[Any]:
        if before is None:
            return Reading.missing(Reason.NOT_READ, "needs two samples")
        return _grown(now, before, keys).map(lambda us: int(us > 0))

    return value


def _grown(now: Readings, before: Readings, keys: tuple[str, ...]) -> Reading[int]:
    total = 0
    found = False
    for key in keys:
        a, b = before[key], now[key]
        if a.value is None or b.value is None:
            continue
        total += max(0, int(b.value) - int(a.value))  # a counter reset (driver reload) counts from zero
        found = True
    if not found:
        return Reading.missing_like(now[keys[0]] if now[keys[0]].value is None else before[keys[0]])
    return Reading.of(total)


_COUNTER = "details.clocks.event_reason_counters_us[{}]"

# nvidia-smi dmon's columns, group by group in its `-s pucvmet` order (nvidia-smi 580's names and units).
COLUMNS: tuple[Column, ...] = (
    Column("pwr", "W", "p", "power_w", ("power_draw_w",), _current("power_draw_w")),
    Column("gtemp", "C", "p", "gpu_temp_c", ("temperature_c",), _current("temperature_c")),
    Column(
        "mtemp",
        "C",
        "p",
        "memory_temp_c",
        ("details.temperatures.memory_c",),
        _current("details.temperatures.memory_c"),
    ),
    Column("sm", "%", "u", "sm_percent", ("utilization",), _current("utilization", "gpu_percent")),
    Column("mem", "%", "u", "memory_percent", ("utilization",), _current("utilization", "memory_percent")),
    *(
        Column(name, "%", "u", f"{long}_percent", (key,), _current(key))
        for name, long in (("enc", "encoder"), ("dec", "decoder"), ("jpg", "jpeg"), ("ofa", "ofa"))
        for key in (f"details.codecs.{long}_percent",)
    ),
    Column("mclk", "MHz", "c", "memory_clock_mhz", ("clock_memory_mhz",), _current("clock_memory_mhz")),
    Column("pclk", "MHz", "c", "processor_clock_mhz", ("clock_graphics_mhz",), _current("clock_graphics_mhz")),
    Column(
        "pviol",
        "%",
        "v",
        "power_violation_percent",
        (_COUNTER.format("sw_power_cap"),),
        _share(_COUNTER.format("sw_power_cap")),
    ),
    Column(
        "tviol",
        "bool",
        "v",
        "thermal_violation",
        (_COUNTER.format("sw_thermal_slowdown"), _COUNTER.format("hw_thermal_slowdown")),
        _grew(_COUNTER.format("sw_thermal_slowdown"), _COUNTER.format("hw_thermal_slowdown")),
    ),
    Column("fb", "MB", "m", "fb_used_mib", ("memory",), _mib("memory", "used_bytes")),
    Column("bar1", "MB", "m", "bar1_used_mib", ("details.bar1",), _mib("details.bar1", "used_bytes")),
    Column(
        "ccpm",
        "MB",
        "m",
        "protected_used_mib",
        ("details.identity.protected_memory_bytes",),
        _mib("details.identity.protected_memory_bytes", 1),
    ),
    Column(
        "sbecc",
        "errs",
        "e",
        "sbecc_errors",
        ("ecc_errors.aggregate_corrected",),
        _current("ecc_errors.aggregate_corrected"),
    ),
    Column(
        "dbecc",
        "errs",
        "e",
        "dbecc_errors",
        ("ecc_errors.aggregate_uncorrected",),
        _current("ecc_errors.aggregate_uncorrected"),
    ),
    Column("pci", "errs", "e", "pcie_replays", ("pcie_replays",), _current("pcie_replays")),
    # NVML's PCIe throughput is KB/s over its last 20 ms window; dmon prints MB/s.
    Column(
        "rxpci", "MB/s", "t", "pcie_rx_mbps", ("details.pcie.rx_kbps",), _current("details.pcie.rx_kbps", None, 1000)
    ),
    Column(
        "txpci", "MB/s", "t", "pcie_tx_mbps", ("details.pcie.tx_kbps",), _current("details.pcie.tx_kbps", None, 1000)
    ),
)
GROUPS = {
    "p": "power usage (W) and GPU / memory temperature (C)",
    "u": "utilization: SM, memory, encoder, decoder, JPEG, OFA (%)",
    "c": "memory and processor (graphics) clocks (MHz)",
    "v": "power violation (% of the interval power-capped) and thermal violation (1 when thermally slowed)",
    "m": "frame buffer, BAR1 and confidential-compute protected memory used (MiB)",
    "e": "ECC errors (aggregate single-bit, double-bit) and PCIe replays",
    "t": "PCIe receive and transmit throughput (MB/s)",
}
DEFAULT_GROUPS = "puc"


def select(letters: str) -> tuple[Column, ...]:
    """The columns of dmon's ``-s`` letters, in the order given (as nvidia-smi prints them)."""
    order: list[str] = []
    for letter in letters:
        if letter not in GROUPS:
            known = ", ".join(f"{g} ({what})" for g, what in GROUPS.items())
            raise UsageError(f"--select {letters!r}: unknown metric group {letter!r}; choose from {known}")
        if letter not in order:
            order.append(letter)
    if not order:
        raise UsageError("--select: give at least one metric group (e.g. puc)")
    return tuple(column for letter in order for column in COLUMNS if column.group == letter)


@functools.cache
def row_keys(columns: tuple[Column, ...]) -> tuple[str, ...]:
    """The readings these columns need, each once, in column order."""
    return tuple(dict.fromkeys(key for column in columns for key in column.rows))


def values(
    columns: tuple[Column, ...], now: Readings, before: Readings | None, seconds: float
) -> tuple[Reading[Any], ...]:
    """Each column's value for one GPU's sample."""
    return tuple(column.value(now, before, seconds) for column in columns)


# --- pmon ------------------------------------------------------------------------------------


class ProcessColumn(msgspec.Struct, frozen=True):
    name: str
    unit: str
    group: str  # pmon's -s letter: u (utilization), m (memory)
    key: str  # in --json


PMON_COLUMNS: tuple[ProcessColumn, ...] = (
    ProcessColumn("sm", "%", "u", "sm_percent"),
    ProcessColumn("mem", "%", "u", "memory_percent"),
    ProcessColumn("enc", "%", "u", "encoder_percent"),
    ProcessColumn("dec", "%", "u", "decoder_percent"),
    ProcessColumn("jpg", "%", "u", "jpeg_percent"),
    ProcessColumn("ofa", "%", "u", "ofa_percent"),
    ProcessColumn("fb", "MB", "m", "fb_used_mib"),
    ProcessColumn("ccpm", "MB", "m", "protected_used_mib"),
)
PMON_GROUPS = {"u": "utilization: SM, memory, encoder, decoder, JPEG, OFA (%)", "m": "frame buffer memory used (MiB)"}
PMON_DEFAULT = "u"


def select_pmon(letters: str) -> tuple[ProcessColumn, ...]:
    order: list[str] = []
    for letter in letters:
        if letter not in PMON_GROUPS:
            known = ", ".join(f"{g} ({what})" for g, what in PMON_GROUPS.items())
            raise UsageError(f"--select {letters!r}: unknown metric group {letter!r}; choose from {known}")
        if letter not in order:
            order.append(letter)
    if not order:
        raise UsageError("--select: give at least one metric group (u, m)")
    return tuple(column for letter in order for column in PMON_COLUMNS if column.group == letter)


class ProcessRow(msgspec.Struct, frozen=True):
    """One line of pmon: a process on a GPU in one interval, or the GPU's "-" line when none ran."""

    gpu: int
    pid: int | None  # None: no process on the GPU
    kind: str  # "C", "G", "C+G" ("-" without a process)
    values: tuple[Reading[Any], ...]  # per selected column
    name: Reading[str]  # the command's name (outside text: escape where shown)


def process_rows(
    gpu: int, columns: tuple[ProcessColumn, ...], processes: Reading[Any], loads: Reading[Any]
) -> list[ProcessRow]:
    """pmon's lines for one GPU in one interval: every process on it (NVML's compute and graphics
    lists, and any with a utilization sample), with its share of the interval's samples; "-" where it
    had none; one "-" line when nothing ran."""
    no_sample: Reading[Any] = Reading.missing(Reason.NOT_FOUND, "no sample of this process in the interval")
    by_pid = {p.pid: p for p in processes.get(())}
    samples = {load.pid: load for load in loads.get(())}
    pids = list(dict.fromkeys([*by_pid, *sorted(samples)]))
    if not pids:
        return [
            ProcessRow(
                gpu,
                None,
                "-",
                tuple(Reading.missing(Reason.NOT_FOUND) for _ in columns),
                Reading.missing(Reason.NOT_FOUND),
            )
        ]
    rows = []
    for pid in pids:
        proc, load = by_pid.get(pid), samples.get(pid)
        out: list[Reading[Any]] = []
        for column in columns:
            if column.key == "fb_used_mib":
                used = proc.used_memory_bytes if proc is not None else no_sample
                out.append(used.map(lambda b: -(-int(b) // MIB)))
            elif column.key == "protected_used_mib":
                out.append(Reading.missing(Reason.NOT_SUPPORTED, "NVML gives no per-process protected memory"))
            elif column.key in ("jpeg_percent", "ofa_percent"):
                out.append(Reading.missing(Reason.NOT_SUPPORTED, "not in nvmlDeviceGetProcessUtilization's samples"))
            elif load is None:
                out.append(no_sample)
            else:  # ProcessLoad's field of the same name
                out.append(Reading.of(int(getattr(load, column.key))))
        name = proc.host.name if proc is not None else Reading.missing(Reason.NOT_FOUND, "not in NVML's process lists")
        rows.append(ProcessRow(gpu, pid, proc.kind.value if proc is not None else "-", tuple(out), name))
    return rows
