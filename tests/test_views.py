"""The nvidia-smi views (`dmon`, `pmon`, `topo`, `nvlink`, `mig`, `stat`): held against the captured H100's
nvidia-smi, on every example machine, their replays playing the recorded series, their NVML calls."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from gpudiag import monitor
from gpudiag.exitcodes import ExitCode
from gpudiag.model import FactGroup, Reading, Reason
from gpudiag.probe.monitor import PROCESS_LOAD, RowReader
from gpudiag.replay import fixtures, series
from gpudiag.replay.fixtures import FixtureError
from gpudiag.sources import open_source
from tests import golden
from tests.conftest import Cli, every_example, examples_among

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
GOLDEN = golden.GOLDEN / "views"
ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The monitors' waits between samples, recorded instead of slept (the series' pace is not tested
    by the clock); and a fixed time zone for the -o DT and stat lines."""
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return waits


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


# --- against the captured nvidia-smi --------------------------------------------------------------


def test_dmon_on_the_captured_h100_prints_what_nvidia_smi_printed(cli: Cli) -> None:
    """Line for line, but for the blank nvidia-smi ends each line with (gpudiag pads no line end)."""
    code, out, err = cli.replay("h100-driver580-idle", "dmon", "-c", "2")
    assert (code, err) == (0, "")
    assert out.splitlines() == _lines((CAPTURE / "nvidia-smi-dmon.txt").read_text())


def test_pmon_on_the_captured_h100_prints_what_nvidia_smi_printed(cli: Cli) -> None:
    code, out, err = cli.replay("h100-driver580-idle", "pmon", "-c", "2")
    assert (code, err) == (0, "")
    assert out.splitlines() == _lines((CAPTURE / "nvidia-smi-pmon-busy.txt").read_text())


def test_topo_on_the_captured_h100_prints_what_nvidia_smi_printed(cli: Cli) -> None:
    captured = (CAPTURE / "nvidia-smi-topo-m.txt").read_text()
    code, out, _ = cli.replay("h100-driver580-idle", "topo", "-m")
    assert code == 0 and out == ESCAPES.sub("", captured)  # no colour: no underline escape
    code, out, _ = cli("--color", "always", "--replay", "h100-driver580-idle", "topo", "-m")
    assert code == 0 and out == captured  # colour on: nvidia-smi's bytes, its underline included


def test_dmon_columns_are_nvidia_smis_names_and_units_in_the_order_of_the_letters(cli: Cli) -> None:
    _, out, _ = cli.replay("h100x8-nvswitch", "dmon", "-s", "pucvmet", "-c", "1", "-i", "0")
    names, units = out.splitlines()[:2]
    want = "# gpu pwr gtemp mtemp sm mem enc dec jpg ofa mclk pclk pviol tviol fb bar1 ccpm sbecc dbecc pci rxpci txpci"
    assert names.split() == want.split(" ")
    units_wanted = "# Idx W C C % % % % % % MHz MHz % bool MB MB MB errs errs errs MB/s MB/s"
    assert units.split() == units_wanted.split(" ")
    _, out, _ = cli.replay("h100x8-nvswitch", "dmon", "-s", "tp", "-c", "1", "-i", "0")
    assert out.splitlines()[0].split() == ["#", "gpu", "rxpci", "txpci", "pwr", "gtemp", "mtemp"]


def test_dmon_date_time_and_csv_layouts_are_nvidia_smis(cli: Cli) -> None:
    _, out, _ = cli.replay("h100-driver580-idle", "dmon", "-c", "1", "-o", "DT", "-s", "p")
    assert out.splitlines() == [
        "#Date        Time         gpu    pwr  gtemp  mtemp",
        "#YYYYMMDD    HH:MM:SS     Idx      W      C      C",
        " 20261122    23:46:11       0     71     34     37",
    ]
    _, out, _ = cli.replay("h100-driver580-idle", "dmon", "-c", "1", "-o", "T", "-s", "p")
    assert out.splitlines()[0] == "#Time         gpu    pwr  gtemp  mtemp"
    _, out, _ = cli.replay("h100-driver580-idle", "dmon", "-c", "2", "-s", "pv", "--format", "csv,nounit")
    assert out.splitlines() == ["#gpu, pwr, gtemp, mtemp, pviol, tviol", "0, 71, 34, 37, -, -", "0, 71, 34, 36, 0, 0"]
    _, out, _ = cli.replay("h100-driver580-idle", "pmon", "-c", "1", "--format", "csv,noheader")
    assert out.splitlines() == ["#Idx, #, C/G, %, %, %, %, %, %, name", "0, -, -, -, -, -, -, -, -, -"]


