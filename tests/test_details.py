"""Details (`list --details`, snapshot): read from NVML, replayed by the fake like the real H100."""

from __future__ import annotations

import ast
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpudiag.model import ALL_GROUPS, FactGroup, Reason
from gpudiag.probe.details import cpu_list, ranges
from gpudiag.replay import fixtures
from gpudiag.replay.fake_answers import FakeHandle
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.sources import collect
from tests import golden
from tests.hardware import capture

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "docs" / "hardware" / "h100-80gb-hbm3-driver580"


@pytest.mark.parametrize("moment", ["idle", "busy"])
@pytest.mark.parametrize(("board", "folder"), [("h100", CAPTURE.name), ("h200", "h200-driver580")])
def test_the_captured_examples_hold_the_details_the_probe_reads_from_the_capture(
    board: str, folder: str, moment: str
) -> None:
    capture_dir = CAPTURE.parent / folder
    _, unanswered = capture.build(moment, capture_dir)
    assert unanswered == []  # every call the probe made was answered by the capture or nvidia-smi's output
    example = f"{board}-driver580-{moment}"
    recorded = json.loads(Path(fixtures.EXAMPLES_DIR, f"{example}.json").read_text())["gpus"][0]["details"]
    assert recorded == capture.details_for_snapshot(moment, capture_dir), (
        "regenerate: python -m tests.hardware.capture --into "
        f"gpudiag/machines/{example}.json {moment} docs/hardware/{folder}"
    )


def _plain(value: Any) -> Any:
    """An answer as the getter capture recorded the real one (its structs' members, arrays as lists)."""
    from tests.hardware.tools.nvml_getters import plain

    return plain(value)


def _subset(got: Any, want: Any) -> bool:
    """Every attribute the fake returns equals the capture's (the fake may return fewer)."""
    if isinstance(got, dict) and set(got) == {"hex"} and isinstance(want, str):  # a string member, recorded as text
        return bytes.fromhex(got["hex"]).split(b"\0")[0].decode(errors="replace") == want
    if isinstance(got, dict) and isinstance(want, dict):
        return all(k in want and _subset(v, want[k]) for k, v in got.items())
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_subset(g, w) for g, w in zip(got, want, strict=True))
    return bool(got == want)


# Captured calls the fake answers from facts the model keeps in another form, or that
# NVML's own answers disagree on within one capture; each with why it is left out.
_NOT_COMPARED = {
    "nvmlDeviceGetFieldValues([82, 94, 83],)": "timestamps and latencies per call; values compared via the model",
    "nvmlDeviceGetRetiredPages(2,)": "cause 2 does not exist; the fake answers only causes 0 and 1",
    "nvmlDeviceGetMemoryInfo": "v1 struct: issue 10 (hwtruth) models used = total - free",
    "nvmlDeviceGetMaxMigDeviceCount": "issue 10 (hwtruth): 0 on a MIG-capable GPU with MIG off",
    "nvmlDeviceGetComputeRunningProcesses": "the pre-R470 query goes through the C entry point",
    "nvmlDeviceGetGraphicsRunningProcesses": "the pre-R470 query goes through the C entry point",
    "nvmlDeviceGetGpuInstanceId": "a full GPU's answer is not modelled (only MIG handles ask)",
    "nvmlDeviceGetComputeInstanceId": "a full GPU's answer is not modelled (only MIG handles ask)",
    "nvmlDeviceGetMaxCustomerBoostClock(1,)": "the SM's boost clock is not in the model: -q shows the graphics one",
}


def test_the_capture_replayer_answers_a_struct_through_pynvml_whatever_form_the_capture_keeps() -> None:
    """The H200's capture keeps char arrays as their bytes (``{"hex": ...}``), the H100's as text: the
    capture replayer writes either into pynvml's own struct, as the C library fills it."""
    bus = b"00000000:00:06.0".ljust(32, b"\0")
    for bus_id in ("00000000:00:06.0", {"hex": bus.hex()}):
        pci = {"domain": 0, "bus": 0, "device": 6, "pciDeviceId": 590680286, "pciSubSystemId": 1, "busId": bus_id}
        lib = capture.CaptureNvml({"system": {}, "device0": {"nvmlDeviceGetPciInfo": {"ok": pci}}}, {})
        lib.nvmlInit()
        ext = lib.nvmlPciInfoExt_v1_t()
        lib.nvmlDeviceGetPciInfoExt(lib.nvmlDeviceGetHandleByIndex(0), ctypes.byref(ext))
        assert (ext.busId, ext.pciDeviceId, ext.baseClass, ext.subClass) == ("00000000:00:06.0", 590680286, 3, 2)


