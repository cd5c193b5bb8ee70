"""A short series recorded beside a machine: what its GPUs read, sample by sample, for the monitors.

``gpudiag dmon``, ``pmon`` and ``stat --watch`` on a replay print the recorded series, never the one
snapshot again and again. The series of a shipped example is ``gpudiag/machines/series/<example>.json``;
of a snapshot file, ``FILE.series.json`` beside it. A snapshot without one replays as one sample.

The file (schema ``gpudiag.series/1``)::

    {"schema": "gpudiag.series/1",
     "grounding": "captured" | "illustrative",   # measured on real hardware, or written to illustrate
     "source": "docs/hardware/.../nvidia-smi-dmon.txt ...",   # where the figures come from
     "started_at": 1795394060.0, "interval_s": 1.0,
     "gpus": {"0": [{"power_draw_w": 71.0, "temperature_c": 34, ...}, {...}], "1": [...]}}

Each GPU (by NVML index) has the same number of samples, at least two, and each sample gives readings by
their spec keys (gpudiag.readings' and gpudiag.details' rows, ``{"unavailable": reason}`` for a missing
one), which the fake NVML then answers: a key holds from its sample on until a later sample changes it.
The loader refuses a file that is not exactly that: an unknown key or GPU, a GPU of the machine without
samples, values NVML cannot return (the machine loader's rules, applied to every sample), or a series
whose samples are all the same (one snapshot repeated).
"""

from __future__ import annotations

import functools
import math
import typing
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from gpudiag.model import Gpu, GpuState, Machine, Reading, Reason
from gpudiag.readings import GPU_READINGS, Spec, field_types
from gpudiag.replay.fixtures import (
    EXAMPLES_DIR,
    FixtureError,
    _impossible_number,
    _impossible_reading,
    duplicate_keys,
    read_file,
)
from gpudiag.serialize import SchemaError, from_data

SCHEMA = "gpudiag.series/1"
SERIES_DIR = Path(EXAMPLES_DIR, "series")
GROUNDINGS = ("captured", "illustrative")
# Identity and layout do not change between samples: a series cannot say otherwise.
_FIXED_KEYS = frozenset({"uuid", "pci_bus_id", "name", "minor_number", "mig_devices", "mig_profiles", "mig_instances"})


class Series(msgspec.Struct, frozen=True):
    grounding: str
    source: str
    started_at: float
    interval_s: float
    # Per sample: each GPU's position in the machine -> the readings it sets, by key.
    samples: tuple[dict[int, dict[str, Reading[Any]]], ...]
    description: str = ""

    def __len__(self) -> int:
        return len(self.samples)

    def time_of(self, n: int) -> float:
        """When sample ``n`` was taken (unix time)."""
        return self.started_at + n * self.interval_s

    def machine_at(self, machine: Machine, n: int) -> Machine:
        """``machine`` as it read at sample ``n``: every key set by samples 0..n, the latest winning."""
        latest: dict[int, dict[str, Reading[Any]]] = {}
        for sample in self.samples[: n + 1]:
            for position, values in sample.items():
                latest.setdefault(position, {}).update(values)
        gpus = list(machine.gpus)
        for position, values in latest.items():
            gpus[position] = apply(gpus[position], values)
        return replace(machine, gpus=tuple(gpus), collected_at=self.time_of(n))


def path_for(spec: str) -> Path:
    """Where the series of an example (``NAME``) or of a snapshot file (``FILE.json``) lives."""
    candidate = Path(spec)
    if candidate.suffix == ".json" or "/" in spec:
        return candidate.with_suffix(".series.json")
    return SERIES_DIR / f"{spec}.json"


def load_for(spec: str, machine: Machine) -> Series | None:
    """The series recorded for the replay ``spec`` of ``machine``, or None when it has none."""
    path = path_for(spec)
    if not path.is_file():
        return None
    raw = read_file(path)
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{path}: not a series: {exc}") from None
    if path.parent != SERIES_DIR:  # a shipped series' keys are checked by the tests
        duplicate_keys(raw, path)
    return series_from_data(data, machine, str(path))