# --- golden outputs at a fixed width ----------------------------------------------------------------

GOLDENS = [
    ("h100-driver580-busy", ["dmon", "-s", "pucvmet", "-c", "2"]),
    ("h100-driver580-busy", ["pmon", "-s", "um", "-c", "2"]),
    ("h100-driver580-busy", ["stat", "-c", "-p", "-P"]),
    ("h100x8-nvswitch", ["topo", "-m"]),
    ("h100x8-nvswitch", ["topo", "-p2p", "a"]),
    ("h100x8-nvswitch", ["nvlink", "-e", "-i", "3"]),
    ("h100x8-nvswitch", ["nvlink", "-gt", "d", "-i", "7"]),
    ("h100x8-nvswitch", ["topo", "--json"]),
    ("a100-mig", ["mig", "-lgip"]),
    ("a100-mig", ["mig", "-lgi"]),
    ("a100-mig", ["mig", "-lci"]),
    ("a100-mig", ["mig", "--json"]),
    ("a100-mig-no-instances", ["mig"]),
    ("gpu-lost", ["dmon", "-c", "2"]),
    ("gpu-lost", ["stat"]),
    ("hostile-strings", ["pmon", "-c", "2"]),
    ("hostile-strings", ["stat", "-c"]),
    ("hostile-strings", ["nvlink", "-i", "0"]),
    ("v100x4-tutorial", ["stat", "--watch", "--count", "2", "--interval", "0.1"]),
    ("h100x8-ranks-imbalance", ["pmon", "-c", "2", "--json"]),
    ("geforce-no-ecc-power", ["dmon", "-s", "pucvmet", "-c", "4"]),
]


@pytest.mark.parametrize(("name", "args"), GOLDENS, ids=[f"{n} {' '.join(a)}" for n, a in GOLDENS])
def test_views_render_like_their_golden_files(cli: Cli, name: str, args: list[str]) -> None:
    code, out, err = cli.replay(name, *args, width=120)
    path = GOLDEN / name / f"{'-'.join(a.lstrip('-') for a in args)}.txt"
    golden.assert_matches_golden(path, golden.command_output(code, out, err))


# --- every view on every example: nvidia-smi's errors where NVML cannot serve -----------------------

VIEWS = [
    ["dmon", "-c", "1"],
    ["pmon", "-c", "1"],
    ["topo"],
    ["topo", "-p2p", "n"],
    ["nvlink"],
    ["mig"],
    ["stat"],
    ["stat", "--json"],
    ["dmon", "-c", "1", "--json"],
]
NVIDIA_SMI_ERRORS = {
    "no-driver": (
        ExitCode.NVML_DRIVER_NOT_LOADED,
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.",
    ),
    "no-nvml-library": (
        ExitCode.NVML_LIBRARY_NOT_FOUND,
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display "
        "Driver is properly installed and present in your system.",
    ),
    "driver-mismatch": (ExitCode.NVML_VERSION_MISMATCH, "Failed to initialize NVML: Driver/library version mismatch"),
    "no-permission": (ExitCode.NVML_NO_PERMISSION, "Failed to initialize NVML: Insufficient Permissions"),
    "zero-gpus": (ExitCode.NOT_FOUND, "No devices were found"),
}


@pytest.mark.parametrize("args", VIEWS, ids=" ".join)
@pytest.mark.parametrize("name", sorted(NVIDIA_SMI_ERRORS))
def test_a_machine_nvml_cannot_serve_gets_nvidia_smis_line_and_code(cli: Cli, name: str, args: list[str]) -> None:
    code, out, err = cli.replay(name, *args)
    want_code, line = NVIDIA_SMI_ERRORS[name]
    assert (code, out, err) == (want_code, "", f"gpudiag: {line}\n")


