"""`gpudiag memory` from the command line: one-shot, tracked processes, watch outputs, logs, metrics, input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpudiag.cli import memory_cmd
from gpudiag.exitcodes import ExitCode
from gpudiag.memory.build import build
from gpudiag.memory.state import WatchState
from gpudiag.memory.watch import SinkOptions, Sinks
from gpudiag.model import ALL_GROUPS, Machine
from gpudiag.probe import collect
from gpudiag.replay.fixtures import load
from gpudiag.track import entries
from tests.conftest import Cli
from tests.test_memory import MiB, with_free
from tests.test_memory_watch import Timeline, add_process, lose

TUTORIAL_GPU0 = "1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00"


def recorded_entry(directory: Path, pid: int = 31337, **device: Any) -> Path:
    """A tracker entry recorded alongside a replayed machine, in a private directory."""
    dev = {
        "torch_index": 0,
        "uuid": TUTORIAL_GPU0,
        "pci_bus_id": "",
        "name": "Tesla V100-SXM2-16GB",
        "allocated_bytes": 8000 * MiB,
        "reserved_bytes": 10000 * MiB,
        "peak_allocated_bytes": 9500 * MiB,
        "peak_reserved_bytes": 10240 * MiB,
        "alloc_retries": 3,
        "ooms": 1,
    }
    dev.update(device)
    data = {
        "schema": entries.SCHEMA,
        "pid": pid,
        "start_ticks": 123,
        "pid_namespace": "pid:[4026531836]",
        "command": "python train.py",
        "interval_s": 2.0,
        "updated_at": 1_790_000_000.0,
        "devices": [dev],
    }
    directory.mkdir(mode=0o700, exist_ok=True)
    (directory / f"{pid}.json").write_text(json.dumps(data))
    return directory


@pytest.fixture(autouse=True)
def no_tracker_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPUDIAG_TRACK_DIR in the developer's environment must not change what these tests see."""
    monkeypatch.delenv(entries.DIR_ENV, raising=False)


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Machine]]:
    """Machine states the CLI's watch will see, one per sample (the last one stays)."""
    states: list[Machine] = []
    clocks: list[Timeline] = []
    real_open = collect.open_source

    def opening(replay: str | None = None, environ: Any = None, facts: Any = ALL_GROUPS) -> collect.MachineSource:
        source = real_open(replay, environ, facts)
        if states:
            clock = Timeline(source, states)
            clocks.append(clock)
            monkeypatch.setattr(memory_cmd, "CLOCK", memory_cmd.Clock(clock.now, clock.sleep, clock.now))
        return source

    monkeypatch.setattr(collect, "open_source", opening)
    yield states


# --- one-shot ------------------------------------------------------------------------


def test_one_shot_table_at_120_columns(cli: Cli) -> None:
    code, out, err = cli("--replay", "v100x4-tutorial", "memory")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "replay:v100x4-tutorial"
    assert "  0   Tesla V100-SXM2-16GB   10955MiB / 16130MiB   ██████████████░░░░░░   5175MiB" in out
    assert "  0   31337   ubuntu   10944MiB   67.8%   python train.py" in out
    assert "Total: 29744MiB used of 64520MiB (46.1%); 1 process(es) hold 29700MiB" in out
    assert "as under DataParallel" in out
    assert max(len(line) for line in lines) <= 120
    assert "\x1b[" not in out


def test_json_is_versioned_and_numeric(cli: Cli) -> None:
    code, out, _ = cli("--replay", "a100-mig", "memory", "--json", "--id", "0")
    data = json.loads(out)
    assert code == 0 and data["schema"] == "gpudiag.memory/2" and data["timestamp"] == 0.0  # replay: deterministic
    assert [m["gpu_instance_id"] for m in data["gpus"][0]["mig_devices"]] == [1, 5, 13]
    instance = load("a100-mig")[0].gpus[0].mig_devices[0].memory.value  # GI 1
    assert instance is not None and data["gpus"][0]["mig_devices"][0]["free_bytes"] == instance.free_bytes
    proc = data["processes"][0]
    assert proc["gpu_instance_id"] == 1 and isinstance(proc["used_bytes"], int)
    assert proc["share_percent"] == round(100 * proc["used_bytes"] / instance.total_bytes, 2)  # of its instance


