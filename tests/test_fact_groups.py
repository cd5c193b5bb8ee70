"""Each command reads only the NVML fact groups it shows or judges, and shows nothing it did not read.

The fake NVML records every call, so these tests count what a command costs on a real driver
(nvmlDeviceValidateInforom alone took 68 ms per GPU on the H100 capture).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpudiag.model import ALL_GROUPS, FactGroup, GpuState, Reason
from gpudiag.probe import collect
from gpudiag.probe.nvml import NvmlSession
from gpudiag.replay import fixtures
from gpudiag.replay.fake_host import RecordedHost
from gpudiag.replay.fake_nvml import FakeNvml
from tests.conftest import Cli, every_example

ROOT = Path(__file__).resolve().parent.parent
INFOROM = "nvmlDeviceValidateInforom"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every NVML call the fake answers during the test, by name."""
    seen: Counter[str] = Counter()
    real_enter = FakeNvml._enter

    def enter(self: FakeNvml, name: str) -> None:
        seen[name] += 1
        real_enter(self, name)

    monkeypatch.setattr(FakeNvml, "_enter", enter)
    yield seen


def test_a_group_not_asked_for_is_not_read_and_says_so() -> None:
    machine = fixtures.load("h100x8-healthy")[0]
    fake = FakeNvml(machine)
    session = NvmlSession(fake, RecordedHost(machine))
    session.open(machine.nvml.kernel_module_version)
    gpu = session.read_gpus(frozenset({FactGroup.MEMORY}))[0]
    assert gpu.memory.ok and gpu.uuid.ok and gpu.name.ok and gpu.pci_bus_id.ok  # identity: always
    for reading in (
        gpu.inforom_valid,
        gpu.temperature_c,
        gpu.processes,
        gpu.pcie.gen_current,
        gpu.ecc_errors.aggregate_corrected,
    ):
        assert reading.reason is Reason.NOT_READ and reading.reason.label == "not read by this command"
    assert INFOROM not in fake.calls and "nvmlDeviceGetTemperature" not in fake.calls


def test_every_group_has_a_reader_and_all_groups_read_every_field() -> None:
    """A full read leaves no field NOT_READ: a new Gpu field without a group would show up here."""
    for name in fixtures.example_names():
        for gpu in collect.collect(name).gpus:
            if gpu.state is GpuState.OK:
                assert "not_read" not in repr(gpu), (name, gpu.index)


@pytest.mark.parametrize(
    ("args", "never", "always"),
    [
        (
            ["list"],
            {INFOROM, "nvmlDeviceGetRemappedRows", "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetFieldValues"},
            {"nvmlDeviceGetMemoryInfo"},
        ),
        (["list", "--no-processes"], {INFOROM, "nvmlDeviceGetComputeRunningProcesses_v3"}, {"nvmlDeviceGetMemoryInfo"}),
        (
            ["list", "--query", "name,memory.used", "--format", "csv"],
            {INFOROM, "nvmlDeviceGetTemperature", "nvmlDeviceGetComputeRunningProcesses_v3"},
            {"nvmlDeviceGetMemoryInfo"},
        ),
        (
            ["memory"],
            {INFOROM, "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors"},
            {"nvmlDeviceGetComputeRunningProcesses_v3"},
        ),
        (
            ["visible"],
            {INFOROM, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetTemperature"},
            {"nvmlDeviceGetCudaComputeCapability"},
        ),
        (["check", "--no-torch", "--quick"], {"nvmlDeviceGetPowerUsage"}, {INFOROM, "nvmlDeviceGetRemappedRows"}),
        (["snapshot"], set(), {INFOROM, "nvmlDeviceGetPowerUsage", "nvmlDeviceGetNumaNodeId"}),
        (["list", "--json"], set(), {INFOROM, "nvmlDeviceGetNumaNodeId"}),
    ],
)
def test_each_command_calls_only_what_it_needs(
    cli: Cli, calls: Counter[str], args: list[str], never: set[str], always: set[str]
) -> None:
    cli.replay("h100x8-healthy", *args)
    assert not never & set(calls), sorted(never & set(calls))
    assert always <= set(calls), sorted(always - set(calls))


def test_list_costs_a_fraction_of_a_full_read(cli: Cli, calls: Counter[str]) -> None:
    cli.replay("h100x8-healthy", "snapshot")
    full = sum(calls.values())
    calls.clear()
    cli.replay("h100x8-healthy", "list")
    assert calls[INFOROM] == 0 and sum(calls.values()) < 0.75 * full


def _force_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    real = collect.open_source

    def everything(
        replay: Any = None, environ: Any = None, facts: Any = ALL_GROUPS, only: Any = None
    ) -> collect.MachineSource:
        return real(replay, environ, ALL_GROUPS)  # every row of every group

    monkeypatch.setattr(collect, "open_source", everything)


COMMANDS = [
    ["list"],
    [
        "list",
        "--query",
        "index,name,memory.used,memory.free,temperature.gpu,power.draw,ecc.mode.current",
        "--format",
        "csv",
    ],
    ["memory"],
    ["memory", "--json"],
    ["visible"],
    ["visible", "--json"],
    ["check", "--no-torch"],
    ["check", "--no-torch", "--json"],
]


@pytest.mark.parametrize("name", every_example())
def test_what_a_command_shows_does_not_depend_on_what_it_left_unread(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Every command's output with its own groups equals its output with every group read: so no
    renderer, JSON or check touches a fact its command did not read, and NOT_READ is never shown."""
    own = [cli.replay(name, *args) for args in COMMANDS]
    _force_everything(monkeypatch)
    full = [cli.replay(name, *args) for args in COMMANDS]
    for args, mine, everything in zip(COMMANDS, own, full, strict=True):
        assert mine == everything, args
        assert "not read" not in mine[1] + mine[2] and "not_read" not in mine[1] + mine[2]


@pytest.mark.slow
def test_benchmark_prints_calls_per_command() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_nvml_calls.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    rows = {line[:52].strip(): line[52:].split() for line in out.splitlines()[2:]}
    assert int(rows["list"][0]) < int(rows["snapshot"][0]) and rows["list"][1] == "0"
    assert "nvmlDeviceValidateInforom" in out