LOST = "gpudiag: Unable to determine the device handle for GPU2: GPU is lost.  Reboot the system to recover this GPU\n"


@pytest.mark.parametrize("args", [a for a in VIEWS if a[0] != "mig"], ids=" ".join)
def test_a_lost_gpu_is_said_as_nvidia_smi_says_it_and_the_others_shown(cli: Cli, args: list[str]) -> None:
    code, out, err = cli.replay("gpu-lost", *args)
    assert code == ExitCode.GPU_LOST and err.startswith(LOST)
    shown = out if args[0] != "topo" else out.split("\n\n")[0]
    for index in (0, 1, 3):
        assert re.search(rf"(^|\D){index}(\D|$)", shown), (index, out)


def test_mig_says_when_there_is_nothing_to_list(cli: Cli) -> None:
    assert cli.replay("h100-driver580-idle", "mig") == (
        ExitCode.NOT_FOUND,
        "",
        "gpudiag: No MIG-enabled devices found.\n",
    )
    for option, what in (("-lgi", "GPU"), ("-lci", "compute")):
        code, out, err = cli.replay("a100-mig-no-instances", "mig", option)
        assert (code, out, err) == (ExitCode.NOT_FOUND, "", f"gpudiag: No {what} instances found: Not Found\n")


@pytest.mark.parametrize("args", VIEWS, ids=" ".join)
@pytest.mark.parametrize("name", [p for p in every_example() if p.values[0] not in NVIDIA_SMI_ERRORS])
def test_every_view_works_on_every_example(cli: Cli, name: str, args: list[str]) -> None:
    code, out, err = cli.replay(name, *args, width=100)
    allowed = {ExitCode.OK, ExitCode.GPU_LOST} | ({ExitCode.NOT_FOUND} if args[0] == "mig" else set())
    assert code in allowed, (code, err)
    if code != ExitCode.NOT_FOUND:
        assert out
    if "--json" in args:
        for line in out.splitlines() if args[0] == "dmon" else [out]:
            assert json.loads(line)["schema"].startswith("gpudiag.")
    if code == ExitCode.OK:
        assert err == "" or "holds" in err  # only a -c beyond a replay's series is said


# --- replays play the recorded series ------------------------------------------------------------


def _samples(out: str, gpus: int) -> list[list[str]]:
    rows = [line for line in out.splitlines() if not line.startswith("#")]
    return [rows[n : n + gpus] for n in range(0, len(rows), gpus)]


@pytest.mark.parametrize("name", examples_among(sorted(p.stem for p in series.SERIES_DIR.glob("*.json"))))
def test_dmon_on_a_replay_prints_its_recorded_series_not_one_snapshot_repeated(cli: Cli, name: str) -> None:
    machine = fixtures.load(name)[0]
    recorded = series.load_for(name, machine)
    assert recorded is not None and len(recorded) >= 2
    _, out, err = cli.replay(name, "dmon", "-s", "pucvmet", "-c", "99")
    usable = [g for g in machine.gpus if g.state.value == "ok"]
    samples = _samples(out, len(usable))
    assert len(samples) == len(recorded)  # each sample once, then the end of the series, said on stderr
    assert f"its series holds {len(recorded)} sample(s)" in err
    assert len({tuple(s) for s in samples}) > 1, "the same snapshot printed again and again"
    for n, sample in enumerate(samples):  # each line holds that sample's recorded power and temperature
        for gpu, line in zip(usable, sample, strict=True):
            values = recorded.samples[n][machine.gpus.index(gpu)]
            cells = line.split()
            assert cells[0] == str(gpu.index)
            if "power_draw_w" in values and values["power_draw_w"].value is not None:
                assert cells[1] == str(int(values["power_draw_w"].value))
            if "temperature_c" in values:
                assert cells[2] == str(values["temperature_c"].value)