def test_a_lost_gpu_is_shown_and_gives_exit_15(cli: Cli) -> None:
    code, out, _ = cli("--replay", "gpu-lost", "memory")
    assert code == ExitCode.GPU_LOST
    assert "GPU 2: GPU is lost (fallen off the bus, XID 79)" in out
    code, out, _ = cli("--replay", "gpu-lost", "memory", "--json")
    assert code == ExitCode.GPU_LOST and json.loads(out)["gpus"][2]["state"] == "lost"


def test_other_namespace_processes_are_said_so(cli: Cli) -> None:
    _, out, _ = cli("--replay", "container-pids", "memory")
    assert "host PID: not visible in this container" in out
    assert "belong to the host's PID namespace" in out


def test_nvml_failure_gives_its_exit_code(cli: Cli) -> None:
    code, _, err = cli("--replay", "no-permission", "memory")
    assert code == ExitCode.NVML_NO_PERMISSION and "/dev/nvidia" in err


def test_a_tracked_process_is_broken_down(cli: Cli, tmp_path: Path) -> None:
    directory = recorded_entry(tmp_path / "track")
    code, out, _ = cli("--replay", "v100x4-tutorial", "memory", width=160, env={entries.DIR_ENV: str(directory)})
    assert code == 0
    assert "Allocated   Cached free   Context+other" in out
    assert "8000MiB       2000MiB          944MiB" in out
    assert "PID 31337 on GPU 0 (cuda:0): empty_cache() would return 2.0 GiB; 7.8 GiB is tensors" in out
    assert "1 out-of-memory error(s), 3 allocator retries; peaks" in out
    code, out, _ = cli(
        "--replay", "v100x4-tutorial", "memory", "--json", width=160, env={entries.DIR_ENV: str(directory)}
    )
    torch = json.loads(out)["processes"][0]["torch"]
    assert torch.pop("published_at") == json.loads((directory / "31337.json").read_text())["updated_at"]
    added = {k: torch.pop(k) for k in list(torch)[9:]}  # keys since the fragmentation figures: null here
    assert all(v["unavailable"] == "not_found" for v in added.values()), added  # an older tracker's entry lacks them
    assert torch == {
        "cuda_index": 0,
        "allocated_bytes": 8000 * MiB,
        "reserved_bytes": 10000 * MiB,
        "cached_free_bytes": 2000 * MiB,
        "other_bytes": 944 * MiB,
        "peak_allocated_bytes": 9500 * MiB,
        "peak_reserved_bytes": 10240 * MiB,
        "alloc_retries": 3,
        "ooms": 1,
    }


