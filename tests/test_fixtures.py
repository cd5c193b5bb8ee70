"""Machine files: strict loading, defaults, and replays that reproduce themselves."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpudiag.model import Machine
from gpudiag.probe.collect import collect
from gpudiag.testing import fixtures
from gpudiag.testing.fixtures import FixtureError, example_names, machine_from_data


def raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((fixtures.EXAMPLES_DIR / f"{name}.json").read_text())
    return data


def normalised(m: Machine) -> Machine:
    return dataclasses.replace(m, source="", collected_at=0.0)


@pytest.mark.parametrize("name", example_names())
def test_every_example_loads_and_has_a_description(name: str) -> None:
    machine, description = fixtures.load(name)
    assert description, f"{name} needs a description of its condition"
    assert machine.schema == "gpudiag.machine/1"


@pytest.mark.parametrize("name", example_names())
def test_replaying_a_replay_gives_the_same_machine(name: str, tmp_path: Path) -> None:
    first = collect(name)
    path = tmp_path / "again.json"
    path.write_text(fixtures.dump(first))
    second = collect(str(path))
    assert normalised(second) == normalised(first)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1), "$: unknown keys ['extra']"),
        (lambda d: d["gpus"][0].update(temprature_c=30), "$.gpus[0]: unknown keys ['temprature_c']"),
        (lambda d: d["gpus"][0].update(temperature_c="hot"), "$.gpus[0].temperature_c: expected an integer"),
        (lambda d: d["gpus"][0].update(temperature_c=True), "expected an integer, got True"),
        (lambda d: d["gpus"][0].update(fan_percent={"unavailable": "broken"}), "unknown reason 'broken'"),
        (lambda d: d["gpus"][0].update(fan_percent=None), "null is not a reading"),
        (lambda d: d["gpus"][0].update(compute_mode="Shared"), "'Shared' is not one of"),
        (lambda d: d["gpus"][0].update(index=5), "index must equal its position"),
        (lambda d: d.update(schema="gpudiag.machine/9"), "this gpudiag reads 'gpudiag.machine/1'"),
        (lambda d: d["nvml"].pop("driver_version"), "$.nvml: missing key 'driver_version'"),
        (lambda d: d["gpus"][0].update(compute_capability=[9]), "expected 2 items"),
    ],
)
def test_loader_rejects_bad_data_naming_the_path(mutate: Any, message: str) -> None:
    data = copy.deepcopy(raw("geforce-no-ecc-power"))
    mutate(data)
    with pytest.raises(FixtureError) as err:
        machine_from_data(data, "test")
    assert message in str(err.value)


def test_gpu_defaults_merge_under_each_gpu() -> None:
    data = raw("h100x8-healthy")
    m = machine_from_data(data)
    assert all(g.name.value == "NVIDIA H100 80GB HBM3" for g in m.gpus)
    assert [g.numa_node.value for g in m.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert m.gpus[5].pcie.width_max.value == 16  # nested default kept where the GPU overrides nothing


def test_a_value_replaces_a_defaulted_missing_marker() -> None:
    m = machine_from_data(raw("gpu-lost"))
    assert m.gpus[0].utilization.value is not None  # defaults say not_supported; the GPU says a value


def test_failed_gpu_shorthand_expands_to_a_full_row() -> None:
    m = machine_from_data(raw("gpu-lost"))
    lost = m.gpus[2]
    assert lost.state.value == "lost"
    assert lost.pcie.gen_current.reason is not None


@pytest.mark.parametrize(
    ("spec", "message"),
    [("nope", "no example machine named 'nope'"), ("/no/such/file.json", "replay file not found")],
)
def test_unknown_replays_are_explained(spec: str, message: str) -> None:
    with pytest.raises(FixtureError) as err:
        fixtures.load(spec)
    assert message in str(err.value)


def test_invalid_json_is_explained(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FixtureError) as err:
        fixtures.load(str(bad))
    assert "is not valid JSON" in str(err.value)