def test_pmon_on_the_busy_h100_shows_each_captured_moment(cli: Cli) -> None:
    _, out, _ = cli.replay("h100-driver580-busy", "pmon", "-c", "2")
    first, second = [line.split() for line in out.splitlines()[2:]]
    assert first == ["0", "485", "C", "-", "-", "-", "-", "-", "-", "python3"]  # no sample at that moment
    assert second == ["0", "485", "C", "0", "0", "0", "0", "-", "-", "python3"]  # nvitop's 0 %SM, 0 %GMBW


def test_the_series_waits_the_delay_between_samples(cli: Cli, no_waiting: list[float]) -> None:
    cli.replay("h100x8-healthy", "dmon", "-c", "3", "-d", "2.5")
    assert len(no_waiting) == 2 and 0 < no_waiting[0] <= 2.5  # two waits, on a 2.5 s grid


def test_stat_watch_plays_the_series_and_one_shot_shows_the_snapshot(cli: Cli) -> None:
    _, once, _ = cli.replay("v100x4-tutorial", "stat")
    _, watched, _ = cli.replay("v100x4-tutorial", "stat", "--watch", "--count", "4", "--interval", "0.1")
    blocks = watched.split("\n\n")
    assert len(blocks) == 4 and len(set(blocks)) == 4
    assert " 87 %" in once and " 87 %" in blocks[0] and " 84 %" in blocks[1]


def test_stat_shows_the_snapshot_moment_or_na_never_1970(cli: Cli) -> None:
    """A capture records its moment; an example machine records none, which reads N/A (JSON null)."""
    _, captured, _ = cli.replay("h100-driver580-idle", "stat")
    assert " 2026 " in captured.splitlines()[0] and "1970" not in captured
    _, example, _ = cli.replay("h100x8-healthy", "stat")
    assert example.splitlines()[0].split() == ["dgx-h100-07", "N/A", "550.54.15"]
    _, document, _ = cli.replay("h100x8-healthy", "stat", "--json")
    assert json.loads(document)["time"] is None


def test_a_snapshot_file_replays_its_own_series_or_one_sample(cli: Cli, tmp_path: Path) -> None:
    snapshot = tmp_path / "node.json"
    snapshot.write_text((ROOT / "gpudiag" / "machines" / "h100-driver580-idle.json").read_text())
    code, out, err = cli("--replay", str(snapshot), "dmon", "-c", "3")
    assert code == 0 and len(_samples(out, 1)) == 1 and "snapshot (no series recorded beside it) holds 1" in err
    (tmp_path / "node.series.json").write_text((series.SERIES_DIR / "h100-driver580-idle.json").read_text())
    code, out, _ = cli("--replay", str(snapshot), "dmon", "-c", "3")
    assert code == 0 and len(_samples(out, 1)) == 2


def test_the_series_files_are_the_scripts_output() -> None:
    """Regenerate with `python -m tests.series_examples`; illustrative ones say so."""
    from tests import series_examples

    assert series_examples.main(["--check"]) == 0
    for path in series.SERIES_DIR.glob("*.json"):
        data = json.loads(path.read_text())
        board = path.stem.split("-driver580-")[0] if "-driver580-" in path.stem else None
        captured = board in ("h100", "h200")  # the examples built from docs/hardware's captures
        assert data["grounding"] == ("captured" if captured else "illustrative"), path.name
        folder = CAPTURE if board == "h100" else CAPTURE.parent / "h200-driver580"
        assert (folder.relative_to(ROOT).as_posix() in data["source"]) is captured


