"""Readings and the machine model's small helpers.

A Reading holds a value *or* the reason it is missing; these tests pin the invariants that
stop a missing value from being added, compared or tested for truth by accident.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudiag.model import Machine, Reading, Reason, cuda_version_text
from gpudiag.replay import fixtures


def test_a_reading_holds_exactly_one_of_value_or_reason() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Reading()
    with pytest.raises(ValueError, match="exactly one"):
        Reading(value=1, reason=Reason.NOT_SUPPORTED)


def test_a_missing_reading_cannot_be_used_as_a_number_or_truth_value() -> None:
    missing: Reading[int] = Reading.missing(Reason.NOT_SUPPORTED)
    with pytest.raises(TypeError, match="truthiness"):
        bool(missing)
    with pytest.raises(TypeError, match="truthiness"):
        bool(Reading.of(True))  # not even a boolean value: `if reading:` is always a bug
    with pytest.raises(TypeError):
        _ = missing + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = missing < 3  # type: ignore[operator]


def test_ok_get_and_map() -> None:
    missing: Reading[int] = Reading.missing(Reason.NO_PERMISSION, "denied")
    assert (missing.ok, Reading.of(0).ok) == (False, True)
    assert missing.get(None) is None
    assert Reading.of(0).get(5) == 0  # a zero is a value, not a missing reading
    assert Reading.of(21).map(lambda v: v * 2) == Reading.of(42)
    mapped = missing.map(lambda v: v * 2)
    assert (mapped.reason, mapped.detail) == (Reason.NO_PERMISSION, "denied")  # the why survives


def test_constructors_agree() -> None:
    assert Reading.missing(Reason.GPU_LOST, "x") == Reading(reason=Reason.GPU_LOST, detail="x")
    assert Reading.of("a") == Reading(value="a")


def test_a_missing_reading_passes_its_reason_on_and_a_value_cannot_pose_as_one() -> None:
    lost: Reading[int] = Reading.missing(Reason.GPU_LOST, "x")
    passed: Reading[str] = Reading.missing_like(lost)
    assert (passed.reason, passed.detail) == (Reason.GPU_LOST, "x")
    with pytest.raises(ValueError, match="missing reading"):
        Reading.missing_like(Reading.of(1))


def test_a_reading_added_after_a_snapshot_replays_as_not_recorded_never_not_supported() -> None:
    old = fixtures.load("a100-ecc-errors")[0].gpus[0]  # taken before gpudiag read clocks and energy
    assert old.clock_sm_mhz.reason is Reason.NOT_RECORDED and old.energy_mj.reason is Reason.NOT_RECORDED
    assert Reason.NOT_RECORDED.label == "not recorded in this snapshot"


@given(st.integers() | st.text() | st.booleans() | st.floats(allow_nan=False))
def test_any_value_is_held_and_given_back(value: object) -> None:
    reading = Reading.of(value)
    assert reading.ok and reading.value == value and reading.get(object()) == value


def test_readings_are_frozen() -> None:
    reading = Reading.of(1)
    with pytest.raises(AttributeError):
        reading.value = 2  # type: ignore[misc]


def test_every_reason_has_a_distinct_label_and_a_stable_value() -> None:
    labels = [r.label for r in Reason]
    assert all(labels) and len(set(labels)) == len(labels)
    assert Reason("function_not_found").label == "not in this driver"
    assert [r.value for r in Reason] == [
        "not_supported",
        "no_permission",
        "gpu_lost",
        "function_not_found",
        "not_found",
        "unavailable",
        "unknown_error",
        "not_read",
        "not_recorded",
    ]


@pytest.mark.parametrize(("encoded", "text"), [(12080, "12.8"), (11040, "11.4"), (10010, "10.1"), (13000, "13.0")])
def test_cuda_version_text(encoded: int, text: str) -> None:
    assert cuda_version_text(encoded) == text


@given(st.integers(1, 99), st.integers(0, 9))
def test_cuda_version_text_inverts_nvml_s_encoding(major: int, minor: int) -> None:
    assert cuda_version_text(major * 1000 + minor * 10) == f"{major}.{minor}"


def test_machine_helpers() -> None:
    m: Machine = fixtures.load("gpu-lost")[0]
    assert m.gpu(2).label == "GPU 2"
    with pytest.raises(KeyError):
        m.gpu(4)
    assert m.nvml.cuda_driver_version_text.value == "12.2"
    v100 = fixtures.load("v100x4-tutorial")[0]
    assert v100.env_map == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def test_a_machine_that_never_asked_torch_says_so() -> None:
    runtime = fixtures.load("zero-gpus")[0].torch_runtime
    assert runtime.reason is Reason.UNAVAILABLE and "not probed" in runtime.detail


def test_missing_driver_versions_render_as_missing_not_as_a_number() -> None:
    info = fixtures.load("no-driver")[0].nvml
    assert info.cuda_driver_version_text.reason is Reason.UNAVAILABLE
