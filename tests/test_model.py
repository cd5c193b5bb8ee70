"""Readings and their JSON form."""

from __future__ import annotations

import pytest

from gpudiag.model import Memory, Reading, Reason, cuda_version_text
from gpudiag.serialize import SchemaError, from_data, to_data


def test_a_reading_holds_exactly_one_of_value_or_reason() -> None:
    with pytest.raises(ValueError):
        Reading()
    with pytest.raises(ValueError):
        Reading(value=1, reason=Reason.NOT_SUPPORTED)


def test_a_missing_reading_cannot_be_used_as_a_number_or_truth_value() -> None:
    missing: Reading[int] = Reading.missing(Reason.NOT_SUPPORTED)
    with pytest.raises(TypeError):
        bool(missing)
    with pytest.raises(TypeError):
        _ = missing + 1  # type: ignore[operator]
    assert missing.get(None) is None
    assert missing.map(lambda v: v * 2).reason is Reason.NOT_SUPPORTED
    assert Reading.of(21).map(lambda v: v * 2).value == 42
    assert Reading.of(0).get(5) == 0  # a zero is a value, not a missing reading


def test_missing_readings_serialise_with_their_reason() -> None:
    assert to_data(Reading.missing(Reason.NO_PERMISSION, "why")) == {"unavailable": "no_permission", "detail": "why"}
    assert to_data(Reading.missing(Reason.GPU_LOST)) == {"unavailable": "gpu_lost"}
    memory = Memory(10, 4, 6)
    assert to_data(memory)["reserved_bytes"] == {"unavailable": "not_supported"}
    assert from_data(Memory, to_data(memory)) == memory


def test_strict_loading_of_primitive_types() -> None:
    assert from_data(Reading[float], 3) == Reading.of(3.0)
    for tp, bad in ((int, 1.5), (bool, 1), (str, 3), (float, True), (tuple[int, ...], "x")):
        with pytest.raises(SchemaError):
            from_data(tp, bad)
    with pytest.raises(SchemaError, match="unknown keys"):
        from_data(Reading[int], {"unavailable": "not_supported", "why": 1})


def test_cuda_version_text() -> None:
    assert cuda_version_text(12080) == "12.8"
    assert cuda_version_text(11040) == "11.4"
    assert cuda_version_text(10010) == "10.1"
