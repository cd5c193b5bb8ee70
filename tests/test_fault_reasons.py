"""Drain reasons: the most severe failure first, its GPU and UUID, what to do, steady between runs;
and the per-result actions the rules give where the finding decides."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpudiag.checks import Action, Facts, Options, Status
from gpudiag.checks.base import Steady, Volatile
from gpudiag.checks.rules import BY_ID, CHECKS
from gpudiag.fleet import faults
from gpudiag.fleet.faults import Failed
from gpudiag.model import Machine
from gpudiag.replay import fixtures
from tests import fleet_files as ff
from tests.conftest import Cli

MACHINES = Path(fixtures.__file__).resolve().parent.parent / "machines"


PROCESS = {"state": "found", "user": "dave", "name": "python", "command": "python train.py"}


def fault(check: str, target: str = "GPU 0", action: str = "reset", finding: str = "x", uuid: str = "") -> Failed:
    return Failed(check, target, finding, "node", action, uuid)


def test_the_format() -> None:
    ecc = fault("health.ecc", uuid="GPU-dead0bad-0000-4000-8000-00000000a100")
    assert faults.reason([ecc]) == "gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset"
    init = fault("nvml.init", "", "reboot", "NVIDIA driver/library version mismatch: the driver was upgraded")
    assert faults.reason([init], faults.PROLOG_PREFIX) == (
        "gpudiag prolog: nvml.init: NVIDIA driver/library version mismatch; reboot"
    )
    assert faults.body([]) == ""


def test_the_most_severe_first_then_how_many_more() -> None:
    found = [
        fault("health.clock_events", "GPU 1", "cooling"),
        fault("health.ecc", "GPU 3"),
        fault("health.ecc", "GPU 1"),
        fault("health.ecc", "GPU 1"),  # the same failure twice (two files): counted once
        fault("health.row_remap", "GPU 10", "rma", "row remapping failed: no spare rows left"),
        fault("config.persistence", "GPU 2", "fix_config"),
    ]
    assert faults.body(found) == "health.row_remap GPU10: row remapping exhausted; RMA (+4 more)"
    without_rma = found[:4]
    assert faults.body(without_rma) == "health.ecc GPU1: uncorrected ECC errors; reset (+2 more)"  # GPU 1 before 3
    unknown = [fault("bench-transfer", "cuda:0", "", "H2D 3.1 GB/s, expected 20"), fault("health.ecc", "GPU 5")]
    assert faults.body(unknown) == "health.ecc GPU5: uncorrected ECC errors; reset (+1 more)"
    assert faults.body(unknown[:1]) == "bench-transfer cuda:0: transfer benchmark failed"


def test_a_long_fact_is_cut_never_the_action() -> None:
    long = fault("host.device_nodes", "", "rma", "missing " + ", ".join(f"/dev/nvidia{i}" for i in range(64)))
    text = faults.reason([long, fault("health.ecc")])
    assert len(text) == faults.MAX_REASON and text.endswith("…; RMA (+1 more)")
    for prefix in faults.SOURCES:
        assert len(faults.reason([long], prefix)) <= faults.MAX_REASON
    assert len(faults.HEALTH_CHECK_PREFIX) + 1 + len(faults.body([long])) <= faults.MAX_REASON


def test_text_from_outside_is_escaped() -> None:
    evil = Failed("health.ecc\n", "GPU 0\x1b[2J", "ok\x07", "node", "reset", "GPU-\u2028")
    text = faults.reason([evil])
    assert text.isprintable() and "\\n" in text and "\\x1b" in text and "\\u2028" in text


def test_a_functional_failure_names_its_kind_without_figures() -> None:
    def fact(finding: str) -> str:
        return faults.steady_fact("func.gpu", "reset", finding)

    assert fact("memory pattern read back wrong") == "memory pattern read back wrong"
    assert fact("wrong matmul results: relative error 0.31 > 0.0001 (or NaN/Inf)") == "wrong matmul results"
    assert fact("the test process gave no answer within 8 s (hung?)") == "functional test failed"
    assert faults.steady_fact("bench-transfer", "", "H2D 3.1 GB/s, expected 20") == "transfer benchmark failed"


def test_first_clause() -> None:
    assert faults.first_clause("GPU is lost (fallen off the bus, XID 79): reset the GPU") == (
        "GPU is lost (fallen off the bus, XID 79)"
    )
    assert faults.first_clause("CUDA_VISIBLE_DEVICES='-1' leaves no device (cuInit: CUDA_ERROR_NO_DEVICE (100))") == (
        "CUDA_VISIBLE_DEVICES='-1' leaves no device (cuInit: CUDA_ERROR_NO_DEVICE (100))"
    )
    assert faults.first_clause("set: CUDA_LAUNCH_BLOCKING=1") == "set: CUDA_LAUNCH_BLOCKING=1"  # a word is no fact


def test_a_volatile_finding_is_stated_without_figures() -> None:
    """Every check declares whether its finding stays the same while the fault does (``finding=`` has
    no default); a volatile one's reason carries no figure, whatever its finding says."""
    for check in CHECKS:
        assert isinstance(check.finding, Steady | Volatile), check.id
        if isinstance(check.finding, Volatile):
            for action in ("", *(a.value for a, _ in check.finding.by_action)):
                fact = faults.steady_fact(check.id, action, "GPU 3 at 91 C, 17 errors (was 12)")
                assert fact and not any(c.isdigit() for c in fact), (check.id, action, fact)


# --- steady: two runs over the same fault give the same reason ----------------------------------


