"""What a read of NVML asks per GPU and what stands for what it did not read: the rows of a set of
fact groups in call order and how they build the GPU, the blank of a reading not read, and the
blank of a composite that failed."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from typing import Any

import msgspec

from gpudiag.model import FactGroup, Gpu, Reading, Reason, blank_fields
from gpudiag.readings import Spec, builder, field_types, group_readings


def blank_for(key: str, error: Reading[Any] | None) -> Any:
    """What stands for the reading at ``key`` (a row's dotted path from the GPU) when its composite
    failed: ``error``, or no items where the model keeps a plain tuple there."""
    missing = error if error is not None else Reading.missing(Reason.UNKNOWN_ERROR, f"{key}: not read")
    cls: Any = Gpu
    names = key.split(".")
    if names[0] == "details":
        from gpudiag.details import GpuDetails

        cls, names = GpuDetails, names[1:]
    kind: Any = None
    for name in names:
        kind = field_types(cls).get(name) if isinstance(cls, type) and issubclass(cls, msgspec.Struct) else None
        if kind is None:
            return missing
        cls = kind
    return () if typing.get_origin(kind) is tuple else missing


NOT_READ: Reading[Any] = Reading.missing(Reason.NOT_READ)


@functools.cache
def rows_of(
    facts: frozenset[FactGroup], only: frozenset[str] | None = None
) -> tuple[tuple[Spec, ...], Callable[[dict[str, Any]], dict[str, Any]]]:
    """The per-GPU rows a read of ``facts`` asks, in NVML call order: identity first (the UUID is the
    cheap call that finds a GPU lost since the last read), then each group as FactGroup declares
    them, whatever the set (DETAILS is read across GPUs, in read_gpus); given ``only``, of all
    these the UUID and the fields the keys in ``only`` fill; and how their readings become the
    GPU's fields."""
    heads = None if only is None else {_head(key) for key in only} | {"uuid"}
    rows = tuple(
        row
        for group in (None, *(group for group in FactGroup if group in facts))
        for row in group_readings(group)
        if heads is None or _head(row.key) in heads
    )
    return rows, builder(Gpu, tuple(row.key for row in rows))


def _head(key: str) -> str:
    """The Gpu field a row's key fills: one of a struct's readings (``pcie.gen_max``) is read with
    the rest of them, which build the struct together."""
    return key.split(".", 1)[0].split("[", 1)[0]


@functools.cache
def not_read_fields() -> dict[str, Any]:
    """The blank fields of a read GPU, built once: every read copies them (a watch or exporter reads often)."""
    return blank_fields(NOT_READ)
