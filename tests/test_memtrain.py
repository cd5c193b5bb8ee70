"""Memory during training: fragmentation, steps, ranks, time to OOM, the OOM post-mortem, the picture.

The tracker runs against the stand-in CUDA torch (tests/torch_standin.py), which replays allocator
statistics and segments in the shape a CUDA build returns; the shipped training examples are
what the real tracker published for those states (tests/training_runs.py).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from gpudiag import track
from gpudiag.cli import memory_cmd
from gpudiag.exitcodes import ExitCode
from gpudiag.memory import forecast as memory_forecast
from gpudiag.memory.build import breakdown, build
from gpudiag.memory.state import WatchState
from gpudiag.memory.tracked import recording_for
from gpudiag.memory.view import MemoryView
from gpudiag.replay.fixtures import load
from gpudiag.track import allocator, entries
from gpudiag.track.oom import MAX_REPORTS, Recorder
from gpudiag.track.report import summary_lines
from gpudiag.track.steps import StepLog
from gpudiag.trend import duration_text, sustained_growth
from gpudiag.units import parse_duration
from tests import training_runs
from tests.conftest import Cli, skip_without_torch
from tests.torch_standin import Device, StandInTorch, memory_stats_from_segments, segment

MiB, GiB = 1024**2, 1024**3
ROOT = Path(__file__).resolve().parent.parent
OOM_EXAMPLE = training_runs.OOM_EXAMPLE


@pytest.fixture(autouse=True)
def no_tracker_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(entries.DIR_ENV, raising=False)


class FakeClock:
    """The watch's clock: sleeping passes time at once."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def instant(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(memory_cmd, "CLOCK", memory_cmd.Clock(clock.now, clock.sleep, clock.now))


# --- the examples are what the tracker writes -----------------------------------------


def test_the_shipped_training_examples_are_what_the_tracker_publishes() -> None:
    """Regenerated from the allocator states through the real tracker; `python -m tests.training_runs` rewrites."""
    for path, text in training_runs.files().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: python -m tests.training_runs"


def test_the_allocator_example_is_in_cudas_shape_and_gives_the_recorded_figures() -> None:
    data = json.loads((ROOT / "gpudiag/machines/allocator/h100-fragmented.json").read_text())
    stats, segments = data["memory_stats"]["0"], data["memory_snapshot"]
    for name in ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes", "segment"):
        for pool in ("all", "large_pool", "small_pool"):
            assert {f"{name}.{pool}.{m}" for m in ("current", "peak", "allocated", "freed")} <= stats.keys()
    assert {"num_alloc_retries", "num_ooms", "max_split_size"} <= stats.keys()
    assert {"device", "address", "total_size", "stream", "segment_type", "segment_pool_id", "blocks"} <= segments[
        0
    ].keys()
    assert {"address", "size", "requested_size", "state", "frames"} <= segments[0]["blocks"][0].keys()
    figures = allocator.device_figures(stats)
    summary = allocator.segment_summary(segments)[0]
    free = [b["size"] for s in segments for b in s["blocks"] if b["state"] == "inactive"]
    assert summary["largest_free_block_bytes"] == max(free) and summary["free_blocks"] == len(free)
    assert figures["reserved_bytes"] == sum(s["total_size"] for s in segments)
    entry = recording_for("h100-fragmented")
    assert entry is not None
    dev = entry.entries()[7311].devices[0]
    assert dev.inactive_split_bytes == figures["inactive_split_bytes"] and dev.alloc_retries == 37
    assert dev.largest_free_block_bytes == summary["largest_free_block_bytes"]


# --- the tracker in the program -------------------------------------------------------


def standin(**kw: Any) -> StandInTorch:
    segs = [segment(0x1000, [("active_allocated", 3 * GiB), ("inactive", GiB), ("active_allocated", GiB)])]
    segs.append(segment(0x200000000, [("inactive", 512 * MiB)]))
    return StandInTorch(
        [Device("NVIDIA H100 80GB HBM3", "8e1f2a6c-4b7d", 0x18, memory_stats_from_segments(segs), segs)], **kw
    )


