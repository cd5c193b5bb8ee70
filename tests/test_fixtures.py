"""Machine files: strict loading, defaults, and replays that show exactly what the file says.

A fixture that disagrees with its own replay would make every golden test describe a
machine nobody wrote down, so the replay is checked against the file, field by field.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.model import ALL_GROUPS, GpuState, Machine, Reason
from gpudiag.replay import fixtures
from gpudiag.replay.fixtures import FixtureError, example_names, machine_from_data
from gpudiag.serialize import to_data
from gpudiag.sources import collect
from tests.conftest import every_example

# The whole-machine examples the probe layer owns; the memory identity below is checked on these.
PROBE_EXAMPLES = (
    "v100x4-tutorial",
    "gtx1050-desktop",
    "a100-mig",
    "a100-mig-no-instances",
    "geforce-no-ecc-power",
    "gpu-lost",
    "no-driver",
    "no-nvml-library",
    "driver-mismatch",
    "no-permission",
    "zero-gpus",
    "container-pids",
    "old-driver-v1-processes",
    "hidepid-processes",
    "a100-ecc-errors",
)

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIG_UUID = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BUS_ID = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")  # NVML's busId: domain:bus:device.function


def raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(fixtures.EXAMPLES_DIR, f"{name}.json").read_text())
    return data


def normalised(m: Machine) -> Machine:
    return msgspec.structs.replace(m, source="", collected_at=0.0)


def comparable(m: Machine) -> dict[str, Any]:
    """The machine as data, minus what a replay cannot reproduce or orders differently.

    NVML errors carry no text, so a "not supported" reading's annotation in a file is not
    replayed; NVML lists compute processes before graphics ones; ``functions_missing`` is
    compared on its own (a file lists what the driver lacks, a replay what it tripped over).
    """
    data: dict[str, Any] = to_data(normalised(m))

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("unavailable") == Reason.NOT_SUPPORTED.value:
                return {"unavailable": Reason.NOT_SUPPORTED.value}
            if node.get("unavailable") in (Reason.NOT_RECORDED.value, Reason.NOT_READ.value):
                return {"unavailable": "details absent from the file"}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    data = walk(data)
    for gpu in data["gpus"]:
        if isinstance(gpu["processes"], list):
            gpu["processes"].sort(key=lambda p: (p["pid"], p["kind"]))
    data["nvml"]["functions_missing"] = []
    return data


def test_the_probe_examples_are_all_shipped() -> None:
    assert set(PROBE_EXAMPLES) <= set(example_names())


@pytest.mark.parametrize("name", example_names())
def test_every_example_loads_and_has_a_description(name: str) -> None:
    machine, description = fixtures.load(name)
    assert len(description) > 40, f"{name} needs a description of its condition and its sources"
    assert machine.schema == "gpudiag.machine/1"


@pytest.mark.parametrize("name", every_example())
def test_replaying_a_replay_gives_the_same_machine(name: str, tmp_path: Path) -> None:
    first = collect(name)
    path = tmp_path / "again.json"
    path.write_text(fixtures.dump(first))
    second = collect(str(path))
    assert normalised(second) == normalised(first)


@pytest.mark.parametrize("name", example_names())
def test_a_replay_shows_what_the_file_says(name: str) -> None:
    written = fixtures.load(name)[0]
    replayed = collect(name, facts=ALL_GROUPS)
    assert comparable(replayed) == comparable(written)
    tripped = set(replayed.nvml.functions_missing)
    assert tripped <= set(written.nvml.functions_missing), tripped - set(written.nvml.functions_missing)


@pytest.mark.parametrize("name", example_names())
def test_identities_look_like_nvml_s(name: str) -> None:
    machine = fixtures.load(name)[0]
    uuids = []
    for gpu in machine.gpus:
        if gpu.state is not GpuState.OK:
            continue
        assert gpu.uuid.value is not None and GPU_UUID.match(gpu.uuid.value), gpu.uuid
        assert gpu.pci_bus_id.value is not None and BUS_ID.match(gpu.pci_bus_id.value), gpu.pci_bus_id
        uuids.append(gpu.uuid.value)
        for mig in gpu.mig_devices:
            assert mig.uuid.value is not None and MIG_UUID.match(mig.uuid.value), mig.uuid
            uuids.append(mig.uuid.value)
    assert len(uuids) == len(set(uuids)), "UUIDs must be unique within a machine"
    minors = [g.minor_number.value for g in machine.gpus if g.minor_number.value is not None]
    assert len(minors) == len(set(minors))


@pytest.mark.parametrize("name", example_names())
def test_memory_figures_add_up_as_nvml_reports_them(name: str) -> None:
    """NVML v2: total = reserved + used + free; v1 (no reserved figure): total = used + free.

    Every shipped example, not only the probe layer's: 26 GPUs once had used + free = total
    beside a reserved figure, so an idle H100 showed 541 MiB used where the real one shows 0.
    """
    machine = fixtures.load(name)[0]
    for gpu in machine.gpus:
        memory = gpu.memory.value
        if memory is None:
            continue
        reserved = memory.reserved_bytes.get(0)
        assert memory.used_bytes + memory.free_bytes + reserved == memory.total_bytes, gpu.label
        processes = gpu.processes.get(())
        assert sum(p.used_memory_bytes.get(0) for p in processes) <= memory.used_bytes, gpu.label
        for mig in gpu.mig_devices:
            assert mig.memory.value is not None
            assert mig.memory.value.used_bytes + mig.memory.value.free_bytes == mig.memory.value.total_bytes


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1), "$: unknown keys ['extra']"),
        (lambda d: d["gpus"][0].update(temprature_c=30), "$.gpus[0]: unknown keys ['temprature_c']"),
        (lambda d: d["gpus"][0].update(temperature_c="hot"), "$.gpus[0].temperature_c: expected an integer"),
        (lambda d: d["gpus"][0].update(temperature_c=True), "expected an integer, got True"),
        (lambda d: d["gpus"][0].update(power_limit_w="80W"), "$.gpus[0].power_limit_w: expected a number"),
        (lambda d: d["gpus"][0].update(persistence_mode=1), "$.gpus[0].persistence_mode: expected true/false"),
        (lambda d: d["gpus"][0].update(fan_percent={"unavailable": "broken"}), "unknown reason 'broken'"),
        (lambda d: d["gpus"][0].update(fan_percent={"unavailable": "not_supported", "why": "x"}), "unknown keys"),
        (lambda d: d["gpus"][0].update(fan_percent=None), "null is not a reading"),
        (lambda d: d["gpus"][0].update(compute_mode="Shared"), "'Shared' is not one of"),
        (lambda d: d["gpus"][0]["memory"].pop("free_bytes"), "$.gpus[0].memory: missing key 'free_bytes'"),
        (
            lambda d: d["gpus"][0]["memory"].update(used_bytes=d["gpus"][0]["memory"]["used_bytes"] + (1 << 20)),
            "$.gpus[0].memory: used (",
        ),
        (lambda d: d["gpus"][0]["processes"][0].update(kind="X"), "$.gpus[0].processes[0].kind: 'X' is not one"),
        (lambda d: d["gpus"].append({**copy.deepcopy(d["gpus"][0]), "index": 0}), "index: 0 is also $.gpus[0]"),
        (lambda d: d["gpus"][0].update(index=-1), "$.gpus[0].index: expected a GPU index (0..4095)"),
        (lambda d: d["gpus"].insert(0, "GPU 0"), "$.gpus[0]: expected an object"),
        (lambda d: d.update(gpus={"0": {}}), "$.gpus: expected a list"),
        (lambda d: d.pop("gpus"), "$: missing key 'gpus'"),
        (lambda d: d.update(gpu_defaults=[]), "$.gpu_defaults: expected an object"),
        (lambda d: d.update(schema="gpudiag.machine/9"), "this gpudiag reads 'gpudiag.machine/1'"),
        (lambda d: d.pop("schema"), "schema is None"),
        (lambda d: d["nvml"].pop("driver_version"), "$.nvml: missing key 'driver_version'"),
        (lambda d: d["nvml"].update(status="fine"), "$.nvml.status: 'fine' is not one of"),
        (lambda d: d["gpus"][0].update(compute_capability=[9]), "expected 2 items"),
        (lambda d: d.update(env=[["CUDA_VISIBLE_DEVICES"]]), "$.env[0]: expected 2 items"),
    ],
)
def test_loader_rejects_bad_data_naming_the_path(mutate: Any, message: str) -> None:
    data = copy.deepcopy(raw("geforce-no-ecc-power"))
    mutate(data)
    with pytest.raises(FixtureError) as err:
        machine_from_data(data, "test")
    assert str(err.value).startswith("test: ")
    assert message in str(err.value)


def test_loader_rejects_used_plus_free_equal_to_total_beside_reserved_memory() -> None:
    """The v1 figures (used includes reserved) written where the v2 struct belongs."""
    data = copy.deepcopy(raw("geforce-no-ecc-power"))
    memory = data["gpus"][0]["memory"]
    assert memory["reserved_bytes"] > 0
    memory["used_bytes"] = memory["total_bytes"] - memory["free_bytes"]
    with pytest.raises(FixtureError, match=r"\$\.gpus\[0\]\.memory: .* != total .*used excludes the reserved"):
        machine_from_data(data, "test")


def test_loader_rejects_mig_memory_that_does_not_add_up() -> None:
    data = copy.deepcopy(raw("a100-mig"))
    data["gpus"][0]["mig_devices"][0]["memory"]["free_bytes"] -= 1
    with pytest.raises(FixtureError, match=r"mig_devices\[0\]\.memory"):
        machine_from_data(data, "test")


def test_loader_rejects_a_document_that_is_not_an_object() -> None:
    with pytest.raises(FixtureError, match="expected a JSON object"):
        machine_from_data([1, 2], "test")


def test_failed_gpu_shorthand_with_an_unknown_state_is_rejected() -> None:
    data = copy.deepcopy(raw("gpu-lost"))
    data["gpus"][2]["state"] = "melted"
    with pytest.raises(FixtureError, match=r"\$\.gpus\[2\]\.state: unknown state 'melted'"):
        machine_from_data(data, "test")


def test_gpu_defaults_merge_under_each_gpu() -> None:
    data = raw("h100x8-healthy")
    m = machine_from_data(data)
    assert all(g.name.value == "NVIDIA H100 80GB HBM3" for g in m.gpus)
    assert [g.temperature_c.value for g in m.gpus] == [31, 34, 37, 33, 36, 32, 35, 31]  # each GPU's own
    assert all(g.numa_node.reason is Reason.NOT_SUPPORTED for g in m.gpus)  # from the defaults
    assert m.gpus[5].pcie.width_max.value == 16  # nested default kept where the GPU overrides nothing


def test_a_nested_override_keeps_its_siblings_from_the_defaults() -> None:
    data = copy.deepcopy(raw("h100x8-healthy"))
    data["gpus"][3]["pcie"] = {"width_current": 8}
    m = machine_from_data(data)
    assert (m.gpus[3].pcie.width_current.value, m.gpus[3].pcie.width_max.value) == (8, 16)
    assert m.gpus[2].pcie.width_current.value == 16  # the other GPUs keep the default


def test_a_value_replaces_a_defaulted_missing_marker() -> None:
    m = machine_from_data(raw("gpu-lost"))
    assert m.gpus[0].utilization.value is not None  # defaults say not_supported; the GPU says a value


def test_a_missing_marker_replaces_a_defaulted_value_whole() -> None:
    data = copy.deepcopy(raw("h100x8-healthy"))
    data["gpus"][1]["memory"] = {"unavailable": "no_permission", "detail": "denied"}
    data["gpus"][1]["ecc_errors"] = {"volatile_corrected": {"unavailable": "not_supported"}}
    m = machine_from_data(data)
    assert m.gpus[1].memory.reason is Reason.NO_PERMISSION and m.gpus[1].memory.detail == "denied"
    assert m.gpus[1].ecc_errors.volatile_corrected.reason is Reason.NOT_SUPPORTED
    assert m.gpus[1].ecc_errors.volatile_uncorrected.value == 0  # its siblings still come from the defaults


def test_failed_gpu_shorthand_expands_to_a_full_row() -> None:
    m = machine_from_data(raw("gpu-lost"))
    lost = m.gpus[2]
    assert lost.state is GpuState.LOST
    assert "XID 79" in lost.state_detail
    assert lost.pcie.gen_current.reason is Reason.GPU_LOST
    assert lost.processes.reason is Reason.GPU_LOST


def test_dump_keeps_the_description_and_loads_back(tmp_path: Path) -> None:
    machine, _ = fixtures.load("a100-mig")
    path = tmp_path / "node17.json"
    path.write_text(fixtures.dump(machine, "node 17 after the reboot"))
    again, description = fixtures.load(str(path))
    assert description == "node 17 after the reboot"
    assert again == machine


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "no example machine named 'nope'"),
        ("/no/such/file.json", "replay file not found"),
        # A name NAME_MAX allows whose file name (NAME.json) is longer: was an internal error (ENAMETOOLONG).
        ("x" * 252, "no example machine named 'xxx"),
    ],
    ids=["unknown-name", "missing-file", "name-too-long-with-.json"],
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


def test_a_replay_files_path_is_named_as_given_less_empty_and_dot_parts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FixtureError) as err:
        fixtures.load(f"{tmp_path}//./bad.json")
    assert str(err.value).startswith(f"{bad} is not valid JSON")


# --- reading a replay file: never blocking, never without bound, each key once ---------------------


def test_a_kernel_file_empty_to_stat_is_refused_unread() -> None:
    """/proc files are regular and empty to ``stat``: read, /proc/kmsg blocks for ever and consumes the
    kernel's messages. This one reads harmlessly, but it is refused the same way, before any read."""
    with pytest.raises(FixtureError) as err:
        fixtures.load("/proc/self/status")
    assert str(err.value) == (
        "replay file /proc/self/status has no size (empty, or a kernel file in /proc): not read:"
        " give a snapshot file (gpudiag snapshot > FILE) or an example name"
    )