def _good() -> dict[str, Any]:
    return json.loads((series.SERIES_DIR / "h100-driver580-idle.json").read_text())


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.update(schema="gpudiag.series/0"), "schema"),
        (lambda d: d.update(grounding="measured"), "grounding"),
        (lambda d: d.update(interval_s=0), "interval_s"),
        (lambda d: d.update(extra=1), "unknown keys"),
        (lambda d: d["gpus"].update({"1": d["gpus"]["0"]}), "no GPU 1"),
        (lambda d: d["gpus"].update({"0": d["gpus"]["0"][:1]}), "at least 2"),
        (lambda d: d["gpus"].update({"0": [d["gpus"]["0"][0]] * 2}), "one snapshot repeated"),
        (lambda d: d["gpus"]["0"][1].update(bogus=1), "'bogus' is not a reading"),
        (lambda d: d["gpus"]["0"][1].update(uuid="GPU-x"), "'uuid' is not a reading"),
        (lambda d: d["gpus"]["0"][1].update(temperature_c=-3), "outside 0..2**64-1"),
        (lambda d: d["gpus"]["0"][1].update(temperature_c="hot"), "expected an integer"),
        (lambda d: d["gpus"]["0"][1].update(utilization={"gpu_percent": 120, "memory_percent": 0}), "above 100"),
        (lambda d: d["gpus"]["0"][1].update(temperature_c={"unavailable": "tired"}), "unknown reason"),
        (lambda d: d.update(gpus={}), "GPU indices"),
    ],
)
def test_the_series_loader_refuses_what_is_not_a_series_of_this_machine(change: Any, said: str) -> None:
    data = _good()
    change(data)
    machine = fixtures.load("h100-driver580-idle")[0]
    with pytest.raises(FixtureError, match=re.escape(said)):
        series.series_from_data(data, machine, "test")


def test_a_lost_gpu_has_no_samples_and_every_usable_one_has() -> None:
    machine = fixtures.load("gpu-lost")[0]
    data = json.loads((series.SERIES_DIR / "gpu-lost.json").read_text())
    with pytest.raises(FixtureError, match="GPU 2 is lost"):
        series.series_from_data({**data, "gpus": {**data["gpus"], "2": data["gpus"]["0"]}}, machine, "test")
    with pytest.raises(FixtureError, match="no samples for GPU 3"):
        series.series_from_data({**data, "gpus": {k: v for k, v in data["gpus"].items() if k != "3"}}, machine, "test")


def test_a_detail_set_on_a_gpu_without_details_leaves_the_rest_not_recorded() -> None:
    machine = fixtures.load("v100x4-tutorial")[0]
    recorded = series.load_for("v100x4-tutorial", machine)
    assert recorded is not None
    gpu = recorded.machine_at(machine, 1).gpus[0]
    assert gpu.details.value is not None
    assert gpu.details.value.temperatures.memory_c.value == gpu.temperature_c.get(0) + 3
    assert gpu.details.value.power.average_w.reason is Reason.NOT_RECORDED
    # a detail that is also a GPU reading keeps the GPU's (NVML answers both from one call)
    assert gpu.details.value.clocks.current.memory == gpu.clock_memory_mhz


# --- NVML calls: one session, handles once, only the selected groups' readings ----------------------

CALLS = {
    "p": ["nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature", "nvmlDeviceGetFieldValues"],
    "u": [
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetJpgUtilization",
        "nvmlDeviceGetOfaUtilization",
    ],
    "c": ["nvmlDeviceGetClockInfo", "nvmlDeviceGetClockInfo"],
    "v": ["nvmlDeviceGetFieldValues"],
    "m": [  # one C call for the memory: nvidia-ml-py's wrapper reaches nvmlDeviceGetMemoryInfo_v2 (both logged)
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetBAR1MemoryInfo",
        "nvmlDeviceGetConfComputeProtectedMemoryUsage",
    ],
    # the replay counter is a field value (94): the same counter as nvmlDeviceGetPcieReplayCounter
    "e": ["nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetFieldValues"],
    "t": ["nvmlDeviceGetPcieThroughput", "nvmlDeviceGetPcieThroughput"],
    "pv": [  # the field values of both groups in one call
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetFieldValues",
    ],
}


@pytest.mark.parametrize("letters", sorted(CALLS))
def test_each_interval_reads_only_the_selected_groups_readings(letters: str) -> None:
    with open_source("h100x8-nvswitch", facts=frozenset()) as source:
        source.read()
        assert source.play() == 4
        reader = RowReader(source, monitor.row_keys(monitor.select(letters)))
        for sample in range(3):
            source.seek(sample)
            for position in range(8):
                before = len(source.lib.calls)
                readings = reader.read(position)
                assert readings is not None
                assert source.lib.calls[before:] == CALLS[letters], (sample, position)