def test_a_replay_ignores_this_hosts_live_tracker(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live entries belong to this host's processes, not to the replayed machine's PIDs."""
    monkeypatch.delenv(entries.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    recorded_entry(tmp_path / "gpudiag", updated_at=time.time())
    monkeypatch.setattr(entries, "_same_process", lambda *a: True)
    _, out, _ = cli("--replay", "v100x4-tutorial", "memory", env={"XDG_RUNTIME_DIR": str(tmp_path)})
    assert "Cached free" not in out


# --- watch ---------------------------------------------------------------------------


def test_watch_with_json_writes_json_lines_with_events(cli: Cli, steps: list[Machine]) -> None:
    base = load("v100x4-tutorial")[0]
    started = add_process(base, 1, 4242, 700)
    steps += [base, started, lose(started, 2), lose(base, 2)]
    code, out, err = cli("--replay", "v100x4-tutorial", "memory", "--watch", "--count", "4", "--json")
    samples = [json.loads(line) for line in out.splitlines()]
    assert code == ExitCode.GPU_LOST and err == "gpudiag: GPU 2 is lost (the other GPUs are shown)\n"
    assert [s["sample"] for s in samples] == [1, 2, 3, 4]
    assert all(s["schema"] == "gpudiag.memory/2" for s in samples)
    assert [p["pid"] for p in samples[1]["processes"] if p["new"]] == [4242]
    assert samples[2]["lost_gpus"] == [2] and samples[2]["gpus"][2]["state"] == "lost"
    command = started.gpus[0].processes.get(())[0].host.command.value  # add_process copies GPU 0's first
    assert samples[3]["exited"] == [{"gpu_index": 1, "pid": 4242, "command": command}]
    assert samples[3]["gpus"][0]["peak_used_bytes"] == 10955 * MiB
    assert "\x1b[" not in out


def test_ctrl_c_in_the_watch_exits_130_after_the_samples_so_far(
    cli: Cli, steps: list[Machine], monkeypatch: pytest.MonkeyPatch
) -> None:
    steps.append(load("v100x4-tutorial")[0])

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    real_open = collect.open_source

    def opening(replay: str | None = None, environ: Any = None, facts: Any = ALL_GROUPS) -> collect.MachineSource:
        source = real_open(replay, environ, facts)
        monkeypatch.setattr(memory_cmd, "CLOCK", memory_cmd.Clock(time.monotonic, interrupt, time.time))
        return source

    monkeypatch.setattr(collect, "open_source", opening)
    code, out, err = cli("--replay", "v100x4-tutorial", "memory", "--watch", "--json")
    assert code == 130 and len(out.splitlines()) == 1 and err == ""


def test_until_free_and_timeout_from_the_command_line(cli: Cli, steps: list[Machine]) -> None:
    base = load("v100x4-tutorial")[0]
    steps += [base, base, with_free(base, 3, 15000)]
    code, _, err = cli("--replay", "v100x4-tutorial", "memory", "--until-free", "14GiB", "--interval", "5")
    assert code == 0 and "GPU 3 has 14.6 GiB free" in err
    steps[:] = [base]
    code, out, err = cli("--replay", "v100x4-tutorial", "memory", "--until-free", "14GiB", "--timeout", "12")
    assert code == ExitCode.FAILED and "timed out after 12 s" in err
    assert out.count("replay:v100x4-tutorial\n") == 13  # a text block per sample, at 0..12 s


def test_alert_free_below_from_the_command_line(cli: Cli, steps: list[Machine]) -> None:
    base = load("h100x8-healthy")[0]
    steps += [base, with_free(base, 6, 900)]
    code, _, err = cli("--replay", "h100x8-healthy", "memory", "--alert-free-below", "1GiB")
    assert code == ExitCode.FAILED and err == "gpudiag: alert: GPU 6 has 900.0 MiB free, below 1.0 GiB\n"


def test_logs_in_csv_and_json_lines(cli: Cli, tmp_path: Path, steps: list[Machine]) -> None:
    steps.append(load("h100x8-healthy")[0])
    csv_log, jsonl_log = tmp_path / "m.csv", tmp_path / "m.jsonl"
    code, out, _ = cli("--replay", "h100x8-healthy", "memory", "--count", "2", "--log", str(csv_log), "--json")
    assert code == 0 and len(out.splitlines()) == 2
    rows = csv_log.read_text().splitlines()
    assert rows[0] == ",".join(memory_cmd_csv_header()) and len(rows) == 1 + 2 * 8
    cli("--replay", "h100x8-healthy", "memory", "--count", "1", "--log", str(csv_log))
    assert len(csv_log.read_text().splitlines()) == 1 + 3 * 8  # appended, header once
    cli("--replay", "h100x8-healthy", "memory", "--count", "2", "--log", str(jsonl_log))
    logged = [json.loads(line) for line in jsonl_log.read_text().splitlines()]
    assert [s["sample"] for s in logged] == [1, 2] and logged[0]["gpus"][0]["index"] == 0


def memory_cmd_csv_header() -> tuple[str, ...]:
    from gpudiag.render.memory_view import CSV_HEADER

    return CSV_HEADER


def test_a_log_that_cannot_be_written_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "memory", "--count", "1", "--log", str(tmp_path / "no/x.csv"))
    assert code == ExitCode.USAGE and "cannot write" in err


def test_the_live_view_restores_the_terminal() -> None:
    """On a terminal: a rich Live frame per sample, fitted to the height, and the cursor back at the end."""
    file = StringIO()
    console = Console(file=file, width=120, height=30, force_terminal=True, color_system="standard")
    outputs = Sinks(console, SinkOptions(json_lines=False))
    state = WatchState()
    base = load("h100x8-training-64procs")[0]
    try:
        for machine in (base, with_free(base, 0, 100)):
            outputs.show(state.update(build(machine, {}), at=time.time()), state)
    finally:
        outputs.close()
    written = file.getvalue()
    assert "\x1b[?25l" in written and written.rstrip("\n").endswith("\x1b[?25h")  # cursor hidden, then shown
    assert "more processes (--json lists all)" in written and "sample 2" in written


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[tuple[str, str | None, str | None], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    return {
        (s.name, s.labels.get("gpu"), s.labels.get("pid")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_prometheus_serves_each_sample_on_loopback(
    cli: Cli, tmp_path: Path, steps: list[Machine], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = load("v100x4-tutorial")[0]
    steps += [base, lose(base, 1)]
    port = _free_port()
    scraped: list[dict[tuple[str, str | None, str | None], float]] = []
    real_clock = memory_cmd.Clock

    def clock_that_scrapes(now: Any, sleep: Any, wall: Any) -> memory_cmd.Clock:
        def scrape_then_sleep(seconds: float) -> None:
            scraped.append(_scrape(port))
            sleep(seconds)

        return real_clock(now, scrape_then_sleep, wall)

    monkeypatch.setattr(memory_cmd, "Clock", clock_that_scrapes)
    directory = recorded_entry(tmp_path / "track")
    code, _, err = cli(
        "--replay", "v100x4-tutorial", "memory", "--prometheus", str(port), "--count", "3",
        env={entries.DIR_ENV: str(directory)},
    )  # fmt: skip
    assert code == ExitCode.GPU_LOST
    assert f"serving metrics on http://127.0.0.1:{port}/metrics" in err
    first, second = scraped
    assert first[("gpudiag_gpu_memory_used_bytes", "0", None)] == 10955 * MiB
    assert first[("gpudiag_process_gpu_memory_bytes", "0", "31337")] == 10944 * MiB
    assert first[("gpudiag_process_torch_cached_free_bytes", "0", "31337")] == 2000 * MiB
    assert first[("gpudiag_process_other_gpu_memory_bytes", "0", "31337")] == 944 * MiB
    assert first[("gpudiag_gpu_utilization_ratio", "3", None)] == 0.87
    assert first[("gpudiag_gpu_lost", "1", None)] == 0
    assert second[("gpudiag_gpu_lost", "1", None)] == 1
    assert ("gpudiag_gpu_memory_used_bytes", "1", None) not in second  # gone, not stuck at its last value
    assert ("gpudiag_process_gpu_memory_bytes", "1", "31337") not in second
    with pytest.raises(OSError):  # the server is shut down with the watch
        _scrape(port)


def test_prometheus_port_in_use_is_explained(cli: Cli) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, out, err = cli("--replay", "h100x8-healthy", "memory", "--prometheus", str(port), "--count", "1")
    assert code == ExitCode.USAGE and f"cannot serve metrics on 127.0.0.1:{port}" in err and out == ""


@pytest.mark.slow
def test_broken_pipe_in_watch_exits_quietly() -> None:
    cmd = f"{sys.executable} -m gpudiag --replay h100x8-healthy memory --watch --interval 0.1 | head -n 1"
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == "replay:h100x8-healthy\n"


@pytest.mark.slow
def test_sigterm_ends_the_watch_like_ctrl_c() -> None:
    import signal

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpudiag",
            "--replay",
            "h100x8-healthy",
            "memory",
            "--watch",
            "--interval",
            "0.1",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # running, and past start-up
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(first)["sample"] == 1
    assert proc.returncode == 143 and err == ""  # 128 + SIGTERM: a watch cut short is not a success


# --- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--watch", "--interval", "0"], "--interval 0.0: expected a number of seconds, more than 0, at most a year"),
        (["--watch", "--interval", "-1"], "expected a number of seconds"),
        (["--watch", "--interval", "nan"], "--interval nan: expected a number of seconds"),
        (["--watch", "--interval", "inf"], "--interval inf: expected a number of seconds"),
        (["--watch", "--interval", "1e20"], "--interval 1e+20: expected a number of seconds"),
        (["--until-free", "1G", "--timeout", "1e20"], "--timeout 1e+20: expected a number of seconds"),
        (["--until-free", "1G", "--timeout", "nan"], "--timeout nan: expected a number of seconds"),
        (["--until-free", "20GX"], "--until-free: invalid size unit 'GX'"),
        (["--until-free", "-1G"], "--until-free: invalid size"),
        (["--alert-free-below", "lots"], "--alert-free-below: invalid size"),
        (["--until-free", "1G", "--timeout", "0"], "--timeout 0.0: expected a number of seconds"),
        (["--count", "0"], "--count must be 1 or more"),
        (["--log", "out.txt", "--count", "1"], "use a .csv or .jsonl"),
        (["--timeout", "5"], "--timeout goes with --until-free"),
        (["--prometheus", "70000", "--count", "1"], "not a TCP port"),
        (["--id", "9"], "9"),
    ],
)
def test_bad_input_is_a_usage_error(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli("--replay", "h100x8-healthy", "memory", *args)
    assert code == ExitCode.USAGE and message in err and out == ""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a Linux pseudo-terminal")
def test_on_a_real_terminal_it_follows_a_resize_and_ctrl_c_restores_the_terminal() -> None:
    import fcntl
    import pty
    import re
    import select
    import signal
    import struct
    import termios

    def resize(fd: int, rows: int, cols: int) -> None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    master, slave = pty.openpty()
    resize(slave, 40, 150)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    args = ["--replay", "h100x8-training-64procs", "memory", "--watch", "--interval", "0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    received = bytearray()

    def read_until(pattern: bytes, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while pattern not in received and time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    received.extend(os.read(master, 65536))
                except OSError:
                    return

    try:
        read_until(b"sample 3 ", 30)
        assert b"sample 3 " in received
        resize(master, 30, 90)
        os.killpg(proc.pid, signal.SIGWINCH)
        mark = len(received)
        read_until(b"sample 8 ", 30)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=30)
        read_until(b"\x1b[?25h", 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    out = received.decode(errors="replace")
    assert code == 130 and "Traceback" not in out and "KeyboardInterrupt" not in out
    assert out.rstrip().endswith("\x1b[?25h")  # the cursor is back
    after = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", received[mark:].decode(errors="replace"))
    last_frame = after.rsplit("sample ", 1)[1].splitlines()
    assert max(len(line) for line in last_frame) <= 90  # redrawn for the new width
    assert "Memory history" in after  # the watch kept its history on the narrow screen


DOC = Path(__file__).resolve().parent.parent / "docs" / "commands" / "memory.md"


def test_the_readme_section_shows_real_output(cli: Cli, tmp_path: Path) -> None:
    """Every `$ gpudiag …` block in docs/commands/memory.md is what the command prints at 120 columns;
    the tracked example replays the tracker entry shown in the section's JSON block."""
    import re

    text = DOC.read_text()
    (entry,) = re.findall(r"```json\n(.*?)```", text, re.S)
    recorded = tmp_path / "recorded"
    recorded.mkdir(mode=0o700)
    (recorded / f"{json.loads(entry)['pid']}.json").write_text(entry)
    blocks = re.findall(r"```\n\$ ((?:\w+=\S+ )*)gpudiag (.*?)\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    for env_text, command, expected in blocks:
        env = dict(pair.split("=", 1) for pair in env_text.split())
        if entries.DIR_ENV in env:
            env[entries.DIR_ENV] = str(recorded)
        _, out, _ = cli(*command.split(), width=120, env=env)
        shown = "\n".join(line.rstrip() for line in out.splitlines())
        assert shown == expected.rstrip("\n"), command


@pytest.mark.slow
def test_piped_watch_prints_the_text_a_terminal_shows_one_block_per_sample() -> None:
    """`memory --watch | tee log` is text like `nvidia-smi -l`, every column; JSON Lines only with --json."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    args = [sys.executable, "-m", "gpudiag", "--replay", "h100x8-training-64procs", "memory", "--count", "3"]
    result = subprocess.run([*args, "--interval", "0.1"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    blocks = result.stdout.split("\n\nreplay:")
    assert len(blocks) == 3 and "sample 3 at " in blocks[2] and "\x1b[" not in result.stdout
    assert "Total: " in blocks[0] and "Processes" in blocks[0]
    assert max(len(line) for line in result.stdout.splitlines()) > 120  # not cut to a default 80 columns
    assert not result.stdout.lstrip().startswith("{")


def test_the_command_only_parses_calls_and_renders() -> None:
    """The watch's sinks (live view, log files, Prometheus) belong to gpudiag.memory.watch, not the command."""
    import ast

    source = (Path(__file__).resolve().parent.parent / "gpudiag" / "cli" / "memory_cmd.py").read_text()
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not {"Live", "MemoryMetrics", "csv", "writerows", "signal", "open"} & (names | imported)
    assert [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] == ["Clock"]
