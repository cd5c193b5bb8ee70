"""`gpudiag check --level 2-4` end to end on a 'live' example machine: the torch child injected (as
in tests/test_check_cli.py), the deep children real and on the CPU (tests/fake_devices.py), the
copies through bench-transfer's engine with its fake primitives. Exit codes, JSON, JUnit, the
refusal on busy GPUs, the budget, the options; level 1 unchanged."""

from __future__ import annotations

import importlib.util
import io
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from gpudiag.checks.deep import run
from gpudiag.exitcodes import ExitCode
from gpudiag.sources import open_source
from tests import fake_devices
from tests.conftest import Cli
from tests.test_bench_fakes import SCENARIO_ENV, SPEC, Scenario, device
from tests.test_check_cli import HEALTHY_HOST, FakeTorchChild, by_id, check_json

# Asked without importing torch (the children import it): an import here costs every collecting worker seconds.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (a CPU build will do)")

DEEP_IDS = ("mem.test", "link.pcie", "link.peer", "link.nccl")


def live(monkeypatch: pytest.MonkeyPatch, name: str = "h100x8-healthy") -> FakeTorchChild:
    """The 'live' machine is this example; the torch child answers as a cu124 torch seeing 8 GPUs;
    the deep children test two CPU stand-ins for GPUs 0 and 1."""
    from gpudiag import sources
    from gpudiag.probe import collect

    def live_source(environ: Any) -> Any:
        source = sources.replay_source(name)
        source.name = "live"
        return source

    fake = FakeTorchChild()
    monkeypatch.setattr(collect, "live_source", live_source)
    monkeypatch.setattr("gpudiag.probe.torch_runtime.start", fake)
    monkeypatch.setattr("gpudiag.probe.devices.read_device_facts", lambda minors: HEALTHY_HOST)
    for phase, settings in {**fake_devices.CPU, "links": {"primitives": SPEC}}.items():
        monkeypatch.setitem(run.OVERRIDES, phase, settings)
    gpus = open_source(name).read().gpus
    uuids = [(g.uuid.value or "").removeprefix("GPU-") for g in gpus[:2]]
    rates = {"h2d_pinned": 53e9, "d2h_pinned": 54e9, "peer": 380e9, "d2d": 1300e9}
    scenario = Scenario(devices=[device(0, uuid=uuids[0]), device(1, uuid=uuids[1])], rates=rates)
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    return fake


