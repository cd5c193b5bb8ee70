"""`gpudiag list --watch`: blocks when piped, one CSV header, JSON Lines, one NVML session."""

from __future__ import annotations

import json

import pytest

from gpudiag.pacing import repeat
from tests.test_list_cli import run

BUSY = "h100-driver580-busy"


def test_piped_tables_print_one_block_per_sample() -> None:
    code, out, _ = run("--replay", "h100x8-healthy", "list", "--watch", "--count", "3", "--interval", "0.1")
    assert code == 0
    assert out.count("Processes") == 3
    assert out.count("Driver Version: 550.54.15") == 3


def test_csv_keeps_one_header_and_json_becomes_json_lines() -> None:
    _, csv, _ = run("--replay", BUSY, "list", "-w", "--count", "2", "--interval", "0.1", "--query", "index,clocks.sm")
    assert csv.splitlines() == ["index, clocks.sm [MHz]", "0, 1980 MHz", "0, 1980 MHz"]
    _, lines, _ = run("--replay", BUSY, "list", "-w", "--count", "2", "--interval", "0.1", "--json")
    docs = [json.loads(line) for line in lines.splitlines()]
    assert len(docs) == 2 and docs[0]["schema"] == "gpudiag.machine/1"


def test_details_watch_reads_details_every_sample() -> None:
    _, out, _ = run("--replay", BUSY, "list", "-w", "--count", "2", "--interval", "0.1", "--details")
    assert out.count("Max Clocks") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "1"], "--interval and --count go with --watch"),
        (["--watch", "--interval", "0"], "--interval 0.0: expected a number of seconds, more than 0, at most a year"),
        (["--watch", "--interval", "nan"], "--interval nan: expected a number of seconds"),
        (["--watch", "--interval", "inf"], "--interval inf: expected a number of seconds"),
        (["--watch", "--interval", "1e20"], "--interval 1e+20: expected a number of seconds"),
        (["--watch", "--count", "0"], "--count must be at least 1"),
        (["--query", "name", "--details"], "choose one of --query and --details"),
        (["--query-compute-apps", "pid", "--query", "name"], "choose one of --query and --query-compute-apps"),
    ],
)
def test_bad_watch_options_are_usage_errors(args: list[str], message: str) -> None:
    code, _, err = run("--replay", BUSY, "list", *args)
    assert code == 2 and message in err


def test_repeat_keeps_the_interval_grid_and_lets_ctrl_c_through() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        clock[0] += seconds

    def step(n: int) -> None:
        clock[0] += 0.25 if n == 1 else 0.0  # the second sample is slow
        if n == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # the command exits 130 (gpudiag.edge), never 0
        repeat(step, 1.0, None, lambda: clock[0], sleep)
    assert slept == [1.0, 0.75, 1.0]


def test_the_watch_uses_one_nvml_session(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.replay.fake_nvml import FakeNvml

    inits: list[int] = []
    original = FakeNvml._init

    def counting(self: FakeNvml, name: str) -> None:
        inits.append(1)
        original(self, name)

    monkeypatch.setattr(FakeNvml, "_init", counting)
    code, _, _ = run("--replay", BUSY, "list", "-w", "--count", "3", "--interval", "0.1", "--query", "index")
    assert code == 0 and len(inits) == 1
