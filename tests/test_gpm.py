"""NVML GPM (profiling metrics) through the probe (probe.gpm) and the fake NVML: the window between two
samples, a one-shot read's one wait, a long-running reader that never waits, buffers kept bounded and
given back, "not supported" on a GPU without GPM, each metric's own status."""

from __future__ import annotations

import ctypes
from collections import Counter
from typing import Any

import msgspec
import pynvml
import pytest

from gpudiag.model import FactGroup, Machine, Reading, Reason
from gpudiag.probe import gpm
from gpudiag.probe.collect import collect, open_source
from gpudiag.probe.nvml import NvmlSession
from gpudiag.readings import GPM_METRICS, MIB
from gpudiag.replay.fake_answers import FakeHandle
from gpudiag.replay.fake_host import RecordedHost
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.replay.fixtures import dump, load
from tests.conftest import Cli

PROFILING = frozenset({FactGroup.PROFILING})
BUSY = "h100x8-training-64procs"


class Clock:
    """A clock that moves only when told (sleep moves it too), and counts the sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def session(machine: Machine, clock: Clock, wait: bool, window_s: float | None = None) -> NvmlSession:
    s = NvmlSession(FakeNvml(machine), RecordedHost(machine))
    s.gpm_wait, s.gpm_window_s, s.gpm_clock, s.gpm_sleep = wait, window_s, clock, clock.sleep
    s.open(machine.nvml.kernel_module_version)
    return s


def figures(s: NvmlSession) -> list[Reading[Any]]:
    return [g.profiling for g in s.read_gpus(PROFILING)]


def test_a_one_shot_read_samples_every_gpu_waits_once_and_measures_the_window() -> None:
    machine = load(BUSY)[0]
    clock = Clock()
    with session(machine, clock, wait=True) as s:
        got = figures(s)
    assert clock.sleeps == [gpm.ONE_SHOT_WINDOW_S]  # one wait for the eight GPUs
    first = got[0].value
    assert first is not None and first.window_s == gpm.ONE_SHOT_WINDOW_S
    recorded = machine.gpus[0].profiling.value
    assert recorded is not None
    assert first.tensor_active_percent == recorded.tensor_active_percent == Reading.of(47.5)
    assert first.pcie_tx_bytes_per_s == Reading.of(1150.0 * MIB)  # GPM's MiB/s, in bytes per second
    assert all(r.value is not None for r in got)


def test_a_long_running_reader_never_waits_and_measures_since_an_earlier_read() -> None:
    clock = Clock()
    with session(load(BUSY)[0], clock, wait=False, window_s=1.0) as s:
        first = figures(s)[0]
        assert first.reason is Reason.UNAVAILABLE and first.detail == gpm.FIRST_SAMPLE
        windows = []
        for step in (15.0, 0.2, 14.8, 15.0, 15.0):  # a second Prometheus scrapes 0.2 s after the first
            clock.now += step
            reading = figures(s)[0]
            assert reading.value is not None
            windows.append(reading.value.window_s)
        calls = Counter(s.lib.calls)
        kept = {
            address for address, sample in s.lib._gpm_samples.items() if sample is not None and sample[0] == 0
        }  # GPU 0's buffers
    assert clock.sleeps == []
    # Since the newest sample at least a window old: the scrape 0.2 s after another is measured since the
    # one before that, and the next since the 0.2 s one.
    assert windows == [15.0, 15.2, 14.8, 15.0, 15.0]
    assert calls["nvmlGpmSampleAlloc"] <= 4 * 8  # buffers reused: at most four per GPU
    assert len(kept) <= 4
    assert calls["nvmlGpmQueryDeviceSupport"] == 8  # once per GPU and session
    assert s.lib._gpm_samples == {}  # every buffer given back when the session closed


def test_a_gpu_without_gpm_is_not_supported_never_zeros() -> None:
    clock = Clock()
    with session(load("a100-ecc-errors")[0], clock, wait=True) as s:
        (reading,) = figures(s)
        assert figures(s)[0] == reading
        calls = Counter(s.lib.calls)
    assert reading.reason is Reason.NOT_SUPPORTED and "Hopper or newer" in reading.detail
    assert clock.sleeps == []  # nothing to wait for
    assert calls["nvmlGpmQueryDeviceSupport"] == 1 and calls["nvmlGpmSampleGet"] == 0


def test_each_metric_has_its_own_status() -> None:
    """A GPU without NVLink: NVML answers the NVLink metrics with an error, the rest with figures."""
    machine = load(BUSY)[0]
    gpu = machine.gpus[0]
    assert gpu.profiling.value is not None
    no_links = msgspec.structs.replace(
        gpu.profiling.value,
        nvlink_tx_bytes_per_s=Reading.missing(Reason.NOT_SUPPORTED),
        nvlink_rx_bytes_per_s=Reading.missing(Reason.NOT_SUPPORTED),
    )
    machine = msgspec.structs.replace(
        machine, gpus=(msgspec.structs.replace(gpu, profiling=Reading.of(no_links)), *machine.gpus[1:])
    )
    with session(machine, Clock(), wait=True) as s:
        reading = figures(s)[0].value
    assert reading is not None
    assert reading.nvlink_tx_bytes_per_s.reason is Reason.NOT_SUPPORTED
    assert reading.sm_active_percent == Reading.of(88.0)


def test_a_driver_without_gpm_says_so() -> None:
    machine = load(BUSY)[0]
    machine = msgspec.structs.replace(
        machine, nvml=msgspec.structs.replace(machine.nvml, functions_missing=("nvmlGpmQueryDeviceSupport",))
    )
    with session(machine, Clock(), wait=True) as s:
        reading = figures(s)[0]
        missing = s.read_gpus(PROFILING) and s.info.functions_missing
    assert reading.reason is Reason.FUNCTION_NOT_FOUND
    assert "nvmlGpmQueryDeviceSupport" in missing


def test_a_gpu_lost_while_sampling_is_lost() -> None:
    from tests.test_export_exporter import lose

    machine = load(BUSY)[0]
    clock = Clock()
    with session(machine, clock, wait=False, window_s=1.0) as s:
        figures(s)
        s.lib.set_machine(lose(machine, 3))
        clock.now += 15
        gpus = s.read_gpus(PROFILING)
    assert gpus[3].state.value == "lost" and gpus[2].profiling.value is not None


# --- the fake NVML's GPM calls, as nvidia-ml-py declares them ---------------------------------


def test_the_fake_answers_gpm_with_nvidia_ml_pys_types_and_errors() -> None:
    fake = FakeNvml(load(BUSY)[0])
    fake.nvmlInit()
    h0, h1 = FakeHandle(0), FakeHandle(1)
    support = fake.nvmlGpmQueryDeviceSupport(h0)
    assert isinstance(support, pynvml.c_nvmlGpmSupport_t) and support.isSupportedDevice == 1
    first, second, other = fake.nvmlGpmSampleAlloc(), fake.nvmlGpmSampleAlloc(), fake.nvmlGpmSampleAlloc()
    assert isinstance(first, pynvml.c_nvmlGpmSample_t)
    fake.nvmlGpmSampleGet(h0, first)
    fake.nvmlGpmSampleGet(h0, second)
    fake.nvmlGpmSampleGet(h1, other)
    query = pynvml.c_nvmlGpmMetricsGet_t()
    query.version, query.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, 3
    query.sample1, query.sample2 = first, second
    for slot, metric in zip(query.metrics, (pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                                            pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                                            pynvml.NVML_GPM_METRIC_NVDEC_0_UTIL), strict=False):  # fmt: skip
        slot.metricId = metric
    fake.nvmlGpmMetricsGet(query)
    assert (query.metrics[0].nvmlReturn, query.metrics[0].value) == (pynvml.NVML_SUCCESS, 47.5)  # percent
    assert (query.metrics[1].nvmlReturn, query.metrics[1].value) == (pynvml.NVML_SUCCESS, 1150.0)  # MiB/s
    assert query.metrics[2].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED  # a metric the model does not keep
    query.sample2 = other  # two GPUs' samples
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlGpmMetricsGet(query)
    query.sample2, query.version = second, 99
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlGpmMetricsGet(query)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # a MIG device's handle: whole GPUs only
        fake.nvmlGpmSampleGet(FakeHandle(0, 1), first)
    for sample in (first, second, other):
        fake.nvmlGpmSampleFree(sample)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlGpmSampleFree(first)  # freed already
    unknown = pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlGpmSampleGet(h0, unknown)  # not from nvmlGpmSampleAlloc
    assert ctypes.sizeof(pynvml.struct_c_nvmlGpmSample_t) == 0  # opaque, as in NVML


def test_the_gpm_metrics_are_nvmls_and_dcgms() -> None:
    """The metric ids are nvidia-ml-py's, and the ones DCGM reads for its profiling fields on Hopper
    (dcgm_fields.cpp, DcgmFieldIdToNvmlGpmMetricId)."""
    named = {
        "graphics_active_percent": "GRAPHICS_UTIL",
        "sm_active_percent": "SM_UTIL",
        "sm_occupancy_percent": "SM_OCCUPANCY",
        "tensor_active_percent": "ANY_TENSOR_UTIL",
        "fp64_active_percent": "FP64_UTIL",
        "fp32_active_percent": "FP32_UTIL",
        "fp16_active_percent": "FP16_UTIL",
        "dram_active_percent": "DRAM_BW_UTIL",
        "pcie_tx_bytes_per_s": "PCIE_TX_PER_SEC",
        "pcie_rx_bytes_per_s": "PCIE_RX_PER_SEC",
        "nvlink_tx_bytes_per_s": "NVLINK_TOTAL_TX_PER_SEC",
        "nvlink_rx_bytes_per_s": "NVLINK_TOTAL_RX_PER_SEC",
    }
    assert {name: metric for name, metric, _ in GPM_METRICS} == {
        name: getattr(pynvml, f"NVML_GPM_METRIC_{nvml}") for name, nvml in named.items()
    }
    assert {name: factor for name, _, factor in GPM_METRICS if factor != 1} == {
        name: MIB for name in named if name.endswith("_per_s")
    }


# --- recording GPM on a GPU machine, and the capture tool reading it -----------------------------


def test_the_gpm_recording_is_read_back_by_the_capture_tool(tmp_path: Any) -> None:
    """``python -m tests.hardware.capture --record-gpm`` (run on the GPU machine) records what NVML's
    GPM answered; the capture tool answers GPM from it, and says "not recorded" without it. Recorded
    here from the fake NVML, as the real one is recorded on hardware."""
    import json
    import shutil

    from tests.hardware import capture

    machine = load(BUSY)[0]
    recorded = capture.record_gpm(FakeNvml(machine), window_s=0.0)
    assert recorded["nvmlGpmQueryDeviceSupport"] == {"ok": {"isSupportedDevice": 1}}
    assert recorded["nvmlGpmMetricsGet"][str(pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL)] == {"ok": 47.5}
    assert set(recorded["nvmlGpmMetricsGet"]) == {str(metric) for _, metric, _ in GPM_METRICS}
    folder = tmp_path / capture.CAPTURE_DIR.name  # a copy of the H100's capture: its nvidia-smi supplements apply
    folder.mkdir()
    for name in ("nvml-getters-busy.json", "gpudiag-snapshot-busy.json"):
        shutil.copy(capture.CAPTURE_DIR / name, folder / name)
    without, unanswered = capture.build("busy", folder)
    assert without.gpus[0].profiling.reason is Reason.NOT_RECORDED and unanswered == []
    (folder / capture.GPM_CAPTURE.format(moment="busy")).write_text(json.dumps(recorded))
    read, unanswered = capture.build("busy", folder)
    profiling = read.gpus[0].profiling.value
    assert unanswered == [] and profiling is not None
    assert profiling.tensor_active_percent == Reading.of(47.5)
    assert profiling.nvlink_rx_bytes_per_s == Reading.of(45_500.0 * MIB)
    assert "nvmlGpmQueryDeviceSupport" not in read.nvml.functions_missing
    older = capture.record_gpm(FakeNvml(load("a100-ecc-errors")[0]), window_s=0.0)
    assert older == {
        "window_s": 0.0,
        "nvmlGpmMetricsGet": {},
        "nvmlGpmQueryDeviceSupport": {"ok": {"isSupportedDevice": 0}},
    }


def test_list_json_does_not_wait_for_gpm_and_its_details_do(cli: Cli) -> None:
    """`list --json` leaves GPM out (its one-shot read waits a window); `--details` and `snapshot` read it."""
    import json

    plain = json.loads(cli("--replay", BUSY, "list", "--json")[1])
    assert plain["gpus"][0]["profiling"] == {"unavailable": "not_read"}
    detailed = json.loads(cli("--replay", BUSY, "list", "--json", "--details")[1])
    assert detailed["gpus"][0]["profiling"]["tensor_active_percent"] == 47.5
    snapshot = json.loads(cli("--replay", BUSY, "snapshot")[1])
    assert snapshot["gpus"][0]["profiling"]["window_s"] == gpm.ONE_SHOT_WINDOW_S


@pytest.mark.parametrize(
    ("options", "reads_gpm"),
    [
        ({"json_output": True}, False),
        ({"json_output": True, "details": True}, True),
        ({"details": True}, False),  # -q does not show GPM
        ({"details": True, "xml": True}, False),  # nor does -q -x
        ({"details": True, "display": "MEMORY"}, False),
    ],
)
def test_only_list_json_details_reads_gpm(options: dict[str, Any], reads_gpm: bool) -> None:
    """GPM's one-shot read waits a window: list reads it only where it shows it (`--json --details`)."""
    from gpudiag.cli.list_modes import Request, view_for

    view = view_for(Request(**options))
    assert (FactGroup.PROFILING in view.facts) is reads_gpm
    assert FactGroup.DETAILS in view.facts or not options.get("details")  # the rest of -q is still read


