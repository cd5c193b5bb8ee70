"""`gpudiag visible` end to end, including --probe against a real and a simulated CUDA runtime."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.probe.child import ChildOutcome, ChildResult
from tests.conftest import Cli


def test_value_is_evaluated_without_touching_the_environment(cli: Cli) -> None:
    code, out, _ = cli("--replay", "h100x8-healthy", "visible", "--value", "2,3")
    assert code == 0
    assert "cuda:0     2   NVIDIA H100 80GB HBM3" in out
    assert "cuda:1     3" in out
    assert "device_ids" in out and "set_device" in out


def test_recorded_environment_is_used_in_a_replay(cli: Cli) -> None:
    code, out, _ = cli("--replay", "v100x4-tutorial", "visible")
    assert code == 0
    assert "CUDA_VISIBLE_DEVICES='0,1,2,3'" in out and "[recorded environment]" in out


def test_json_is_versioned(cli: Cli) -> None:
    code, out, _ = cli("--replay", "mixed-gpus-workstation", "visible", "--value", "0", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["schema"] == "gpudiag.visible/1"
    assert data["order_is_heuristic"] is True
    assert data["devices"][0] == {
        "cuda_ordinal": 0,
        "nvml_index": 1,
        "mig_index": None,
        "uuid": "GPU-0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e",
        "pci_bus_id": "00000000:21:00.0",
        "name": "NVIDIA RTX A6000",
        "memory_total_bytes": 49140 * 1024 * 1024,
    }


def test_select_prints_export_lines(cli: Cli) -> None:
    code, out, _ = cli("--replay", "mixed-gpus-workstation", "visible", "--select", "1")
    assert code == 0
    assert out.splitlines()[0] == "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--order", "SLOWEST"], "use FASTEST_FIRST or PCI_BUS_ID"),
        (["--value", "1", "--unset"], "choose one of --value and --unset"),
        (["--probe"], "cannot probe a replayed machine"),
        (["--select", "12"], "no GPU with index 12"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "visible", *args)
    assert code == ExitCode.USAGE
    assert message in err


def test_nvml_unavailable_gives_its_code(cli: Cli) -> None:
    code, _, err = cli("--replay", "driver-mismatch", "visible")
    assert code == ExitCode.NVML_VERSION_MISMATCH
    assert "version mismatch" in err


def test_probe_with_the_real_cpu_only_torch_says_so(cli: Cli) -> None:
    pytest.importorskip("torch")
    # Live machine here has no driver: visible stops before probing with NVML's reason.
    code, _, err = cli("visible", "--probe")
    assert "NVML" in err or "driver" in err
    if code == ExitCode.OK:
        pytest.skip("this machine has a working NVIDIA driver")
    assert code in (ExitCode.NVML_LIBRARY_NOT_FOUND, ExitCode.NVML_DRIVER_NOT_LOADED)


def _fake_child(data: dict[str, Any], outcome: ChildOutcome = ChildOutcome.OK) -> Any:
    def run_python(code: str, **_: Any) -> ChildResult:
        return ChildResult(outcome, data, "" if outcome is ChildOutcome.OK else "crashed with SIGSEGV")

    return run_python


def test_probe_agreement_and_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.cli import visible_cmd
    from gpudiag.testing.fixtures import load
    from gpudiag.visibility import resolve

    machine = load("h100x8-healthy")[0]
    resolution = resolve(machine, "2,3")
    agree = {
        "devices": [{"uuid": "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2002"}, {"uuid": "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003"}]
    }
    monkeypatch.setattr("gpudiag.probe.child.run_python", _fake_child({**agree, "torch": "2.5.1"}))
    (status, problems), code = visible_cmd._probe(resolution, "2,3", "FASTEST_FIRST")
    assert code is ExitCode.OK and status.startswith("agrees") and problems == ()

    swapped = {"devices": list(reversed(agree["devices"]))}
    monkeypatch.setattr("gpudiag.probe.child.run_python", _fake_child(swapped))
    (status, problems), code = visible_cmd._probe(resolution, "2,3", "FASTEST_FIRST")
    assert code is ExitCode.FAILED and "DISAGREES" in status and len(problems) == 2

    monkeypatch.setattr("gpudiag.probe.child.run_python", _fake_child({}, ChildOutcome.CRASHED))
    (status, _), code = visible_cmd._probe(resolution, "2,3", "FASTEST_FIRST")
    assert code is ExitCode.NO_CUDA_DEVICE and "SIGSEGV" in status


def test_probe_child_with_real_cpu_torch_reports_a_cpu_build() -> None:
    pytest.importorskip("torch")
    from gpudiag.probe.child import run_python
    from gpudiag.visibility import PROBE_CODE

    result = run_python(PROBE_CODE, timeout=120)
    assert result.ok, result.detail
    if result.data.get("devices"):
        pytest.skip("this torch sees CUDA devices")
    assert "CPU-only build" in result.data["error"] or "sees no CUDA device" in result.data["error"]