@pytest.mark.slow
def test_level_2_runs_the_deep_tests_after_the_functional_test(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    child = live(monkeypatch)
    code, data = check_json(cli, "check", "--level", "2")
    checks = by_id(data)
    assert code == ExitCode.OK, [c for c in data["checks"] if c["status"] not in ("PASS", "SKIP")]
    assert data["verdict"] == "READY" and data["could_not_run"] == []
    assert child.calls == ["probe+functional"]  # level 1's checks and functional test, as always
    assert [c["target"] for c in checks["mem.test"]] == ["GPU 0", "GPU 1"]
    assert all(c["status"] == "PASS" for i in DEEP_IDS for c in checks[i])
    assert "stress.gemm" not in checks and "mem.bandwidth" not in checks  # levels 3 and 4
    assert checks["link.nccl"][0]["finding"].startswith("busbw ") and checks["link.nccl"][0]["scope"] == "node"
    gpu0, gpu2 = data["gpus"][0], data["gpus"][2]
    assert gpu0["memtest_gbps"] > 0 and gpu0["memtest_mismatches"] == 0
    assert gpu0["h2d_gbps"] == pytest.approx(53.0) and gpu0["peer_min_gbps"] == pytest.approx(380.0)
    assert gpu0["allreduce_busbw_gbps"] > 0 and gpu0["stress_tflops"] is None and gpu0["d2d_gbps"] is None
    assert gpu2["memtest_gbps"] is None  # not tested (two stand-ins)
    diagnostics = data["diagnostics"]
    assert diagnostics["level"] == 2 and diagnostics["stress"] is None
    assert [g["gpu_index"] for g in diagnostics["memtest"]["gpus"]] == [0, 1]
    size = diagnostics["allreduce"]["sizes"][-1]
    assert size["busbw_gbps"] == pytest.approx(size["algbw_gbps"] * 2 * (2 - 1) / 2)


def test_level_1_json_and_text_stay_as_they_were(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    live(monkeypatch)
    _, data = check_json(cli, "check")
    assert "diagnostics" not in data
    assert set(data["gpus"][0]) == {
        "index",
        "name",
        "uuid",
        "temperature_c",
        "ecc_aggregate_corrected",
        "ecc_aggregate_uncorrected",
        "remapped_rows_correctable",
        "remapped_rows_uncorrectable",
        "remap_pending",
        "remap_failure",
        "retired_pages",
        "recovery_action",
        "matmul_tflops",
    }
    assert not {c["id"] for c in data["checks"]} & {*DEEP_IDS, "stress.gemm", "mem.bandwidth"}
    code, out, _ = cli("check")
    assert code == ExitCode.OK and "Memory test" not in out and "Interconnect" not in out


@pytest.mark.parametrize("only", ["mem.test", "mem.bandwidth", "link.pcie", "link.peer", "link.nccl", "stress.gemm"])
def test_busy_gpus_refuse_every_deep_test_with_its_own_exit_code(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, only: str
) -> None:
    child = live(monkeypatch, "h100x8-training-64procs")
    code, out, err = cli("check", "--level", "4", "--only", only, "--json")
    assert code == ExitCode.GPU_BUSY == 8 and out == ""
    assert err.startswith("gpudiag: check --level 4: other processes use GPU 0 (PID ")
    assert err.rstrip().endswith("stop them (see `gpudiag list`) or pass --force") and err.count("\n") == 1
    assert child.calls == []  # nothing ran: not even the functional test


@pytest.mark.slow
def test_force_runs_only_the_deep_check_asked_for_on_busy_gpus(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two claims, one memory-test child: --force runs a deep test on GPUs other processes use, and
    --only a deep check runs that phase alone (no functional test, no copies)."""
    child = live(monkeypatch, "h100x8-training-64procs")
    junit = tmp_path / "check.xml"
    code, out, err = cli(
        "check", "--level", "2", "--force", "--allow-processes", "--only", "mem", "--junit", str(junit)
    )
    assert code == ExitCode.OK, f"--force on busy GPUs: {err}"
    verdicts = {"failure", "error", "skipped"}
    cases = [(c.get("name"), {e.tag for e in c} & verdicts) for c in ET.parse(junit).getroot().iter("testcase")]
    assert cases == [("mem.test[GPU 0]", set()), ("mem.test[GPU 1]", set())], "the memory test ran, passed on both"
    assert child.calls == ["probe"], "--only mem: torch asked; no functional test"
    assert "Memory test" in out and "Interconnect" not in out and "mem.test" in out, "--only mem: no copies"


def test_a_budget_too_small_runs_no_deep_test_and_says_so(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    live(monkeypatch)
    code, data = check_json(cli, "check", "--level", "3", "--budget", "1", "--only", "mem", "--only", "stress")
    assert code == ExitCode.CHECK_INCOMPLETE and data["verdict"] == "UNKNOWN"
    assert data["could_not_run"] == [
        "the memory test was not started: the run's --budget of 1 s ran out",
        "the stress test was not started: the run's --budget of 1 s ran out",
    ]
    assert [c["status"] for c in data["checks"]] == ["SKIP", "SKIP"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "mem"], "--only mem: level-2 checks; add --level 2"),
        (["--level", "2", "--only", "stress"], "--only stress: level-3 checks; add --level 3"),
        (["--level", "0"], "--level 0: expected 1 to 4"),
        (["--level", "2", "--quick"], "leave out --quick"),
        (["--level", "2", "--mode", "prolog"], "leave out --mode"),
        (["--budget", "60"], "--budget bounds the deep tests"),
        (["--force"], "--force lets the deep tests run on busy GPUs"),
    ],
)
def test_options_that_do_not_go_with_the_level(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli("check", *args)
    assert code == ExitCode.USAGE and out == "" and message in err


def test_a_replay_has_no_gpu_to_test(cli: Cli) -> None:
    code, _, err = cli.replay("h100x8-healthy", "check", "--level", "2")
    assert code == ExitCode.USAGE and "a replay has none to test" in err


def test_the_progress_shows_on_a_terminal_and_goes_away() -> None:
    from gpudiag.render.deep_progress import TerminalProgress

    terminal = io.StringIO()
    console = Console(file=terminal, force_terminal=True, width=100)
    with TerminalProgress(console) as progress:
        progress.phase("memory test", total=100.0)
        progress.update(40.0, "8 GPU(s)")
        time.sleep(0.2)
    assert "memory test" in terminal.getvalue()
    quiet = io.StringIO()
    with TerminalProgress(Console(file=quiet, force_terminal=False)) as progress:
        progress.phase("memory test", total=100.0)
    assert quiet.getvalue() == ""  # nothing into logs and pipes


def test_deep_results_are_json_serialisable_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.checks import Facts
    from gpudiag.checks.deep.facts import DeepFacts, GpuSamples, Stress, StressGpu
    from gpudiag.model import Reading, Reason
    from gpudiag.render.check_view import to_json

    machine = open_source("h100x8-healthy").read()
    samples = GpuSamples(3, 70, 700.0, 690.0, 700.0, 1700, 1800, 1900, {0x4: 3})
    stress = Stress(60.0, "bfloat16", 8192, (StressGpu(0, 0, True, "", 60.0, 60, 600.0, samples=samples),))
    facts = Facts(machine, Reading.missing(Reason.UNAVAILABLE), None, deep=DeepFacts(3, stress=stress))
    data = json.loads(json.dumps(to_json(facts, [], False, 0)))
    assert data["diagnostics"]["stress"]["gpus"][0]["samples"]["events"] == {"4": 3}
    assert data["gpus"][0]["stress_tflops"] == 600.0