@pytest.mark.parametrize("moment", ["idle", "busy"])
def test_fake_answers_each_captured_call_like_the_real_h100(moment: str) -> None:
    getters = json.loads((CAPTURE / f"nvml-getters-{moment}.json").read_text())["device0"]
    machine, _ = capture.build(moment, CAPTURE)  # the getter capture's own GPU, read by the probe
    fake = FakeNvml(machine)
    fake.nvmlInit()
    compared = 0
    mismatched = []
    for key, entry in getters.items():
        name, _, rest = key.partition("(")
        if "signature" in entry or key in _NOT_COMPARED or not fake.models(name):
            continue  # not a call the fake models (it answers those as a driver without them)
        args = ast.literal_eval(f"({rest}") if rest else ()
        try:
            got: Any = _plain(getattr(fake, name)(FakeHandle(0), *args))
            outcome = ("ok", got)
        except pynvml.NVMLError as exc:
            outcome = ("error", type(exc).__name__)
        compared += 1
        want = entry.get("ok") if "ok" in entry else entry["error"]
        if outcome[0] not in entry or not (_subset(outcome[1], want) if outcome[0] == "ok" else outcome[1] == want):
            mismatched.append((key, outcome, entry))
    assert mismatched == []
    assert compared >= 100


def test_old_snapshots_replay_details_as_not_recorded() -> None:
    machine = collect("h100x8-healthy", facts=ALL_GROUPS)
    assert all(g.details.reason is Reason.NOT_RECORDED for g in machine.gpus)
    assert machine.gpus[0].details.reason.label == "not recorded in this snapshot"
    plain = collect("h100x8-healthy", facts=ALL_GROUPS - {FactGroup.DETAILS})
    assert plain.gpus[0].details.reason is Reason.NOT_READ


def test_snapshot_of_a_replay_carries_the_details_and_replays_them(tmp_path: Path) -> None:
    first = collect("h100-driver580-busy", facts=ALL_GROUPS)
    path = tmp_path / "again.json"
    path.write_text(fixtures.dump(first))
    again = collect(str(path), facts=ALL_GROUPS)
    assert again.gpus == first.gpus
    d = again.gpus[0].details.value
    assert d is not None
    assert d.clocks.current.sm.value == 1980 and d.power.energy_mj.value == 3679167
    assert d.identity.serial.value == "1652624816714"  # the busy snapshot's own GPU (nvidia-smi-q-busy.xml)
    assert d.nvlinks.reason is Reason.NOT_SUPPORTED
    assert d.process_load.reason is Reason.NOT_FOUND


def test_the_probe_reads_per_process_load_as_captured() -> None:
    machine, _ = capture.build("busy", CAPTURE)
    d = machine.gpus[0].details.value
    assert d is not None
    load = d.process_load.value
    assert load is not None and (load[0].pid, load[0].sm_percent, load[0].memory_percent) == (1128, 1, 0)