def test_a_replay_reports_each_gpus_recorded_window_exactly(tmp_path: Any) -> None:
    """A live one-shot read measures its window (0.100074 s on the H200, tests/test_gpu_live.py); the
    replay of that snapshot reads back the same window, each GPU its own, not the 0.1 s asked for."""
    machine = load(BUSY)[0]
    windows = [round(0.100074 + i * 0.000013, 6) for i in range(len(machine.gpus))]
    gpus = []
    for gpu, window in zip(machine.gpus, windows, strict=True):
        recorded = gpu.profiling.value
        assert recorded is not None
        gpus.append(
            msgspec.structs.replace(gpu, profiling=Reading.of(msgspec.structs.replace(recorded, window_s=window)))
        )
    path = tmp_path / "live.json"
    path.write_text(dump(msgspec.structs.replace(machine, gpus=tuple(gpus)), "a live snapshot"))
    replayed = collect(str(path), facts=PROFILING)
    got = [g.profiling.value.window_s if g.profiling.value is not None else None for g in replayed.gpus]
    assert got == windows
    # Read twice in one session (a watch), the second window is the recorded one again.
    with open_source(str(path), facts=PROFILING) as source:
        source.read()
        again = source.read().gpus[0].profiling.value
    assert again is not None and again.window_s == windows[0]