def series_from_data(data: Any, machine: Machine, where: str = "series") -> Series:
    if not isinstance(data, dict):
        raise FixtureError(f"{where}: expected a JSON object")
    if data.get("schema") != SCHEMA:
        raise FixtureError(f"{where}: schema is {data.get('schema')!r}, this gpudiag reads {SCHEMA!r}")
    unknown = set(data) - {"schema", "description", "grounding", "source", "started_at", "interval_s", "gpus"}
    if unknown:
        raise FixtureError(f"{where}: unknown keys {sorted(unknown)}")
    if data.get("grounding") not in GROUNDINGS:
        raise FixtureError(f"{where}: $.grounding: one of {', '.join(GROUNDINGS)}")
    for name in ("source", "description"):
        if not isinstance(data.get(name, ""), str):
            raise FixtureError(f"{where}: $.{name}: expected a string")
    started, interval = data.get("started_at"), data.get("interval_s")
    for name, value in (("started_at", started), ("interval_s", interval)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise FixtureError(f"{where}: $.{name}: expected a finite number of seconds")
    if not interval:
        raise FixtureError(f"{where}: $.interval_s: must be more than 0")
    gpus = data.get("gpus")
    if not isinstance(gpus, dict) or not gpus:
        raise FixtureError(f"{where}: $.gpus: expected an object of GPU indices")
    problem = _impossible_number(gpus)
    if problem:
        raise FixtureError(f"{where}: {problem.replace('$', '$.gpus', 1)} (real NVML cannot return this)")
    positions = {gpu.index: n for n, gpu in enumerate(machine.gpus)}
    usable = {gpu.index for gpu in machine.gpus if gpu.state is GpuState.OK}
    lengths: set[int] = set()
    per_gpu: dict[int, list[dict[str, Reading[Any]]]] = {}
    for name, samples in gpus.items():
        at = f"$.gpus.{name}"
        index = int(name) if name.isascii() and name.isdigit() else -1
        if index not in positions:
            raise FixtureError(f"{where}: {at}: no GPU {name} in the machine")
        if index not in usable:
            raise FixtureError(
                f"{where}: {at}: GPU {name} is {machine.gpus[positions[index]].state.value}: it gives no samples"
            )
        if not isinstance(samples, list):
            raise FixtureError(f"{where}: {at}: expected a list of samples")
        per_gpu[positions[index]] = [_sample(sample, f"{at}[{i}]", where) for i, sample in enumerate(samples)]
        lengths.add(len(samples))
    missing = sorted(usable - set(int(n) for n in gpus))
    if missing:
        raise FixtureError(f"{where}: $.gpus: no samples for GPU {', '.join(map(str, missing))}")
    if len(lengths) != 1 or min(lengths) < 2:
        raise FixtureError(
            f"{where}: $.gpus: every GPU needs the same number of samples, at least 2 (got {sorted(lengths)})"
        )
    count = lengths.pop()
    series = Series(
        grounding=data["grounding"],
        source=data.get("source", ""),
        description=data.get("description", ""),
        started_at=float(started),  # type: ignore[arg-type]
        interval_s=float(interval),
        samples=tuple({position: rows[n] for position, rows in per_gpu.items()} for n in range(count)),
    )
    if all(sample == series.samples[0] for sample in series.samples[1:]) or all(
        all(not values for values in sample.values()) for sample in series.samples[1:]
    ):
        raise FixtureError(f"{where}: every sample is the same: a series, not one snapshot repeated")
    for n in range(count):
        problem = _impossible_reading(series.machine_at(machine, n))
        if problem:
            raise FixtureError(f"{where}: sample {n}: {problem} (real NVML cannot return this)")
    return series


def _sample(data: Any, at: str, where: str) -> dict[str, Reading[Any]]:
    if not isinstance(data, dict):
        raise FixtureError(f"{where}: {at}: expected an object of readings by key")
    out: dict[str, Reading[Any]] = {}
    for key, value in data.items():
        kind = key_types().get(key)
        if kind is None:
            raise FixtureError(f"{where}: {at}: {key!r} is not a reading a series can hold (see gpudiag.readings)")
        try:
            out[key] = from_data(kind, value, f"{at}.{key}")
        except SchemaError as exc:
            raise FixtureError(f"{where}: {exc}") from None
    return out


@functools.cache
def key_types() -> dict[str, Any]:
    """Every key a sample may set (the readings' rows but identity and MIG's layout) and its Reading type."""
    from gpudiag.details import DETAIL_READINGS, GpuDetails

    types: dict[str, Any] = {}
    for row in (*GPU_READINGS, *DETAIL_READINGS):
        if row.key in _FIXED_KEYS:
            continue
        node: Any = Gpu
        kind: Any = None
        for part in row.key.split("."):
            name, _, item = part.partition("[")
            hints = field_types(GpuDetails if node is object else node)
            kind = hints[name]
            if item:  # a tuple of (name, reading) pairs
                kind = typing.get_args(typing.get_args(kind)[0])[1]
            node = typing.get_args(kind)[0] if typing.get_origin(kind) is Reading else kind
        types[row.key] = kind
    return types


# --- applying a sample ----------------------------------------------------------------------


def apply(gpu: Gpu, values: dict[str, Reading[Any]]) -> Gpu:
    """The GPU with these readings; a detail set on a GPU that recorded no details gets them, the rest
    of its details "not recorded" (and the details' copies of its own readings, as NVML answers both)."""
    if any(key.startswith("details.") for key in values) and gpu.details.value is None:
        gpu = replace(gpu, details=Reading.of(_blank_details(gpu)))
    for key, reading in values.items():
        for target in (key, *aliases().get(key, ())):
            gpu = _set(gpu, _parts(target), reading)
    return gpu


@functools.cache
def aliases() -> dict[str, tuple[str, ...]]:
    """Keys that read the same NVML answer (``clock_sm_mhz`` and ``details.clocks.current.sm``): a value
    for one is the other's too."""
    from gpudiag.details import DETAIL_READINGS

    def answer(row: Spec) -> tuple[Any, ...]:
        return (row.call, row.args, row.pick, row.field)

    rows = [row for row in (*GPU_READINGS, *DETAIL_READINGS) if not row.custom]
    out: dict[str, tuple[str, ...]] = {}
    for row in rows:
        same = tuple(other.key for other in rows if other is not row and answer(other) == answer(row))
        if same:
            out[row.key] = same
    return out


def _blank_details(gpu: Gpu) -> Any:
    from gpudiag.details import GpuDetails

    details = _blank(GpuDetails, Reading.missing(Reason.NOT_RECORDED))
    holder = replace(gpu, details=Reading.of(details))
    for key, others in aliases().items():
        if not key.startswith("details."):
            for other in others:
                holder = _set(holder, _parts(other), _reading_at(gpu, key))
    return holder.details.value


def _reading_at(gpu: Gpu, key: str) -> Reading[Any]:
    from gpudiag.readings import reading_at

    return reading_at(gpu, key)


def _blank(cls: Any, missing: Reading[Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, kind in field_types(cls).items():
        if typing.get_origin(kind) is Reading:
            kwargs[name] = missing
        elif typing.get_origin(kind) is tuple:
            kwargs[name] = ()
        else:
            kwargs[name] = _blank(kind, missing)
    return cls(**kwargs)


@functools.cache
def _parts(key: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, item.rstrip("]")) for name, _, item in (part.partition("[") for part in key.split(".")))


def _set(node: Any, parts: tuple[tuple[str, str], ...], reading: Reading[Any]) -> Any:
    (name, item), rest = parts[0], parts[1:]
    if item:  # a tuple of (name, reading) pairs: replace the pair, or add it
        pairs = tuple(getattr(node, name))
        found = any(k == item for k, _ in pairs)
        new = tuple((k, reading if k == item else v) for k, v in pairs) if found else (*pairs, (item, reading))
        return replace(node, **{name: new})
    if not rest:
        return replace(node, **{name: reading})
    child = getattr(node, name)
    if isinstance(child, Reading):
        if child.value is None:
            return node  # nothing under a missing reading to set
        return replace(node, **{name: Reading.of(_set(child.value, rest, reading))})
    return replace(node, **{name: _set(child, rest, reading)})
