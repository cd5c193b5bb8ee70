"""`gpudiag memory`: one-shot views, the allocator breakdown, and the watch loop over changing machines."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from gpudiag import memory, watch
from gpudiag.exitcodes import ExitCode
from gpudiag.model import GpuState, Machine, Memory, Reading
from gpudiag.testing.fixtures import load
from gpudiag.track import TrackedDevice, TrackedProcess
from tests.conftest import Cli

MiB = 1024 * 1024


def test_one_shot_table_and_shares(cli: Cli) -> None:
    code, out, _ = cli("--replay", "v100x4-tutorial", "memory", width=140)
    assert code == 0
    assert "10955MiB / 16130MiB" in out
    assert "67.8%" in out  # 10944 MiB of 16130 MiB
    assert "Total: 29744MiB used of 64520MiB" in out


def test_other_namespace_processes_are_said_so(cli: Cli) -> None:
    _, out, _ = cli("--replay", "container-pids", "memory", width=140)
    assert "host PID: not visible in this container" in out
    assert "belong to the host's PID namespace" in out


def test_json_is_versioned(cli: Cli) -> None:
    code, out, _ = cli("--replay", "a100-mig", "memory", "--json", "--id", "0")
    data = json.loads(out)
    assert code == 0 and data["schema"] == "gpudiag.memory/1"
    assert [m["gpu_instance_id"] for m in data["gpus"][0]["mig_devices"]] == [1, 5, 13]
    assert data["processes"][0]["used_bytes"] == 4096 * MiB


def test_breakdown_of_a_tracked_process() -> None:
    machine = load("v100x4-tutorial")[0]
    uuid = machine.gpus[0].uuid.value
    assert uuid is not None
    device = TrackedDevice(0, uuid.removeprefix("GPU-"), 8000 * MiB, 10000 * MiB, 9000 * MiB, 10500 * MiB, 2, 1)
    view = memory.build(machine, {31337: TrackedProcess(31337, "python train.py", time.time(), (device,))})
    row = view.processes[0]
    assert row.breakdown is not None
    assert row.breakdown.cached_free_bytes == 2000 * MiB
    assert row.breakdown.other_bytes == 944 * MiB  # NVML's 10944 MiB minus 10000 reserved
    line = memory.empty_cache_line(row)
    assert "empty_cache() would return up to 2.0 GiB" in line and "CUDA context" in line
    assert view.processes[1].breakdown is None  # GPU 1: the tracker reported only cuda:0


def test_tracked_process_shows_in_the_cli(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag import track

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    machine_pid = 31337
    directory = track.runtime_dir()
    directory.mkdir(mode=0o700)
    data = {
        "schema": track.SCHEMA,
        "pid": machine_pid,
        "command": "python train.py",
        "updated_at": time.time(),
        "devices": [
            {
                "torch_index": 0,
                "uuid": "1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00",
                "name": "V100",
                "allocated_bytes": 8000 * MiB,
                "reserved_bytes": 10000 * MiB,
                "peak_allocated_bytes": 1,
                "peak_reserved_bytes": 1,
                "alloc_retries": 3,
                "ooms": 1,
            }
        ],
    }
    (directory / f"{machine_pid}.json").write_text(json.dumps(data))
    monkeypatch.setattr("gpudiag.track._alive", lambda pid: True)
    _, out, _ = cli("--replay", "v100x4-tutorial", "memory", width=160)
    assert "Cached free" in out and "2000MiB" in out
    assert "1 out-of-memory error(s), 3 allocation retries" in out


def _with(machine: Machine, gpu_index: int, **changes: object) -> Machine:
    gpus = list(machine.gpus)
    gpus[gpu_index] = dataclasses.replace(gpus[gpu_index], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(machine, gpus=tuple(gpus))


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _samples(machines: list[Machine]) -> list[memory.MemoryView]:
    return [memory.build(m, {}) for m in machines]


def test_watch_marks_new_and_exited_processes_and_survives_a_lost_gpu() -> None:
    base = load("v100x4-tutorial")[0]
    procs = base.gpus[1].processes.value
    assert procs is not None
    extra = dataclasses.replace(procs[0], pid=4242)
    with_extra = _with(base, 1, processes=Reading.of((*procs, extra)))
    lost = _with(
        with_extra, 2, state=GpuState.LOST, memory=Reading.missing(__import__("gpudiag").model.Reason.GPU_LOST)
    )
    gone = _with(lost, 1, processes=Reading.of(procs))
    sequence = _samples([base, with_extra, lost, gone])
    shown: list[memory.MemoryView] = []
    clock = FakeClock()
    outcome = watch.run(
        lambda: sequence[len(shown)],
        lambda v, s, t: shown.append(v),
        watch.WatchOptions(interval=1.0, count=4),
        clock.now,
        clock.sleep,
    )
    assert outcome.code is ExitCode.OK and outcome.samples == 4
    assert [r.process.pid for r in shown[1].processes if r.status == "new"] == [4242]
    assert shown[2].gpus[2].gpu.state is GpuState.LOST
    assert (1, 4242) in [(g, p) for g, p, _ in shown[3].exited]
    assert clock.t == pytest.approx(3.0)  # three sleeps between four samples


def _free(machine: Machine, gpu: int, free_mib: int) -> Machine:
    old = machine.gpus[gpu].memory.value
    assert old is not None
    new = Memory(old.total_bytes, old.total_bytes - free_mib * MiB, free_mib * MiB, old.reserved_bytes)
    return _with(machine, gpu, memory=Reading.of(new))


def test_until_free_waits_then_succeeds_or_times_out() -> None:
    base = load("v100x4-tutorial")[0]
    busy = _samples([base] * 3 + [_free(base, 2, 15000)])
    clock = FakeClock()
    i = iter(busy)
    outcome = watch.run(
        lambda: next(i),
        lambda *a: None,
        watch.WatchOptions(interval=2, until_free=14 * 1024 * MiB),
        clock.now,
        clock.sleep,
    )
    assert outcome.code is ExitCode.OK and "GPU 2" in outcome.message and outcome.samples == 4
    clock = FakeClock()
    outcome = watch.run(
        lambda: busy[0],
        lambda *a: None,
        watch.WatchOptions(interval=2, until_free=14 * 1024 * MiB, timeout=5),
        clock.now,
        clock.sleep,
    )
    assert outcome.code is ExitCode.FAILED and "timed out after 5 s" in outcome.message


def test_alert_fires_when_free_memory_drops() -> None:
    base = load("h100x8-healthy")[0]
    seq = iter(_samples([base, _free(base, 3, 500)]))
    clock = FakeClock()
    outcome = watch.run(
        lambda: next(seq),
        lambda *a: None,
        watch.WatchOptions(interval=1, alert_free_below=1024 * MiB),
        clock.now,
        clock.sleep,
    )
    assert outcome.code is ExitCode.FAILED and outcome.samples == 2 and "500.0 MiB free" in outcome.message


def test_ctrl_c_ends_the_watch_cleanly() -> None:
    def interrupted() -> memory.MemoryView:
        raise KeyboardInterrupt

    clock = FakeClock()
    assert (
        watch.run(interrupted, lambda *a: None, watch.WatchOptions(interval=1), clock.now, clock.sleep).code
        is ExitCode.OK
    )


def test_piped_watch_writes_json_lines_and_logs(cli: Cli, tmp_path: Path) -> None:
    csv_log, jsonl_log = tmp_path / "m.csv", tmp_path / "m.jsonl"
    code, out, _ = cli(
        "--replay", "h100x8-healthy", "memory", "--count", "2", "--interval", "0.01", "--log", str(csv_log)
    )
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    assert all(json.loads(line)["schema"] == "gpudiag.memory/1" for line in lines)
    assert "\x1b[" not in out
    rows = csv_log.read_text().splitlines()
    assert rows[0].startswith("timestamp,gpu,used_bytes") and len(rows) == 1 + 2 * 8
    cli("--replay", "h100x8-healthy", "memory", "--count", "1", "--interval", "0.01", "--log", str(jsonl_log))
    assert json.loads(jsonl_log.read_text().splitlines()[0])["gpus"][0]["index"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--watch", "--interval", "0"], "must be a positive number"),
        (["--watch", "--interval", "-1"], "must be a positive number"),
        (["--watch", "--interval", "nan"], "must be a positive number"),
        (["--until-free", "20GX"], "invalid size unit"),
        (["--alert-free-below", "lots"], "invalid size"),
        (["--count", "0"], "--count must be 1 or more"),
        (["--log", "out.txt", "--count", "1"], "use a .csv or .jsonl"),
        (["--timeout", "5"], "--timeout goes with --until-free"),
        (["--prometheus", "70000", "--count", "1"], "not a TCP port"),
    ],
)
def test_bad_input_is_a_usage_error(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "memory", *args)
    assert code == ExitCode.USAGE and message in err


def test_nvml_failure_gives_its_exit_code(cli: Cli) -> None:
    code, _, err = cli("--replay", "no-permission", "memory")
    assert code == ExitCode.NVML_NO_PERMISSION and "/dev/nvidia" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_prometheus_serves_the_figures_on_loopback() -> None:
    from gpudiag.render.prometheus import MemoryMetrics

    port = _free_port()
    metrics = MemoryMetrics.serve(port, "127.0.0.1")
    try:
        metrics.update(memory.build(load("v100x4-tutorial")[0], {}))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            body = response.read().decode()
    finally:
        metrics.shutdown()
    from prometheus_client.parser import text_string_to_metric_families

    samples = {
        (s.name, s.labels.get("gpu"), s.labels.get("pid")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("gpudiag_gpu_memory_used_bytes", "0", None)] == 10955 * MiB
    assert samples[("gpudiag_process_memory_used_bytes", "0", "31337")] == 10944 * MiB
    assert samples[("gpudiag_gpu_utilization_percent", "3", None)] == 87


def test_prometheus_port_in_use_is_explained() -> None:
    from gpudiag.errors import GpudiagError
    from gpudiag.render.prometheus import MemoryMetrics

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(GpudiagError, match="cannot serve metrics"):
            MemoryMetrics.serve(s.getsockname()[1], "127.0.0.1")


def test_broken_pipe_in_watch_exits_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    cmd = f"{sys.executable} -m gpudiag --replay h100x8-healthy memory --watch --interval 0.01 | head -n 1"
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert "Traceback" not in result.stderr
    assert json.loads(result.stdout)["schema"] == "gpudiag.memory/1"
    assert threading.active_count() >= 1


def test_watch_frame_shows_peaks_and_history_sparklines() -> None:
    from io import StringIO

    from rich.console import Console

    from gpudiag.render import memory_view

    base = load("h100x8-healthy")[0]
    state = memory.WatchState()
    for free in (80000, 40000, 1000):
        view = state.update(memory.build(_free(base, 0, free), {}))
    console = Console(file=StringIO(), width=200, color_system=None)
    console.print(memory_view.render(view, state, height=40))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Peak used" in text and "Util history" in text
    assert memory_view.sparkline([0, 50, 100]) == "▁▅█"
    assert f"{81559 - 1000}MiB" in text  # GPU 0's peak: the last, fullest sample
