"""Model <-> JSON data: missing readings keep their reason, and loading is strict for every type.

A typo in a snapshot must fail loudly with the path to it, never describe another machine.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudiag.model import (
    ComputeMode,
    GpuProcess,
    HostProcess,
    HostState,
    Machine,
    Memory,
    NvmlStatus,
    ProcessKind,
    Reading,
    Reason,
    TorchBuild,
)
from gpudiag.replay import fixtures
from gpudiag.serialize import SchemaError, from_data, to_data


def test_missing_readings_serialise_with_their_reason() -> None:
    assert to_data(Reading.missing(Reason.NO_PERMISSION, "why")) == {"unavailable": "no_permission", "detail": "why"}
    assert to_data(Reading.missing(Reason.GPU_LOST)) == {"unavailable": "gpu_lost"}  # no empty detail
    assert to_data(Reading.of(0)) == 0
    memory = Memory(10, 4, 6)
    assert to_data(memory)["reserved_bytes"] == {"unavailable": "not_supported"}
    assert from_data(Memory, to_data(memory)) == memory


def test_enums_tuples_and_nested_objects_become_plain_json() -> None:
    proc = GpuProcess(
        pid=7,
        kind=ProcessKind.COMPUTE_GRAPHICS,
        used_memory_bytes=Reading.of(1024),
        host=HostProcess(HostState.VANISHED, *(Reading.missing(Reason.NOT_FOUND, "process exited"),) * 3),
    )
    data = to_data(proc)
    assert data["kind"] == "C+G" and data["host"]["state"] == "vanished"
    assert data["gpu_instance_id"] is None
    assert json.loads(json.dumps(data)) == data  # nothing that JSON cannot carry
    assert to_data({"a": (1, ComputeMode.PROHIBITED)}) == {"a": [1, "Prohibited"]}


@pytest.mark.parametrize("name", fixtures.example_names())
def test_every_example_round_trips_exactly(name: str) -> None:
    machine = fixtures.load(name)[0]
    data = json.loads(json.dumps(to_data(machine)))
    assert from_data(Machine, data) == machine


@pytest.mark.parametrize(
    ("tp", "good", "expected"),
    [
        (int, 3, 3),
        (float, 3, 3.0),  # JSON has one number type; an integral float is written as an int
        (float, 2.5, 2.5),
        (bool, False, False),
        (str, "x", "x"),
        (NvmlStatus, "driver_library_mismatch", NvmlStatus.VERSION_MISMATCH),
        (tuple[int, ...], [], ()),
        (tuple[int, int], [8, 0], (8, 0)),
        (Reading[float], 3, Reading.of(3.0)),
        (Reading[int], {"unavailable": "gpu_lost", "detail": "XID 79"}, Reading.missing(Reason.GPU_LOST, "XID 79")),
        (Reading[tuple[str, ...]], ["a"], Reading.of(("a",))),
    ],
)
def test_strict_loading_accepts_exactly_the_right_shapes(tp: Any, good: Any, expected: Any) -> None:
    assert from_data(tp, good) == expected


@pytest.mark.parametrize(
    ("tp", "bad", "message"),
    [
        (int, 1.5, "expected an integer, got 1.5"),
        (int, True, "expected an integer, got True"),  # bool is an int subclass in Python, not in JSON
        (int, "3", "expected an integer"),
        (float, True, "expected a number, got True"),
        (float, "1.0", "expected a number"),
        (bool, 1, "expected true/false, got 1"),
        (bool, "true", "expected true/false"),
        (str, 3, "expected a string, got 3"),
        (str, None, "expected a string, got None"),
        (NvmlStatus, "broken", "'broken' is not one of: ok, library_not_found"),
        (tuple[int, ...], "x", "expected a list, got str"),
        (tuple[int, ...], [1, "2"], "$[1]: expected an integer"),
        (tuple[int, int], [1], "expected 2 items, got 1"),
        (Reading[int], None, 'null is not a reading; write {"unavailable": reason}'),
        (Reading[int], {"unavailable": "not_supported", "why": 1}, "unknown keys ['why']"),
        (Reading[int], {"unavailable": "nope"}, "unknown reason 'nope'"),
        (Reading[int], {"unavailable": "not_supported", "detail": 5}, "$.detail: expected a string"),
        (Reading[int], "12", "expected an integer"),
        (Memory, [], "expected an object, got list"),
        (Memory, {"total_bytes": 1, "used_bytes": 0}, "missing key 'free_bytes'"),
        (Memory, {"total_bytes": 1, "used_bytes": 0, "free_bytes": 1, "spare": 0}, "unknown keys ['spare']"),
    ],
)
def test_strict_loading_rejects_wrong_shapes_naming_the_path(tp: Any, bad: Any, message: str) -> None:
    with pytest.raises(SchemaError) as err:
        from_data(tp, bad)
    assert message in str(err.value)
    assert str(err.value).startswith("$")


def test_optional_fields_take_null_but_not_a_wrong_type() -> None:
    build = {"version": "2.13.0+cpu", "cuda": None, "hip": None, "location": "/x"}
    assert from_data(TorchBuild, build).cuda is None
    with pytest.raises(SchemaError, match=r"\$\.cuda: expected a string, got 12\.4"):
        from_data(TorchBuild, {**build, "cuda": 12.4})
    process = {
        "pid": 1,
        "kind": "C",
        "used_memory_bytes": 0,
        "host": to_data(HostProcess(HostState.FOUND, *(Reading.of("x"),) * 3)),
    }
    assert from_data(GpuProcess, process).gpu_instance_id is None  # a defaulted field may be left out
    with pytest.raises(SchemaError, match=r"\$\.gpu_instance_id: expected an integer"):
        from_data(GpuProcess, {**process, "gpu_instance_id": "1"})


def test_errors_deep_in_a_machine_name_the_full_path() -> None:
    data = to_data(fixtures.load("a100-mig")[0])
    data["gpus"][0]["mig_devices"][2]["memory"]["used_bytes"] = -0.5
    with pytest.raises(SchemaError, match=r"^\$\.gpus\[0\]\.mig_devices\[2\]\.memory\.used_bytes: expected an integer"):
        from_data(Machine, data)


readings: st.SearchStrategy[Reading[int]] = st.one_of(
    st.integers().map(Reading.of),
    st.builds(Reading.missing, st.sampled_from(list(Reason)), st.text()),
)


@given(readings)
def test_any_int_reading_round_trips(reading: Reading[int]) -> None:
    assert from_data(Reading[int], json.loads(json.dumps(to_data(reading)))) == reading