def test_device_figures_split_what_empty_cache_returns_from_what_it_cannot() -> None:
    torch = standin()
    fig = allocator.device_figures(torch.cuda.memory_stats(0))
    assert fig["inactive_split_bytes"] == GiB and fig["segments"] == 2 and fig["active_bytes"] == 4 * GiB
    dev = entries.parse_entry({**_entry(), "devices": [{**_device(), **fig}]})
    assert dev is not None
    b = breakdown(None, dev.devices[0])
    assert b.releasable_bytes == 512 * MiB  # the whole free segment; the split GiB stays
    assert b.fragmentation_percent == pytest.approx(100 * GiB / (5.5 * GiB))


def test_an_allocator_without_the_new_counters_reports_none_not_zero() -> None:
    fig = allocator.device_figures({"allocated_bytes.all.current": 5, "reserved_bytes.all.current": 9})
    assert fig["inactive_split_bytes"] is None and fig["reserved_bytes"] == 9


def test_only_free_blocks_of_large_default_pool_segments_count() -> None:
    small = {**segment(0, [("inactive", 8 * GiB)]), "segment_type": "small"}
    graph = {**segment(0, [("inactive", 9 * GiB)]), "segment_pool_id": (1, 0)}
    other_device = segment(0, [("inactive", 7 * GiB)], device=1, expandable=True)
    found = allocator.segment_summary([small, graph, segment(0, [("inactive", GiB)]), other_device])
    assert found[0]["largest_free_block_bytes"] == GiB and found[0]["expandable"] is False
    assert found[1]["largest_free_block_bytes"] == 7 * GiB and found[1]["expandable"] is True


def test_an_older_torch_without_include_traces_still_gives_segments() -> None:
    torch = SimpleNamespace(cuda=SimpleNamespace(memory_snapshot=lambda: [segment(0, [("inactive", GiB)])]))
    assert allocator.segment_summary(allocator.take_segments(torch))[0]["largest_free_block_bytes"] == GiB


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "abc"}, (3, 1, 8, "torchrun:abc")),
        (
            {
                "RANK": "0",
                "WORLD_SIZE": "2",
                "TORCHELASTIC_RUN_ID": "none",
                "MASTER_ADDR": "n1",
                "MASTER_PORT": "29500",
            },
            (0, None, 2, "n1:29500"),
        ),
        ({"SLURM_JOB_ID": "4711", "RANK": "x"}, (None, None, None, "slurm:4711")),
        ({}, (None, None, None, None)),
    ],
)
def test_rank_info_from_the_launchers_environment(env: dict[str, str], expected: tuple[Any, ...]) -> None:
    info = allocator.rank_info(env)
    assert (info["rank"], info["local_rank"], info["world_size"], info["job"]) == expected


def test_rank_from_an_initialised_process_group() -> None:
    dist = SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda: 5, get_world_size=lambda: 6
    )
    assert allocator.rank_info({}, SimpleNamespace(distributed=dist))["rank"] == 5


def test_steps_are_counted_always_and_read_at_most_every_50_ms() -> None:
    torch, log = standin(), StepLog()
    now = [100.0]
    clock = SimpleNamespace(monotonic=lambda: now[0], time=lambda: now[0])
    for _ in range(10):  # 10 steps in 10 ms: one read
        log.step(torch, clock=clock)
        now[0] += 0.001
    assert log.count == 10 and len(log.records) == 1
    now[0] += 0.1
    log.reset_peak = True
    log.step(torch, 42, clock=clock)
    assert log.count == 42 and len(log.records) == 2 and torch.peak_resets == [0]
    published = log.published()
    assert published is not None and published["peaks"] == "per_record"
    assert published["records"][-1][:3] == [42, now[0], 0]


def test_step_never_raises_and_starts_the_tracker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(entries.DIR_ENV, str(tmp_path / "t"))
    monkeypatch.setattr(track, "_started_once", False)
    broken = SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: 1 / 0))
    monkeypatch.setitem(sys.modules, "torch", broken)
    try:
        track.step()
        assert track.running()
    finally:
        track.stop()