def test_pmon_reads_the_process_lists_and_their_samples_each_interval() -> None:
    with open_source("h100-driver580-busy", facts=frozenset()) as source:
        source.read()
        source.play()
        reader = RowReader(source, ("processes", PROCESS_LOAD))
        for sample in range(2):
            source.seek(sample)
            before = len(source.lib.calls)
            reader.read(0)
            calls = source.lib.calls[before:]
            # Each query once: nvidia-ml-py's list wrappers make a sizing call, then the filled one.
            assert [c for i, c in enumerate(calls) if i == 0 or c != calls[i - 1]] == [
                "nvmlDeviceGetComputeRunningProcesses_v3",
                "nvmlDeviceGetGraphicsRunningProcesses_v3",
                "nvmlDeviceGetProcessUtilization",
            ]


def test_a_whole_run_opens_nvml_once_and_fetches_each_handle_once(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.replay import fake_nvml

    made: list[Any] = []
    real = fake_nvml.FakeNvml.__init__

    def keep(self: Any, machine: Any) -> None:
        real(self, machine)
        made.append(self)

    monkeypatch.setattr(fake_nvml.FakeNvml, "__init__", keep)
    code, _, _ = cli.replay("h100x8-training-64procs", "dmon", "-s", "pucvmet", "-c", "4")
    assert code == 0 and len(made) == 1
    calls = made[0].calls
    assert calls.count("nvmlInit") == 1 and calls.count("nvmlShutdown") == 1
    assert calls.count("nvmlDeviceGetHandleByIndex") == 8  # fetched once, read through four times
    assert calls.count("nvmlDeviceGetPowerUsage") == 4 * 8
    assert (
        "nvmlDeviceValidateInforom" not in calls
        and "nvmlDeviceGetUUID" not in calls[calls.index("nvmlDeviceGetPowerUsage") :]
    )


# --- values --------------------------------------------------------------------------------------

_CAP = "details.clocks.event_reason_counters_us[sw_power_cap]"
_THERMAL = "details.clocks.event_reason_counters_us[sw_thermal_slowdown]"
_HW = "details.clocks.event_reason_counters_us[hw_thermal_slowdown]"


def _readings(cap: int, thermal: int) -> dict[str, Reading[Any]]:
    return {_CAP: Reading.of(cap), _THERMAL: Reading.of(thermal), _HW: Reading.of(0)}


def test_violations_are_the_share_of_the_interval_and_a_flag_from_two_samples() -> None:
    pviol, tviol = monitor.select("v")
    first, later = _readings(1_000_000, 5), _readings(1_750_000, 5)
    assert pviol.value(first, None, 0.0).reason is Reason.NOT_READ  # one sample says nothing of an interval
    assert pviol.value(later, first, 1.0).value == 75.0  # 0.75 s of the second capped
    assert pviol.value(later, first, 0.5).value == 100.0  # never above the whole interval
    assert tviol.value(later, first, 1.0).value == 0
    assert tviol.value(_readings(0, 6), _readings(0, 5), 1.0).value == 1
    assert pviol.value(_readings(10, 0), _readings(500, 0), 1.0).value == 0.0  # a counter reset is no negative
    gone = {
        _CAP: Reading.missing(Reason.NOT_SUPPORTED),
        _THERMAL: Reading.missing(Reason.NOT_SUPPORTED),
        _HW: Reading.missing(Reason.NOT_SUPPORTED),
    }
    assert pviol.value(gone, gone, 1.0).reason is Reason.NOT_SUPPORTED


def test_an_unknown_metric_letter_is_a_usage_error_naming_the_groups(cli: Cli) -> None:
    code, _, err = cli.replay("h100x8-healthy", "dmon", "-s", "pz")
    assert code == ExitCode.USAGE and "unknown metric group 'z'" in err and "p (power" in err
    assert cli.replay("h100x8-healthy", "pmon", "-d", "11")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "dmon", "-o", "X")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "dmon", "--format", "xml")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "dmon", "--json", "-o", "T")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "topo", "-p2p", "x")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "nvlink", "-e", "-gt", "d")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "mig", "-lgi", "-lci")[0] == ExitCode.USAGE
    assert cli.replay("h100x8-healthy", "dmon", "-i", "9")[0] == ExitCode.USAGE


