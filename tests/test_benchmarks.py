"""The start-up benchmark and its floors run (their figures are reported, not asserted)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs a script in a child

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize(
    ("mode", "expect"), [("json", '"schema": "floor/1"'), ("table", "Memory-Usage"), ("checklist", "Versions")]
)
def test_each_floor_does_its_work(mode: str, expect: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "floors.py"), mode], capture_output=True, text=True, check=True
    )
    assert expect in result.stdout
    if mode == "checklist":
        assert len(result.stdout.splitlines()) >= 118 + 8


def test_bench_startup_reports_a_ratio_to_the_floor() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_startup.py"), "--runs", "1", "--no-watch", "--only",
         "floor: app+json,list --query"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr  # 1: a target missed
    rows = {line.split("  ")[0].strip(): line for line in result.stdout.splitlines()}
    assert {"floor", "floor: app+json", "list --query"} <= set(rows)
    assert rows["list --query"].split()[-1].replace(".", "").isdigit()  # peak RSS in MiB


def test_nvml_call_costs_times_every_c_function_the_exporter_and_a_full_read_reach() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "nvml_call_costs.py"), "--scrapes", "2", "--replay", "h200-driver580-idle"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    names = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("nvml")}
    assert {"nvmlDeviceValidateInforom", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetFieldValues"} <= names
    assert '    "nvmlDeviceValidateInforom": ' in result.stdout