def _machine(tmp_path: Path, name: str, base: str, change: dict[str, Any], gpu: int = 0) -> str:
    data = json.loads((MACHINES / f"{base}.json").read_text())
    data = copy.deepcopy(data)
    for key, value in change.items():
        if isinstance(value, dict):
            data["gpus"][gpu].setdefault(key, {}).update(value)
        else:
            data["gpus"][gpu][key] = value
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("base", "first", "second"),
    [
        ("a100-ecc-errors", {"ecc_errors": {"volatile_uncorrected": 2}}, {"ecc_errors": {"volatile_uncorrected": 9}}),
        (
            "a100-ecc-errors",
            {"remapped_rows": {"uncorrectable": 3}, "temperature_c": 93},
            {"remapped_rows": {"uncorrectable": 7}, "temperature_c": 97},
        ),
        (
            "h100x8-healthy",
            {"retired_pages": {"single_bit": 1, "double_bit": 2, "pending": True}},
            {"retired_pages": {"single_bit": 4, "double_bit": 3, "pending": True}},
        ),
        (
            "h100x8-healthy",
            {"retired_pages": {"single_bit": 60, "double_bit": 3, "pending": False}},
            {"retired_pages": {"single_bit": 70, "double_bit": 9, "pending": True}},
        ),
        ("h100x8-healthy", {"temperature_c": 93}, {"temperature_c": 99}),
        (
            "h100x8-healthy",
            {"processes": [{"pid": 77001, "kind": "C", "used_memory_bytes": 1 << 30, "host": PROCESS}]},
            {"processes": [{"pid": 91234, "kind": "C", "used_memory_bytes": 3 << 30, "host": PROCESS}]},
        ),
    ],
)
def test_the_same_fault_twice_gives_the_same_reason(
    cli: Cli, tmp_path: Path, base: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    lines = []
    for name, change in (("first", first), ("second", second)):
        code, _, err = cli("--replay", _machine(tmp_path, name, base, change), "check", "--mode", "prolog")
        assert code == 1 and err.startswith("gpudiag: NOT READY: "), err
        lines.append(err)
    assert lines[0] == lines[1]
    fact = lines[0].split(": ", 3)[3].split(";")[0]
    assert fact and not any(c.isdigit() for c in fact), fact


def test_the_prolog_line_and_drain_give_one_reason(cli: Cli, tmp_path: Path) -> None:
    """`check --mode` and `drain` (from `check --json` files) build the reason the same way."""
    from gpudiag.fleet import drain

    for machine in ("a100-ecc-errors", "gpu-lost", "misconfigured-node", "driver-mismatch", "no-driver"):
        err = cli.replay(machine, "check", "--mode", "prolog")[2]
        path = ff.write(tmp_path, f"{machine}.json", ff.check(machine, "n1"))
        (target,) = drain.load_targets([str(path)])
        line = err.removeprefix("gpudiag: NOT READY: ").rstrip()
        assert faults.reason(faults.node_faults(target.failures)) == f"gpudiag: {line}"


# --- per-result actions in the rules --------------------------------------------------------------


def _results(machine: Machine, check: str, options: Options | None = None) -> list[tuple[Status, Action | None]]:
    facts = Facts(machine=machine, torch=machine.torch_runtime, devices=None)
    return [(r.status, r.action) for r in BY_ID[check].rule(facts, options or Options())][:1]  # GPU 0 or the node


def _with(machine: Machine, **fields: Any) -> Machine:
    gpus = (msgspec.structs.replace(machine.gpus[0], **fields), *machine.gpus[1:])
    return msgspec.structs.replace(machine, gpus=gpus)


def test_the_finding_decides_the_action() -> None:
    from gpudiag.model import Reading, RemappedRows, RetiredPages
    from gpudiag.probe.collect import collect

    base = collect("h100x8-healthy")
    pages = Reading.of(RetiredPages(single_bit=1, double_bit=0, pending=True))
    assert _results(_with(base, retired_pages=pages), "health.retired_pages") == [(Status.FAIL, Action.RESET)]
    full = Reading.of(RetiredPages(single_bit=60, double_bit=5, pending=True))
    assert _results(_with(base, retired_pages=full), "health.retired_pages") == [(Status.FAIL, None)]  # declared: RMA
    assert BY_ID["health.retired_pages"].action is Action.RMA
    failed = Reading.of(RemappedRows(correctable=0, uncorrectable=0, pending=False, failure=True))
    assert _results(_with(base, remapped_rows=failed), "health.row_remap") == [(Status.FAIL, Action.RMA)]
    many = Reading.of(RemappedRows(correctable=0, uncorrectable=600, pending=True, failure=False))
    assert _results(_with(base, remapped_rows=many), "health.row_remap") == [(Status.FAIL, Action.RMA)]
    pending = Reading.of(RemappedRows(correctable=0, uncorrectable=3, pending=True, failure=False))
    assert _results(_with(base, remapped_rows=pending), "health.row_remap") == [(Status.FAIL, None)]  # declared: reset
    for code, action in ((1, Action.RESET), (2, Action.REBOOT), (7, Action.REBOOT), (99, Action.REBOOT)):
        machine = _with(base, recovery_action=Reading.of(code))
        assert _results(machine, "health.recovery_action") == [(Status.FAIL, action)]
    gpus = base
    assert _results(gpus, "nvml.gpu_count", Options(expect_gpus=9)) == [(Status.FAIL, None)]  # declared: reseat
    assert _results(gpus, "nvml.gpu_count", Options(expect_gpus=4)) == [(Status.FAIL, Action.FIX_CONFIG)]
