"""What each ``--query-gpu`` name stands for: its spellings, its unit and what answers it.

Two declarations meet here, each parsed once: nvidia-smi's vocabulary
(:mod:`gpudiag.query.smi_names`: every name and alias driver 580 accepts, with its unit) and the
readings' names (:mod:`gpudiag.query.reading_names`: the name each reading answers, the part of its
value, the name of its format). A few answers are derived here rather than read from one reading:
the timestamp, the driver version, the GPU count and index, each clock-event bit, the ECC counts by
memory location. A name that nothing answers (vGPU, Windows driver model, power smoothing, ...) is
accepted; the renderer prints what nvidia-smi prints without a value. How a value is written and
where nvidia-smi prints N/A for an answer NVML gave are the CSV renderer's (``render.csv_query``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

from gpudiag.model import FactGroup, Gpu, Machine, Reading, Reason, cuda_version_text
from gpudiag.query.reading_names import QUERY_NAMES
from gpudiag.query.smi_names import NVIDIA_SMI_FIELDS
from gpudiag.readings import CLOCK_EVENTS, GPU_READINGS, pick, reading_at

Reader = Callable[[Machine, Gpu], Reading[Any]]


class Answer(msgspec.Struct, frozen=True):
    """What answers a name: one reading's row (``key``, and the ``part`` of its value shown), or a
    reading derived from the machine (``derive``); ``format``: the name of how its value is written."""

    key: str = ""  # the row read; "": derived
    part: int | str | None = None
    format: str = ""
    group: FactGroup | None = None  # what the source must read for it; None: identity or system facts
    keys: tuple[str, ...] = ()  # the rows of its group it shows (none beyond identity and the system's: ())
    derive: Reader | None = None


class Field(msgspec.Struct, frozen=True):
    name: str
    aliases: tuple[str, ...]
    unit: str  # "[unit]" in the header; after each value unless nounits
    missing: str = "[N/A]"  # what nvidia-smi prints without a value
    answer: Answer | None = None  # None: nvidia-smi knows the name, NVML cannot answer it here

    @property
    def answered(self) -> bool:
        return self.answer is not None

    @property
    def group(self) -> FactGroup | None:
        return None if self.answer is None else self.answer.group


class Named(msgspec.Struct, frozen=True):
    """One entry of the readings' table (``NAME[:PART][=FORMAT]``), parsed."""

    name: str
    key: str  # the reading's row
    part: int | str | None  # an attribute, an index, or the whole value
    format: str


@functools.cache
def named() -> tuple[Named, ...]:
    """Every name the readings answer (QUERY_NAMES), in its order: the one place that table is parsed."""
    out = []
    for key, entries in QUERY_NAMES.items():
        for entry in entries:
            entry, _, fmt = entry.partition("=")
            name, _, part = entry.partition(":")
            out.append(Named(name, key, int(part) if part.isdigit() else part or None, fmt))
    return tuple(out)


def part_of(reading: Reading[Any], part: int | str | None) -> Reading[Any]:
    """One part of a reading's value (an attribute, an index), or the reading whole."""
    if part is None or reading.value is None:
        return reading
    value = pick(reading.value, part)
    return value if isinstance(value, Reading) else Reading.of(value)


# -- the answers derived here rather than read from one reading -----------------------------------


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

# A name here that nvidia-smi has not (cuda_version) is gpudiag's own.
DERIVED: dict[str, Answer] = {
    "timestamp": Answer(format="timestamp", derive=lambda m, g: recorded_at(m)),
    "driver_version": Answer(derive=lambda m, g: m.nvml.driver_version),
    "count": Answer(derive=lambda m, g: Reading.of(len(m.gpus))),
    "index": Answer(derive=lambda m, g: Reading.of(g.index)),
    "cuda_version": Answer(derive=lambda m, g: m.nvml.cuda_driver_version.map(cuda_version_text)),
    **{
        f"clocks_event_reasons.{e.query}": Answer(
            format="active", group=FactGroup.CLOCK_EVENTS, keys=("clock_event_reasons",), derive=_event(e.bit)
        )
        for e in CLOCK_EVENTS
    },
    **{
        f"ecc.errors.{kind}.{counter}.{place}": Answer(
            group=FactGroup.DETAILS, derive=_ecc_at(location, f"{counter}_{kind}")
        )
        for kind, counter in _ECC_KINDS
        for place, location in _ECC_PLACES
    },
}


# -- the vocabulary: each name with what answers it --------------------------------------------


@functools.cache
def _answers() -> dict[str, Answer]:
    groups = {row.key: row.group for row in GPU_READINGS}
    read = {n.name: Answer(n.key, n.part, n.format, groups.get(n.key, FactGroup.DETAILS), (n.key,)) for n in named()}
    return {**read, **DERIVED}


@functools.cache
def fields() -> tuple[Field, ...]:
    """Every --query-gpu field nvidia-smi knows, in its order, each with what answers it here.
    NVIDIA_SMI_FIELDS is parsed here only: ``NAME ALIAS… [UNIT] =MISSING``."""
    answers = _answers()
    out = []
    for line in NVIDIA_SMI_FIELDS.strip().splitlines():
        line, _, missing = line.partition(" =")
        line, _, unit = line.partition(" [")
        name, *aliases = line.split()
        out.append(Field(name, tuple(aliases), unit.rstrip("]"), missing or "[N/A]", answers.get(name)))
    return tuple(out)


@functools.cache
def own_names() -> tuple[str, ...]:
    """gpudiag's own names: those answered here that nvidia-smi does not know (a new reading's name
    needs no other edit)."""
    known = {n.lower() for f in fields() for n in (f.name, *f.aliases)}
    answered = (*DERIVED, *(n.name for n in named()))
    return tuple(dict.fromkeys(name for name in answered if name.lower() not in known))


@functools.cache
def spellings() -> dict[str, Field]:
    """Every accepted spelling, lower-cased (nvidia-smi matches names case-insensitively)."""
    out = {n.lower(): f for f in fields() for n in (f.name, *f.aliases)}
    answers = _answers()
    out.update({n.lower(): Field(n, (), "", answer=answers[n]) for n in own_names()})
    return out


def field(typed: str) -> Field | None:
    """The field a name or alias (in any case) stands for; None: no such name."""
    return spellings().get(typed.lower())


def spelling(lowered: str) -> str:
    """nvidia-smi's own spelling of a lower-cased name or alias."""
    found = spellings()[lowered]
    return next((n for n in (found.name, *found.aliases) if n.lower() == lowered), lowered)