@pytest.mark.slow
def test_plain_list_neither_imports_nor_calls_the_details() -> None:
    code = (
        "import sys\n"
        "from gpudiag.replay.fake_nvml import FakeNvml\n"
        "from gpudiag.cli.app import main\n"
        "calls = []\n"
        "orig = FakeNvml._enter\n"
        "FakeNvml._enter = lambda self, name: (calls.append(name), orig(self, name))[1]\n"
        "sys.argv = ['gpudiag', '--replay', 'h100x8-healthy', 'list']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "mods = [m for m in ('gpudiag.details', 'gpudiag.probe.details',"
        " 'gpudiag.render.details_view', 'gpudiag.replay.fake_details',"
        " 'gpudiag.render.csv_query', 'gpudiag.query.gpu_fields', 'gpudiag.cli.list_watch') if m in sys.modules]\n"
        "print('MODS', mods, 'CALLS', sorted({c for c in calls if 'Clock' in c and 'Event' not in c}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "MODS [] CALLS []"


def test_cpu_masks_read_as_lists() -> None:
    assert cpu_list([0xFFFF]) == "0-15"
    assert cpu_list([0xF0F, 1]) == "0-3,8-11,64"
    assert ranges([]) == ""


def test_process_load_keeps_each_pids_newest_sample_and_its_cursor() -> None:
    from types import SimpleNamespace

    from gpudiag.model import Reading
    from gpudiag.probe.details import DetailsProbe

    asked = []

    def read(function: str, *args: Any, convert: Any = None) -> Reading[Any]:
        asked.append(args[-1])
        samples = [
            SimpleNamespace(pid=7, timeStamp=5, smUtil=10, memUtil=1, encUtil=0, decUtil=0),
            SimpleNamespace(pid=7, timeStamp=9, smUtil=40, memUtil=2, encUtil=0, decUtil=0),
        ]
        return Reading.of(convert(samples) if convert else samples)

    session = SimpleNamespace(lib=pynvml, read=read, read_specs=None, field_values=None)
    probe = DetailsProbe(session, lambda pid: (Reading.of(1.0), Reading.of(2), Reading.of(3.0)), 16)
    first = probe._process_load(0, object())
    assert first.value is not None and first.value[0].sm_percent == 40
    probe._process_load(0, object())
    assert asked == [0, 9]  # the second read asks only for samples newer than the first's


GOLDEN = golden.GOLDEN / "list-details"


@pytest.mark.parametrize("name", fixtures.example_names())
def test_every_example_shows_its_details_like_its_golden_file(name: str) -> None:
    from tests.test_list_cli import run

    code, out, err = run("--replay", name, "list", "--details")
    golden.assert_matches_golden(GOLDEN / f"{name}.txt", golden.command_output(code, out, err))


def test_nvswitch_node_shows_nv18_between_every_pair_and_its_numa_split() -> None:
    from gpudiag.render.details_view import topology_matrix

    machine = collect("h100x8-nvswitch", facts=ALL_GROUPS)
    matrix = topology_matrix(machine).splitlines()
    assert matrix[2].split()[:9] == ["GPU0", "X", *["NV18"] * 7]
    assert matrix[9].split()[-3:] == ["56-111,168-223", "1", "N/A"]  # an H100 has no NUMA id of its own
    peers = machine.gpus[0].details.value.affinity.value.peers  # type: ignore[union-attr]
    assert {p.common_ancestor.value for p in peers if p.gpu < 4} == {"NODE"}
    assert {p.common_ancestor.value for p in peers if p.gpu >= 4} == {"SYS"}


def test_host_view_of_a_live_process_and_of_one_that_exited() -> None:
    import os
    import time

    from gpudiag.probe.details import PsutilProcessStats

    stats = PsutilProcessStats()
    cpu, rss, started = stats(os.getpid())
    assert cpu.value is not None and cpu.value >= 0
    assert rss.value is not None and rss.value > 1024 * 1024
    assert started.value is not None and started.value <= time.time()
    again = stats(os.getpid())[0]  # the second read measures since the first
    assert again.value is not None
    gone = stats(2**22 + 12345)[0]
    assert gone.reason is Reason.NOT_FOUND


def test_a_gpu_lost_while_its_details_are_read_becomes_a_lost_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.model import GpuState

    answer = FakeNvml.answer

    def lost(self: FakeNvml, name: str, handle: FakeHandle, *args: Any) -> Any:
        if name == "nvmlDeviceGetMaxClockInfo":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return answer(self, name, handle, *args)

    monkeypatch.setattr(FakeNvml, "answer", lost)
    machine = collect("h100-driver580-idle", facts=ALL_GROUPS)
    assert machine.gpus[0].state is GpuState.LOST
    assert "nvmlDeviceGetMaxClockInfo" in machine.gpus[0].state_detail


def test_json_carries_the_details_only_when_asked() -> None:
    from tests.test_list_cli import run

    busy = "h100-driver580-busy"
    _, plain, _ = run("--replay", busy, "list", "--json")
    _, detailed, _ = run("--replay", busy, "list", "--json", "--details")
    assert json.loads(plain)["gpus"][0]["details"] == {"unavailable": "not_read"}
    assert json.loads(detailed)["gpus"][0]["details"]["clocks"]["max"]["sm"] == 1980


def test_the_fake_answers_every_detail_row_as_the_machine_records_it() -> None:
    """The fake encodes each recorded detail the way its row decodes NVML's answer: a round trip."""
    from gpudiag.details import DETAIL_READINGS
    from gpudiag.readings import pick, reading_at

    machine = fixtures.load("h100-driver580-idle")[0]
    lib = FakeNvml(machine)
    lib.nvmlInit()
    gpu, answered = machine.gpus[0], 0
    for row in DETAIL_READINGS:
        if row.custom or row.field:
            continue
        recorded = reading_at(gpu, row.key)
        args = [getattr(pynvml, a) if isinstance(a, str) else a for a in row.args]
        struct = getattr(pynvml, row.struct)() if row.struct else None
        try:
            raw = getattr(lib, row.call)(FakeHandle(0), *args, *([ctypes.byref(struct)] if struct is not None else []))
        except pynvml.NVMLError_NotSupported:
            assert recorded.reason is Reason.NOT_SUPPORTED, row.key
            continue
        except pynvml.NVMLError as exc:  # a reading the example does not hold, or NVML's own error
            assert recorded.reason is not None and recorded.reason is not Reason.NOT_SUPPORTED, (row.key, exc)
            continue
        if struct is not None:  # a struct filled by reference
            assert raw == pynvml.NVML_SUCCESS
            raw = struct
        assert row.codec.decode(pick(raw, row.pick)) == recorded.value, row.key
        answered += 1
    assert answered >= 50