# --- output ----------------------------------------------------------------------------------------


def test_dmon_json_lines_carry_every_value_with_its_unit_and_why_one_is_missing(cli: Cli) -> None:
    _, out, _ = cli.replay("geforce-no-ecc-power", "dmon", "-s", "pv", "-c", "2", "--json")
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["schema"] == "gpudiag.dmon/1" and (first["sample"], second["sample"]) == (0, 1)
    gpu = second["gpus"][0]
    assert gpu["power_w"] == {"unavailable": "not_supported"}
    assert gpu["power_violation_percent"] == 60.0 and gpu["thermal_violation"] == 0
    assert first["gpus"][0]["power_violation_percent"] == {"unavailable": "not_read", "detail": "needs two samples"}


def test_filename_grows_a_whole_sample_at_a_time(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "dmon.log"
    assert cli.replay("h100x8-healthy", "dmon", "-c", "2", "-f", str(log)) == (0, "", "")
    assert len(log.read_text().splitlines()) == 2 + 2 * 8
    cli.replay("h100x8-healthy", "dmon", "-c", "1", "-f", str(log))  # appended, with its own header
    assert len(log.read_text().splitlines()) == 2 + 2 * 8 + 2 + 8
    assert cli.replay("h100x8-healthy", "dmon", "-c", "1", "-f", str(tmp_path / "no" / "such.log"))[0] == ExitCode.USAGE


def test_outside_text_is_escaped_where_shown(cli: Cli) -> None:
    for args in (["pmon", "-c", "1"], ["stat", "-c"], ["nvlink"]):
        _, out, _ = cli.replay("hostile-strings", *args)
        assert "\x1b" not in out and "\\x1b" in out, args


def test_mig_tables_keep_nvidia_smis_widths(cli: Cli) -> None:
    for option, width in (("-lgip", 79), ("-lgi", 59), ("-lci", 70)):
        _, out, _ = cli.replay("a100-mig", "mig", option)
        assert {len(line) for line in out.splitlines()} == {width}, option


def test_the_probe_reads_back_the_recorded_mig_layout() -> None:
    """Through the fake's instance handles and ctypes arrays, the probe reads what the example records."""
    machine = fixtures.load("a100-mig")[0]
    with open_source("a100-mig", facts=frozenset({FactGroup.MIG, FactGroup.MIG_LAYOUT})) as source:
        gpu = source.read().gpus[0]
    assert gpu.mig_profiles == machine.gpus[0].mig_profiles
    assert gpu.mig_instances == machine.gpus[0].mig_instances
    assert len(gpu.mig_instances.get(())) == 3


def test_a_gpu_without_mig_costs_no_mig_layout_call() -> None:
    with open_source("h100x8-healthy", facts=frozenset({FactGroup.MIG_LAYOUT})) as source:
        before = len(source.lib.calls)
        gpus = source.read().gpus
        assert source.lib.calls[before:].count("nvmlDeviceGetUUID") == 8
        assert not any("Instance" in call for call in source.lib.calls)
    assert all(g.mig_profiles.detail == "MIG is not enabled on this GPU" for g in gpus)


# --- on a real GPU -------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "args",
    [
        ["dmon", "-s", "pucvmet", "-c", "2", "--json"],
        ["pmon", "-s", "um", "-c", "2", "--json"],
        ["topo", "--json"],
        ["nvlink", "--json"],
        ["mig", "--json"],
        ["stat", "--json"],
    ],
    ids=" ".join,
)
def test_the_views_on_this_machine(cli: Cli, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUDIAG_REPLAY", raising=False)
    code, out, err = cli(*args)
    assert code in (ExitCode.OK, ExitCode.GPU_LOST), err
    documents = [json.loads(line) for line in out.splitlines()] if args[0] in ("dmon", "pmon") else [json.loads(out)]
    assert documents and all(d["schema"] == f"gpudiag.{args[0]}/1" for d in documents)
    if args[0] == "dmon":
        assert documents[1]["gpus"][0]["power_violation_percent"] is not None
