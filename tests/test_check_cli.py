"""`gpudiag check` end to end: exit codes, JSON, JUnit, usage errors, the real CPU torch."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.probe.child import ChildOutcome, ChildResult
from tests.conftest import Cli


def test_healthy_replay_is_ready(cli: Cli) -> None:
    code, out, _ = cli("--replay", "h100x8-healthy", "check", "--quick")
    assert code == ExitCode.OK
    assert "READY: " in out and "NOT READY" not in out
    assert "PASS  config.mig              GPU 0-7  MIG disabled" in out


def test_broken_machines_fail_with_exit_1(cli: Cli) -> None:
    for name in (
        "a100-ecc-errors",
        "gpu-lost",
        "no-driver",
        "driver-mismatch",
        "misconfigured-node",
        "p100-torch-cu128",
    ):
        code, out, _ = cli("--replay", name, "check", "--quick")
        assert code == ExitCode.FAILED, name
        assert "NOT READY" in out


def test_strict_turns_warnings_into_failure(cli: Cli) -> None:
    assert cli("--replay", "driver535-torch-cu128", "check", "--quick")[0] == ExitCode.OK
    assert cli("--replay", "driver535-torch-cu128", "check", "--quick", "--strict")[0] == ExitCode.FAILED


def test_json_is_versioned_and_carries_every_result(cli: Cli) -> None:
    code, out, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--json")
    data = json.loads(out)
    assert data["schema"] == "gpudiag.check/1"
    assert data["exit_code"] == code == ExitCode.FAILED
    ecc = next(c for c in data["checks"] if c["id"] == "health.ecc")
    assert ecc == {
        "id": "health.ecc",
        "area": "Health",
        "status": "FAIL",
        "target": "GPU 0",
        "finding": "2 uncorrected ECC error(s) since the driver loaded",
        "fix": "drain the node; reset the GPU and run a memory diagnostic (dcgmi diag -r 3)",
    }
    assert data["versions"]["Driver"] == "535.129.03"


def test_junit_has_one_case_per_result(cli: Cli, tmp_path: Path) -> None:
    report = tmp_path / "gpu.xml"
    _, out, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--junit", str(report), "--json")
    cases = ET.parse(report).getroot().findall(".//testcase")
    assert len(cases) == len(json.loads(out)["checks"])
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert "health.ecc[GPU 0]" in failed
    assert any(c.find("skipped") is not None for c in cases)


def test_only_and_skip(cli: Cli) -> None:
    code, out, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--only", "config", "--json")
    assert code == ExitCode.OK
    assert {c["id"] for c in json.loads(out)["checks"]} == {"config.mig", "config.compute_mode", "config.persistence"}
    code, _, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--skip", "health", "--skip", "func")
    assert code == ExitCode.OK


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min-free", "20GX"], "invalid size unit 'GX'"),
        (["--min-free", "-1G"], "invalid size"),
        (["--min-free", "nan"], "invalid size"),
        (["--require-driver", "five-fifty"], "expected a version like 550"),
        (["--require-cuda", "12.x"], "expected a version like 12.4"),
        (["--require-torch", "=>2"], "expected a specifier"),
        (["--only", "health.nope"], "no such check"),
        (["--expect-gpus", "-2"], "--expect-gpus must be 0 or more"),
        (["--timeout", "0"], "must be a positive number"),
        (["--python", "/no/such/python"], "not an executable file"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "check", *args)
    assert code == ExitCode.USAGE
    assert message in err


def test_live_check_on_this_machine_with_the_real_cpu_torch(cli: Cli) -> None:
    pytest.importorskip("torch")
    code, out, _ = cli("check", "--json")
    data = json.loads(out)
    by_id = {c["id"]: c for c in data["checks"]}
    if by_id["nvml.init"]["status"] == "PASS":
        pytest.skip("this machine has an NVIDIA driver")
    assert code == ExitCode.FAILED
    assert by_id["nvml.init"]["status"] == "FAIL"
    torch_check = by_id["compat.torch"]
    if "+cpu" in data["versions"]["torch"]:
        assert torch_check["status"] == "FAIL" and "CPU-only" in torch_check["finding"]
    assert by_id["func.gpu"]["status"] == "SKIP"


def test_python_option_checks_another_interpreter(cli: Cli) -> None:
    code, out, _ = cli("check", "--quick", "--only", "compat.torch", "--python", sys.executable, "--json")
    finding = json.loads(out)["checks"][0]
    assert finding["id"] == "compat.torch"
    assert code in (ExitCode.OK, ExitCode.FAILED)


def test_no_torch_skips_torch_checks(cli: Cli) -> None:
    code, out, _ = cli("check", "--quick", "--no-torch", "--only", "compat.torch", "--json")
    assert json.loads(out)["checks"][0]["status"] == "SKIP"
    assert code == ExitCode.OK


def test_torch_that_cannot_start_makes_the_check_incomplete(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def not_started(code: str, **_: Any) -> ChildResult:
        return ChildResult(ChildOutcome.NOT_STARTED, detail="cannot run python: Permission denied")

    monkeypatch.setattr("gpudiag.probe.torch_runtime.run_python", not_started)
    code, out, _ = cli("check", "--quick", "--only", "compat.torch", "--json")
    assert code == ExitCode.CHECK_INCOMPLETE
    assert json.loads(out)["checks"][0]["status"] == "SKIP"