@pytest.mark.slow
@pytest.mark.skipif(not os.access("/proc/kmsg", os.R_OK), reason="/proc/kmsg is root's to read")
def test_replaying_proc_kmsg_neither_blocks_nor_reads_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "--replay", "/proc/kmsg", "list"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == ExitCode.USAGE and "/proc/kmsg has no size" in done.stderr


def test_a_snapshots_recording_is_read_as_a_replay_file(tmp_path: Path) -> None:
    """``FILE.recording.jsonl`` beside a replayed snapshot: a link to /proc/kmsg there blocked for
    ever; a kernel file is refused unread as the snapshot itself would be."""
    from gpudiag.replay.recording import Recording, path_for

    snapshot = tmp_path / "leak.json"
    snapshot.write_text("{}")
    (tmp_path / "leak.recording.jsonl").symlink_to("/proc/self/status")
    found = path_for(str(snapshot))
    assert found is not None
    with pytest.raises(FixtureError, match="has no size"):
        Recording(found)


def test_a_file_larger_than_any_snapshot_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(fixtures.MAX_BYTES + 1)  # sparse: no disk, and reading it would be 64 MiB of zeros
    with pytest.raises(FixtureError) as err:
        fixtures.load(str(big))
    assert str(err.value) == (
        f"replay file {big} is larger than 64 MiB, far more than any machine's snapshot:"
        " give a snapshot file (gpudiag snapshot > FILE) or an example name"
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"schema": "gpudiag.machine/1", "gpus": [], "gpus": []}', "gpus"),
        ('{"gpus": [{"index": 0, "name": "A", "name": "B"}]}', "name"),
    ],
)
def test_a_replay_file_with_a_key_twice_is_refused(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "twice.json"
    path.write_text(text)
    with pytest.raises(FixtureError) as err:
        fixtures.load(str(path))
    assert str(err.value) == f"{path}: key {key!r} appears twice in one object (edited or corrupted?)"


def test_a_snapshot_whose_gpus_come_twice_is_refused(tmp_path: Path) -> None:
    """The case found: the second "gpus" silently replaced the first."""
    data = json.loads(Path(fixtures.EXAMPLES_DIR, "h100x8-healthy.json").read_text())
    text = json.dumps(data)
    path = tmp_path / "twice.json"
    path.write_text(text[:-1] + ', "gpus": ' + json.dumps(data["gpus"][:1]) + "}")
    with pytest.raises(FixtureError, match="key 'gpus' appears twice"):
        fixtures.load(str(path))


def test_a_series_beside_a_snapshot_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    from gpudiag.replay import series

    snapshot = tmp_path / "node.json"
    snapshot.write_text(Path(fixtures.EXAMPLES_DIR, "h100x8-healthy.json").read_text())
    shipped = (series.SERIES_DIR / "h100x8-healthy.json").read_text()
    snapshot.with_suffix(".series.json").write_text(shipped.replace("{", '{"source": "x", ', 1))
    machine, _ = fixtures.load(str(snapshot))
    with pytest.raises(FixtureError, match="key 'source' appears twice"):
        series.load_for(str(snapshot), machine)


def test_no_shipped_example_or_series_has_a_key_twice() -> None:
    """The examples skip the check at every start (package data): it is made here, once."""
    from gpudiag.replay import series

    shipped = [*Path(fixtures.EXAMPLES_DIR).glob("*.json"), *series.SERIES_DIR.glob("*.json")]
    assert len(shipped) > 30
    for path in shipped:
        fixtures.duplicate_keys(path.read_bytes(), path)


def test_every_shipped_example_holds_only_numbers_nvml_can_return(monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples skip the walk over their numbers at every start (package data): it is made here, once."""
    for name in example_names():
        fixtures.machine_from_data(json.loads(Path(fixtures.EXAMPLES_DIR, f"{name}.json").read_bytes()), name)
    walked = []
    monkeypatch.setattr(fixtures, "_impossible_number", lambda data: walked.append(data))
    fixtures._load_example.cache_clear()
    fixtures.load("h100x8-healthy")
    assert walked == []