def _entry() -> dict[str, Any]:
    return {"schema": entries.SCHEMA, "pid": 1, "command": "x", "updated_at": 1.0, "devices": []}


def _device() -> dict[str, Any]:
    return {"torch_index": 0, "uuid": "u", "allocated_bytes": 0, "reserved_bytes": 0, "peak_allocated_bytes": 0}


# --- the OOM post-mortem ---------------------------------------------------------------


def recorder(torch: StandInTorch, tmp_path: Path, err: io.StringIO) -> Recorder:
    def entry() -> dict[str, Any]:
        data = track.snapshot(torch)
        data.update(rank=0, world_size=1)
        return data

    steps = {
        "count": 9,
        "first_at": 1.0,
        "peaks": "running",
        "records": [[s, 1.0 + s, 0, s * GiB, 0, s * GiB] for s in range(1, 10)],
    }
    return Recorder(
        entry,
        lambda: {"recent": [], "steps": steps, "peers": []},
        lambda: None,
        {"GPUDIAG_OOM_DIR": str(tmp_path)},
        err,
    )


def test_the_oom_observer_writes_a_private_post_mortem_and_says_it_in_three_lines(tmp_path: Path) -> None:
    torch, err = standin(), io.StringIO()
    rec = recorder(torch, tmp_path, err)
    assert rec.attach(torch) and torch.observers == [rec.observe]
    torch.oom(0, 2 * GiB, 80 * GiB, GiB)  # as the allocator calls it: device, size, total, free
    (path,) = tmp_path.glob("gpudiag-oom-*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["schema"] == "gpudiag.oom/1" and doc["trigger"] == "observer"
    assert doc["oom"] == {
        "torch_index": 0,
        "requested_bytes": 2 * GiB,
        "device_total_bytes": 80 * GiB,
        "device_free_bytes": GiB,
    }
    assert doc["devices"][0]["largest_free_block_bytes"] == GiB and doc["devices"][0]["ooms"] == 1
    assert doc["torch_snapshot"] is None  # no history recorded: its traces are empty
    lines = err.getvalue().splitlines()
    assert len(lines) == 4 and f"post-mortem in {path}" in lines[0] and "gpudiag memory --postmortem" in lines[0]
    assert "asked for 2.0 GiB with 1.0 GiB free of 80.0 GiB" in lines[0]
    assert "Largest holders" in lines[1] and "Fragmentation" in lines[2] and "grew 1.0 GiB per step" in lines[3]
    rec.complete(lambda: {"gpus": [], "processes": []})
    assert json.loads(path.read_text())["machine"] == {"gpus": [], "processes": []}
    rec.enabled = False
    torch.oom(0, GiB, 80 * GiB, GiB)
    assert len(list(tmp_path.glob("gpudiag-oom-*.json"))) == 1  # stopped: the observer does nothing


def test_with_memory_history_the_snapshot_is_kept_and_extracted_for_memory_viz(tmp_path: Path, cli: Cli) -> None:
    torch, err = standin(), io.StringIO()
    torch.traces[0] = [
        {
            "action": "alloc",
            "addr": 1,
            "size": 512,
            "stream": 0,
            "frames": [{"filename": "t.py", "line": 3, "name": "f"}],
        }
    ]
    rec = recorder(torch, tmp_path, err)
    rec.attach(torch)
    torch.oom(0, 2 * GiB, 80 * GiB, GiB)
    (path,) = tmp_path.glob("gpudiag-oom-*.json")
    out = tmp_path / "oom.pickle"
    code, shown, stderr = cli("memory", "--postmortem", str(path), "--torch-snapshot", str(out))
    assert code == 0 and "PyTorch's memory history is in it (1 events)" in shown and "memory_viz" in stderr
    snap = pickle.loads(out.read_bytes())
    assert snap["device_traces"][0][0]["action"] == "alloc" and snap["segments"][0]["blocks"]


def test_without_the_observer_hook_the_count_rising_writes_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch, err = standin(observer_hook=False), io.StringIO()
    rec = recorder(torch, tmp_path, err)
    monkeypatch.setattr(track, "_recorder", rec)
    monkeypatch.setattr(track, "_ooms_seen", {})
    monkeypatch.setattr(track, "_machine_view", lambda own=None: {"unavailable": "test"})
    entry = track.snapshot(torch)
    track._after_sample(torch, tmp_path, entry)
    assert not rec.attach(torch) and not list(tmp_path.glob("gpudiag-oom-*"))
    torch.devices[0].stats["num_ooms"] = 1
    track._after_sample(torch, tmp_path, track.snapshot(torch))
    (path,) = tmp_path.glob("gpudiag-oom-*.json")
    doc = json.loads(path.read_text())
    assert doc["trigger"] == "oom_count" and doc["machine"] == {"unavailable": "test"}
    assert "the size asked is not known" in summary_lines(doc)[0]


def test_a_program_that_keeps_running_out_writes_at_most_three(tmp_path: Path) -> None:
    torch, err = standin(), io.StringIO()
    rec = recorder(torch, tmp_path, err)
    rec.attach(torch)
    for _ in range(MAX_REPORTS + 2):
        torch.oom(0, GiB, 80 * GiB, 0)
    assert len(list(tmp_path.glob("gpudiag-oom-*.json"))) == MAX_REPORTS


def test_a_read_only_working_directory_falls_back_to_the_trackers(tmp_path: Path) -> None:
    torch = standin()
    fallback = tmp_path / "private"
    fallback.mkdir()
    rec = Recorder(
        lambda: track.snapshot(torch), lambda: {}, lambda: fallback, {"GPUDIAG_OOM_DIR": "/proc/nope"}, io.StringIO()
    )
    rec.attach(torch)
    torch.oom(0, GiB, 80 * GiB, 0)
    assert len(list(fallback.glob("gpudiag-oom-*.json"))) == 1


def test_the_example_post_mortem_explained(cli: Cli) -> None:
    code, out, _ = cli("memory", "--postmortem", str(OOM_EXAMPLE.relative_to(ROOT)), width=200)
    assert code == 0
    assert "CUDA out of memory in PID 4242 on cuda:0: asked for 2.0 GiB with 1.5 GiB free of 79.6 GiB" in out
    assert "Largest holders on that GPU (NVML 0.0 s after the OOM): PID 4242 (this process)" in out
    assert "Not fragmentation" in out and "grew 48.0 MiB per step" in out
    assert "Last steps (of 629)" in out


def test_fragmentation_is_named_when_the_largest_block_is_smaller_than_the_request() -> None:
    doc = {
        "oom": {"torch_index": 0, "requested_bytes": 2 * GiB, "device_free_bytes": 0},
        "devices": [
            {
                "torch_index": 0,
                "reserved_bytes": 70 * GiB,
                "allocated_bytes": 40 * GiB,
                "inactive_split_bytes": 29 * GiB,
                "largest_free_block_bytes": GiB,
            }
        ],
    }
    line = summary_lines(doc)[2]
    assert line.startswith("Fragmentation caused it") and "expandable_segments:True" in line
    doc["alloc_conf"] = "expandable_segments:True"
    assert "expandable_segments:True lets" not in summary_lines(doc)[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--postmortem", "missing.json"], "no such file"),
        (["--postmortem", "pyproject.toml"], "not JSON"),
        (["--postmortem", "gpudiag/machines/h100-fragmented.json"], "schema is 'gpudiag.machine/1'"),
        (["--torch-snapshot", "x.pickle"], "--postmortem FILE or --plot LOG"),
        (["--plot", "x.csv", "--torch-snapshot", "y"], "--torch-snapshot goes with --postmortem"),
    ],
)
def test_offline_modes_say_what_is_wrong(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("memory", *args)
    assert code == ExitCode.USAGE and message in err


def test_a_post_mortem_without_history_has_no_snapshot_to_extract(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("memory", "--postmortem", str(OOM_EXAMPLE), "--torch-snapshot", str(tmp_path / "x.pickle"))
    assert code == ExitCode.FAILED and "_record_memory_history" in err


# --- the views ------------------------------------------------------------------------


def test_the_fragmented_example_says_why_and_what_to_set(cli: Cli) -> None:
    code, out, _ = cli("--replay", "h100-fragmented", "memory", width=200)
    assert code == 0
    assert "PyTorch per process (gpudiag.track)" in out
    assert "is free but split inside segments that hold tensors; the largest free block is 768.0 MiB" in out
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True grows segments in place" in out
    assert "empty_cache() would return 2.2 GiB (26.0 GiB more is free but split inside segments in use)" in out
    data = json.loads(cli("--replay", "h100-fragmented", "memory", "--json")[1])
    torch = data["processes"][0]["torch"]
    assert torch["fragmentation_percent"] > 30 and torch["largest_free_block_bytes"] == 768 * MiB
    assert any("fragmentation" in line for line in data["insights"])


def test_ranks_are_grouped_and_the_imbalances_named(cli: Cli) -> None:
    code, out, _ = cli("--replay", "h100x8-ranks-imbalance", "memory", width=200)
    assert code == 0
    assert "torch.cuda.set_device(local_rank)" in out and "rank 1 PID 6101, rank 2 PID 6102, rank 3 PID 6103" in out
    assert "Rank 0 (PID 6100, GPU 0) holds 61.6 GiB, 12.0 GiB more than the median rank of job torchrun:7f3a9c" in out
    assert "12.0 GiB of it is tensors" in out
    assert "PID 7400 holds 28.6 GiB on GPU 4" in out and "DataParallel" in out
    assert "PID 6101 holds" not in out  # a context on GPU 0 is not DataParallel's pattern
    data = json.loads(cli("--replay", "h100x8-ranks-imbalance", "memory", "--json")[1])
    ranks = [
        (p["pid"], p["rank"]["rank"]) for p in data["processes"] if p["rank"] and p["gpu_index"] == p["rank"]["rank"]
    ]
    assert ranks == [(6100, 0), (6101, 1), (6102, 2), (6103, 3)]
    assert data["processes"][0]["rank"]["job"] == "torchrun:7f3a9c"


def test_the_watch_on_the_leaking_example_forecasts_the_oom_before_it_happens(cli: Cli, instant: None) -> None:
    recording = recording_for("h100-leak-per-step")
    assert recording is not None
    oom_at = next(f.at for f in recording.frames if f.track[0]["devices"][0]["ooms"])
    code, out, err = cli("--replay", "h100-leak-per-step", "memory", "--alert-oom-within", "5m", "--json")
    assert code == ExitCode.FAILED
    assert err.startswith("gpudiag: alert: PID 4242 on GPU 0 forecast out of memory in ~2m")
    assert "grows 48.0 MiB per step" in err and "(within 5m00s)" in err
    last = json.loads(out.splitlines()[-1])
    seen_at = last["timestamp"] - recording.header.started_at
    forecast = last["processes"][0]["forecast"]
    assert seen_at < 10 < oom_at  # it fired within seconds of the start, minutes before the OOM
    assert abs(seen_at + forecast["full_in_s"] - oom_at) < 0.1 * oom_at  # and said when, within 10 %


def test_the_gpu_forecast_from_nvml_alone_and_the_oom_event(cli: Cli, instant: None) -> None:
    code, out, _ = cli("--replay", "h100-leak-per-step", "memory", "--count", "80", "--json")
    samples = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    gpu = [s["gpus"][0]["forecast"] for s in samples]
    assert gpu[:7] == [None] * 7 and gpu[8] is not None and gpu[8]["basis"] == "samples"
    assert samples[-1]["processes"][0]["oom_reports"] == [str(OOM_EXAMPLE.relative_to(ROOT))]
    code, out, _ = cli("--replay", "h100-leak-per-step", "memory", "--count", "80", width=160)
    last = out.split("\n\nreplay:")[-1]
    assert "ran out of memory on GPU 0 post-mortem: docs/samples/oom/" in last
    assert "Full in" in last


def test_a_ramp_that_levels_off_forecasts_nothing() -> None:
    ramp = [(float(t), float(min(t, 10) * GiB)) for t in range(30)]
    assert sustained_growth(ramp) is None
    leak = [(float(t), float(t * GiB + (t % 3) * 100 * MiB)) for t in range(30)]
    growth = sustained_growth(leak)
    assert growth is not None and growth.per_x == pytest.approx(GiB, rel=0.05)


def test_durations() -> None:
    assert [parse_duration(x) for x in ("90", "90s", "10m", "1.5h")] == [90, 90, 600, 5400]
    for bad in ("0", "-1m", "10x", "nan", ""):
        with pytest.raises(Exception, match="duration"):
            parse_duration(bad)
    assert [duration_text(s) for s in (45, 250, 7500, 200000)] == ["45s", "4m10s", "2h05m", "2d7h"]


def test_metrics_carry_fragmentation_and_forecasts() -> None:
    from gpudiag.export.metrics_native import families

    def samples(view: MemoryView) -> dict[str, list[tuple[tuple[str, ...], float]]]:
        return {f.name: list(f.rows) for f in families(view)}

    machine = load("h100-fragmented")[0]
    recording = recording_for("h100-fragmented")
    assert recording is not None
    found = samples(build(recording.apply(machine), recording.entries()))
    assert found["gpudiag_process_torch_largest_free_block_bytes"][0][1] == 768 * MiB
    assert found["gpudiag_process_torch_inactive_split_bytes"][0][1] > 20 * GiB
    recording = recording_for("h100-leak-per-step")
    assert recording is not None
    base = load("h100-leak-per-step")[0]
    state = WatchState()
    for _ in range(memory_forecast.MIN_SAMPLES):
        view = state.update(build(recording.apply(base), recording.entries()), recording.wall())
        recording.advance()
    found = samples(view)
    assert found["gpudiag_process_memory_growth_per_step_bytes"][0][1] == pytest.approx(48 * MiB)
    assert 100 < found["gpudiag_process_memory_full_in_seconds"][0][1] < 200
    ((labels, value),) = found["gpudiag_gpu_memory_full_in_seconds"]
    assert labels[0] == "0" and 100 < value < 200


def test_an_older_csv_log_keeps_its_columns(cli: Cli, instant: None, tmp_path: Path) -> None:
    from gpudiag.render.memory_view import CSV_HEADER_V1

    log = tmp_path / "old.csv"
    log.write_text(",".join(CSV_HEADER_V1) + "\n")
    code, _, _ = cli("--replay", "h100-leak-per-step", "memory", "--count", "2", "--log", str(log))
    rows = log.read_text().splitlines()
    assert code == 0 and len(rows) == 3 and {len(r.split(",")) for r in rows} == {len(CSV_HEADER_V1)}


# --- the picture ----------------------------------------------------------------------


@pytest.fixture
def leak_log(cli: Cli, instant: None, tmp_path: Path) -> Path:
    log = tmp_path / "run.jsonl"
    code, _, _ = cli("--replay", "h100-leak-per-step", "memory", "--count", "80", "--log", str(log), "--json")
    assert code == 0
    return log


@pytest.mark.slow
def test_the_picture_of_a_run_is_one_offline_svg(cli: Cli, leak_log: Path) -> None:
    pytest.importorskip("matplotlib")
    code, _, err = cli("memory", "--plot", str(leak_log))
    svg = leak_log.with_suffix(".svg")
    assert code == 0 and err == f"gpudiag: wrote {svg}\n"
    text = svg.read_text()
    tree = ET.fromstring(text)
    assert tree.tag.endswith("svg")
    assert "<script" not in text and "<image" not in text and 'href="http' not in text  # nothing to fetch
    for label in (
        "GPU 0 used",
        "GPU 0 PyTorch reserved",
        "PID 4242 on GPU 0",
        "steps/s",
        "out of memory",
        "allocator retry",
    ):
        assert label in text, label
    cli("memory", "--plot", str(leak_log), "-o", str(leak_log.with_name("again.svg")))
    assert leak_log.with_name("again.svg").read_text() == text  # the same log draws the same file


@pytest.mark.slow
def test_the_picture_as_html_and_png_and_from_csv(cli: Cli, instant: None, leak_log: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    html = tmp_path / "run.html"
    assert cli("memory", "--plot", str(leak_log), "--output", str(html))[0] == 0
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "<script" not in page
    png = tmp_path / "run.png"
    assert cli("memory", "--plot", str(leak_log), "-o", str(png))[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv_log = tmp_path / "run.csv"
    cli("--replay", "h100-leak-per-step", "memory", "--count", "80", "--log", str(csv_log), "--json")
    assert cli("memory", "--plot", str(csv_log))[0] == 0
    assert "out of memory" in csv_log.with_suffix(".svg").read_text()


def test_a_log_that_is_not_one_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": "gpudiag.check/1"}\n')
    code, _, err = cli("memory", "--plot", str(bad))
    assert code == ExitCode.USAGE and "bad.jsonl:1: not a gpudiag.memory sample" in err
    code, _, err = cli("memory", "--plot", str(tmp_path / "x.jsonl"), "-o", str(tmp_path / "x.gif"))
    assert code == ExitCode.USAGE


def test_without_matplotlib_the_plot_says_how_to_get_it(
    cli: Cli, leak_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = cli("memory", "--plot", str(leak_log))
    assert code == ExitCode.FAILED and "pip install 'gpudiag[plot]'" in err


# --- callbacks and a real training loop ------------------------------------------------


def test_lightning_and_hugging_face_callbacks_mark_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    class Callback:  # what lightning.pytorch.Callback is to the Trainer: a base with every hook
        pass

    lightning = ModuleType("lightning.pytorch")
    lightning.Callback = Callback  # type: ignore[attr-defined]
    transformers = ModuleType("transformers")
    transformers.TrainerCallback = Callback  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning.pytorch", lightning)
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    marked: list[int | None] = []
    monkeypatch.setattr(track, "step", marked.append)
    monkeypatch.setattr(track, "start", lambda interval=2.0: True)
    cb = track.lightning_callback()
    assert isinstance(cb, Callback)
    cb.on_fit_start(None, None)
    cb.on_train_batch_end(SimpleNamespace(global_step=7), None, None, None, 0)
    hf = track.hf_callback(per_step_peaks=True)
    hf.on_train_begin(None, None, None)
    hf.on_step_end(None, SimpleNamespace(global_step=8), None)
    assert marked == [7, 8] and isinstance(hf, Callback) and track._steps.reset_peak
    track.per_step_peaks(False)


def test_a_callback_without_its_framework_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("lightning.pytorch", "pytorch_lightning", "lightning"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"lightning\.pytorch or pytorch_lightning"):
        track.lightning_callback()


@pytest.mark.slow
def test_a_cpu_training_loop_publishes_its_steps(tmp_path: Path) -> None:
    """The real CPU torch: step() counts and times steps; with no CUDA there is no allocator to read."""
    skip_without_torch()
    script = tmp_path / "train.py"
    script.write_text(
        "import json, os, time, torch\n"
        "import gpudiag.track\n"
        "model = torch.nn.Linear(32, 4)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x, y = torch.randn(64, 32), torch.randn(64, 4)\n"
        "for _ in range(200):\n"
        "    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()\n"
        "    gpudiag.track.step()\n"
        "print(json.dumps(gpudiag.track.snapshot()))\n"
    )
    env = {**os.environ, entries.DIR_ENV: str(tmp_path / "track"), "RANK": "0", "WORLD_SIZE": "1"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout)
    assert entry["steps"]["count"] == 200 and entry["steps"]["records"] == [] and entry["rank"] == 0
    assert entry["oom_observer"] is False  # a CPU build has no allocator to observe
