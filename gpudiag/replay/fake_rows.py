"""Which declared rows answer each NVML call and field id of the fake, indexed on first use, and how
their encoded values make NVML's answer (a struct, a list of items, a plain value)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import msgspec
import pynvml

from gpudiag.model import Gpu, Reading
from gpudiag.readings import GPU_READINGS, Spec, field_key, reading_at

# The parts of an answer no row reads: the codec utilizations' sampling period (µs), as captured.
_SAMPLING_PERIOD_US = 100000
_PADDING: dict[str, tuple[Any, ...]] = {
    name: (None, _SAMPLING_PERIOD_US)
    for name in (
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetJpgUtilization",
        "nvmlDeviceGetOfaUtilization",
    )
}
# Answers that are pynvml structs rather than plain objects.
STRUCTS: dict[str, Callable[[], Any]] = {"nvmlDeviceGetUtilizationRates": pynvml.c_nvmlUtilization_t}
# Field ids whose value is what a call answers: the call, the field's nvmlValueType_t, the call's
# arguments (nvml.h: the ECC totals are the counters nvmlDeviceGetTotalEccErrors answers, by error
# type, then counter type).
FIELDS_OF_CALLS: dict[int, tuple[str, int, tuple[Any, ...]]] = {
    pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: ("nvmlDeviceGetTotalEnergyConsumption", 3, ()),
    pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: ("nvmlDeviceGetPcieReplayCounter", 1, ()),
    **{
        field: (
            "nvmlDeviceGetTotalEccErrors",
            3,
            (getattr(pynvml, f"NVML_MEMORY_ERROR_TYPE_{kind}"), getattr(pynvml, f"NVML_{counter}_ECC")),
        )
        for field, kind, counter in (
            (pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, "CORRECTED", "VOLATILE"),
            (pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, "UNCORRECTED", "VOLATILE"),
            (pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL, "CORRECTED", "AGGREGATE"),
            (pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL, "UNCORRECTED", "AGGREGATE"),
        )
    },
}


def answer_of(name: str, value: Any) -> Any:
    """An encoded value as nvidia-ml-py returns it: a dict is a struct's attributes."""
    if not isinstance(value, dict):
        return value
    struct = STRUCTS.get(name)
    if struct is None:
        return SimpleNamespace(**value)
    out = struct()
    for attr, item in value.items():
        setattr(out, attr, item)
    return out


class Answer(msgspec.Struct, frozen=True):
    """The rows that answer a call with given arguments, and how their values make NVML's answer."""

    specs: tuple[Spec, ...]
    reads: tuple[Callable[[Gpu], Reading[Any]], ...]  # each row's reading of a GPU
    encodes: tuple[Callable[[Any], Any], ...]  # its value as NVML answers it
    assemble: Callable[[list[Any]], Any]  # the rows' encoded values -> the answer
    simple: bool  # one row, its value the whole answer


class Call(msgspec.Struct, frozen=True):
    """The rows that answer one NVML call (or field id), by the arguments they take."""

    whole_gpu: bool  # a MIG device's handle does not answer it
    by_args: dict[tuple[Any, ...], Answer]
    # By arguments answered by one row with a plain value: its reading of a GPU and its encoder.
    simple: dict[tuple[Any, ...], tuple[Callable[[Gpu], Reading[Any]], Callable[[Any], Any]]]


def _reader(key: str) -> Callable[[Gpu], Reading[Any]]:
    if key.startswith("details.") or "[" in key:  # through a reading that may be missing
        return lambda gpu: reading_at(gpu, key)
    return operator.attrgetter(key)  # a reading of the GPU, or of one of its structs


def _assembler(name: Any, specs: list[Spec]) -> Callable[[list[Any]], Any]:
    if len(specs) == 1 and specs[0].pick is None:
        return lambda values: answer_of(name, values[0])
    picks = [spec.pick for spec in specs]
    places = [pick for pick in picks if isinstance(pick, int)]
    if len(places) == len(picks):  # items of a list
        padding = _PADDING.get(name, ())
        template = [*padding, *([None] * (max(places) + 1 - len(padding)))]

        def items(values: list[Any]) -> list[Any]:
            answer = list(template)
            for place, value in zip(places, values, strict=True):
                answer[place] = value
            return answer

        return items
    return lambda values: answer_of(name, {str(pick): value for pick, value in zip(picks, values, strict=True)})


def _index(rows: tuple[Spec, ...], key: Callable[[Spec], list[Any]]) -> dict[Any, Call]:
    found: dict[Any, list[Spec]] = {}
    for row in rows:
        if not row.custom:
            for name in key(row):
                found.setdefault(name, []).append(row)
    out = {}
    for name, specs in found.items():
        by_args: dict[tuple[Any, ...], list[Spec]] = {}
        for spec in specs:
            by_args.setdefault(tuple(getattr(pynvml, a) if isinstance(a, str) else a for a in spec.args), []).append(
                spec
            )
        answers = {
            args: Answer(
                tuple(same),
                tuple(_reader(spec.key) for spec in same),
                tuple(spec.codec.encode for spec in same),
                _assembler(name, same),
                len(same) == 1 and same[0].pick is None and name not in STRUCTS,
            )
            for args, same in by_args.items()
        }
        simple = {args: (answer.reads[0], answer.encodes[0]) for args, answer in answers.items() if answer.simple}
        out[name] = Call(any(spec.whole_gpu for spec in specs), answers, simple)
    return out


def _calls_of(row: Spec) -> list[Any]:
    if row.field:  # a field that is what a call answers (the energy counter): that call too, for peers
        same = FIELDS_OF_CALLS.get(row.field)
        return [same[0]] if same is not None and not row.scope else []
    return [name for name in (row.call, row.fallback) if name]


def _fields_of(row: Spec) -> list[Any]:
    return [field_key(row)] if row.field else []


# The calls the per-GPU rows (gpudiag.readings.GPU_READINGS) declare, answered from them (indexed on
# the first call: a replay's start-up pays for the names only); the rows of the details
# (gpudiag.details.DETAIL_READINGS) are loaded on the first call that only they answer.
ROW_CALLS = frozenset(name for row in GPU_READINGS if not row.custom for name in _calls_of(row))


@functools.cache
def gpu_calls() -> dict[Any, Call]:
    return _index(GPU_READINGS, _calls_of)


@functools.cache
def gpu_fields() -> dict[Any, Call]:
    return _index(GPU_READINGS, _fields_of)


@functools.cache
def detail_rows_by_call() -> dict[Any, Call]:
    from gpudiag.details import DETAIL_READINGS

    return _index(DETAIL_READINGS, _calls_of)


@functools.cache
def detail_rows_by_field() -> dict[Any, Call]:
    from gpudiag.details import DETAIL_READINGS

    return _index(DETAIL_READINGS, _fields_of)
