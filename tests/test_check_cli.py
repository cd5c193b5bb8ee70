"""`gpudiag check` end to end: exit codes, JSON, JUnit, usage errors, the real CPU torch, and the
live path (torch probe, host facts, functional test) wired with injected child results."""

from __future__ import annotations

import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gpudiag.children import protocol
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.probe.child import ChildOutcome, ChildResult, Running
from gpudiag.probe.devices import DeviceFacts, DeviceNode
from gpudiag.replay import fixtures
from tests.conftest import Cli, skip_without_torch


def check_json(cli: Cli, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli(*args, "--json")
    return code, json.loads(out)


def by_id(data: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for c in data["checks"]:
        out.setdefault(c["id"], []).append(c)
    return out


# --- replayed machines -----------------------------------------------------------------


def test_healthy_replay_is_ready(cli: Cli) -> None:
    code, out, err = cli("--replay", "h100x8-healthy", "check", "--quick")
    assert code == ExitCode.OK and err == ""
    counts = check_json(cli, "--replay", "h100x8-healthy", "check", "--quick")[1]["summary"]
    assert counts["pass"] > 50 and counts["warn"] == counts["fail"] == 0
    assert out.splitlines()[-1] == f"READY: {counts['pass']} pass, 0 warn, 0 fail, {counts['skip']} skip"
    assert re.search(r"^PASS  config\.mig +GPU 0-7  MIG disabled$", out, re.M)
    assert "Versions" in out and "torch CUDA build    12.4" in out


@pytest.mark.parametrize(
    ("name", "failing"),
    [
        ("a100-ecc-errors", {"health.ecc", "health.row_remap", "health.recovery_action", "health.clock_events"}),
        ("gpu-lost", {"nvml.gpu_lost"}),
        ("no-driver", {"nvml.init"}),
        ("driver-mismatch", {"nvml.init"}),
        ("misconfigured-node", {"compat.torch", "env.visible_devices", "config.compute_mode", "health.processes"}),
        ("p100-torch-cu128", {"compat.arch"}),
        ("rtx5090-torch-cu124", {"compat.arch"}),
        ("a100-mig-no-instances", {"config.mig"}),
    ],
)
def test_broken_machines_fail_with_exit_1_and_name_the_checks(cli: Cli, name: str, failing: set[str]) -> None:
    code, data = check_json(cli, "--replay", name, "check", "--quick")
    assert code == ExitCode.FAILED and data["verdict"] == "NOT READY"
    assert {c["id"] for c in data["checks"] if c["status"] == "FAIL"} == failing
    assert all(c["fix"] for c in data["checks"] if c["status"] == "FAIL")


def test_strict_turns_warnings_into_failure(cli: Cli) -> None:
    assert cli("--replay", "driver535-torch-cu128", "check", "--quick")[0] == ExitCode.OK
    code, out, _ = cli("--replay", "driver535-torch-cu128", "check", "--quick", "--strict")
    assert code == ExitCode.FAILED
    assert "NOT READY: " in out and "(--strict: warnings fail)" in out


def test_json_is_versioned_and_carries_every_result(cli: Cli) -> None:
    code, data = check_json(cli, "--replay", "a100-ecc-errors", "check", "--quick")
    assert data["schema"] == "gpudiag.check/1"
    assert data["exit_code"] == code == ExitCode.FAILED
    assert data["could_not_run"] == [] and data["strict"] is False
    assert sum(data["summary"].values()) == len(data["checks"])
    assert by_id(data)["health.ecc"] == [
        {
            "id": "health.ecc",
            "area": "Health",
            "status": "FAIL",
            "target": "GPU 0",
            "finding": "2 uncorrected ECC error(s) since the driver loaded",
            "fix": "drain the node; reset the GPU and run a memory diagnostic (dcgmi diag -r 3)",
            "scope": "node",
            "action": "reset",
        }
    ]
    assert data["versions"]["Driver"] == "535.129.03"
    assert set(data["versions"]) == {
        "Driver",
        "CUDA (driver max)",
        "torch",
        "torch CUDA build",
        "cuDNN",
        "NCCL",
        "Python",
        "OS",
    }


def test_junit_has_one_case_per_result(cli: Cli, tmp_path: Path) -> None:
    report = tmp_path / "gpu.xml"
    _, out, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--junit", str(report), "--json")
    cases = ET.parse(report).getroot().findall(".//testcase")
    assert len(cases) == len(json.loads(out)["checks"])
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert "health.ecc[GPU 0]" in failed
    assert any(c.find("skipped") is not None for c in cases)
    assert {c.get("classname") for c in cases} >= {"gpudiag.check.health", "gpudiag.check.nvml"}


def test_junit_under_strict_fails_warnings(cli: Cli, tmp_path: Path) -> None:
    report = tmp_path / "gpu.xml"
    cli("--replay", "driver535-torch-cu128", "check", "--quick", "--strict", "--junit", str(report))
    failed = {c.get("name") for c in ET.parse(report).getroot().iter("testcase") if c.find("failure") is not None}
    assert "compat.driver_cuda" in failed


def test_unwritable_junit_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("--replay", "h100x8-healthy", "check", "--quick", "--junit", str(tmp_path / "no" / "x.xml"))
    assert code == ExitCode.USAGE and err.startswith("gpudiag: cannot write")


def test_only_and_skip(cli: Cli) -> None:
    code, data = check_json(cli, "--replay", "a100-ecc-errors", "check", "--quick", "--only", "config")
    assert code == ExitCode.OK
    assert set(by_id(data)) == {"config.mig", "config.compute_mode", "config.persistence"}
    code, _, _ = cli("--replay", "a100-ecc-errors", "check", "--quick", "--skip", "health,func")
    assert code == ExitCode.OK
    code, data = check_json(cli, "--replay", "a100-ecc-errors", "check", "--only", "health.ecc", "--only", "nvml.init")
    assert set(by_id(data)) == {"health.ecc", "nvml.init"}


def test_requirements_are_checks_of_their_own(cli: Cli) -> None:
    args = ["--require-driver", "550", "--require-cuda", "12.4", "--require-capability", "9.0"]
    args += ["--require-gpu", "H100", "--require-torch", ">=2.3"]
    code, data = check_json(cli, "--replay", "h100x8-healthy", "check", "--quick", *args, "--only", "req")
    assert code == ExitCode.OK
    assert {k: len(v) for k, v in by_id(data).items()} == {
        "req.driver": 1,
        "req.cuda": 2,
        "req.capability": 8,
        "req.gpu": 8,
        "req.torch": 1,
    }
    code, data = check_json(cli, "--replay", "h100x8-healthy", "check", "--require-gpu", "B200", "--only", "req.gpu")
    assert code == ExitCode.FAILED and {c["status"] for c in data["checks"]} == {"FAIL"}


def test_min_free_takes_sizes(cli: Cli) -> None:
    code, data = check_json(
        cli, "--replay", "h100x8-healthy", "check", "--only", "health.free_memory", "--min-free", "79.5GiB"
    )
    assert code == ExitCode.FAILED
    assert "below --min-free 79.5 GiB" in data["checks"][0]["finding"]
    assert cli("--replay", "h100x8-healthy", "check", "--only", "health.free_memory", "--min-free", "20G")[0] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min-free", "20GX"], "invalid size unit 'GX'"),
        (["--min-free", "-1G"], "invalid size"),
        (["--min-free", "nan"], "invalid size"),
        (["--require-driver", "five-fifty"], "expected a version like 550"),
        (["--require-cuda", "12.x"], "expected a version like 12.4"),
        (["--require-capability", "sm_80"], "expected a version like 8.0"),
        (["--require-torch", "=>2"], "expected a specifier"),
        (["--require-gpu", " "], "expected part of a GPU name"),
        (["--only", "health.nope"], "no such check"),
        (["--skip", "gpu"], "no such check"),
        (["--expect-gpus", "-2"], "--expect-gpus -2: must be 0 or more"),
        (["--temp-margin", "-1"], "--temp-margin -1: expected 0 to 50"),
        (["--temp-margin", "x"], "'x' is not a valid int"),
        (["--timeout", "0"], "--timeout 0.0: expected a number of seconds, more than 0, at most a year"),
        (["--timeout", "nan"], "--timeout nan: expected a number of seconds"),
        (["--timeout", "inf"], "--timeout inf: expected a number of seconds"),
        (["--python", sys.executable], "a replay uses the torch recorded in it"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli("--replay", "h100x8-healthy", "check", *args)
    assert code == ExitCode.USAGE
    assert message in err and out == ""


def test_python_must_be_an_interpreter(cli: Cli) -> None:
    code, _, err = cli("check", "--python", "/no/such/python")
    assert code == ExitCode.USAGE and "not an executable file" in err
    code, _, err = cli("check", "--python", sys.executable, "--no-torch")
    assert code == ExitCode.USAGE and "contradict" in err


# --- the live machine: the real CPU torch and this host --------------------------------


@pytest.mark.slow
def test_live_check_on_this_machine_with_the_real_cpu_torch(cli: Cli) -> None:
    skip_without_torch()
    code, data = check_json(cli, "check")
    checks = by_id(data)
    if checks["nvml.init"][0]["status"] == "PASS":
        pytest.skip("this machine has an NVIDIA driver")
    assert code == ExitCode.FAILED
    assert checks["nvml.init"][0]["status"] == "FAIL"
    assert checks["host.device_nodes"][0]["status"] == "FAIL"  # read for real: no /dev/nvidiactl here
    assert checks["host.nouveau"][0]["status"] in ("PASS", "WARN", "FAIL")
    torch_check = checks["compat.torch"][0]
    if "+cpu" in data["versions"]["torch"]:
        assert torch_check["status"] == "FAIL" and "CPU-only" in torch_check["finding"]
        assert checks["compat.arch"][0]["status"] == "SKIP"
    assert checks["func.gpu"][0] == {**checks["func.gpu"][0], "status": "SKIP"}
    assert data["could_not_run"] == []


def test_python_option_checks_another_interpreter(cli: Cli, tmp_path: Path) -> None:
    """The child runs by path under the named interpreter (here one without site-packages, so no torch)."""
    other = tmp_path / "venv-python"
    other.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    other.chmod(0o755)
    code, data = check_json(cli, "check", "--quick", "--only", "compat.torch", "--python", str(other))
    finding = data["checks"][0]
    assert finding["status"] == "FAIL" and code == ExitCode.FAILED  # the named environment lacks torch
    assert "torch is not installed" in finding["finding"]
    assert data["versions"]["torch"].startswith("torch is not installed for")  # not gpudiag's own torch


def live_as(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make the 'live' machine this example, so a test does not depend on the machine it runs on."""
    from gpudiag.probe import collect

    def live_source(environ: Any) -> Any:
        source = collect._replay_source(name)
        source.name = "live"
        return source

    monkeypatch.setattr(collect, "_live_source", live_source)
    monkeypatch.setattr("gpudiag.probe.devices.read_device_facts", lambda minors: HEALTHY_HOST)


def not_started(detail: str) -> Any:
    """A torch child whose interpreter cannot be run."""
    return lambda args, **_: Running(None, time.monotonic(), detail)


def test_no_torch_skips_torch_checks(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    live_as(monkeypatch, "h100x8-healthy")
    code, data = check_json(cli, "check", "--quick", "--no-torch", "--only", "compat")
    status = {c["id"]: (c["status"], c["finding"]) for c in data["checks"]}
    # torch's installed files still say what it is built for; everything torch would have to answer skips
    assert status.pop("compat.driver_cuda")[0] == "PASS"
    assert set(status.values()) == {("SKIP", "--no-torch: torch not started")}
    assert code == ExitCode.OK


def test_torch_that_cannot_start_means_could_not_run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpudiag.probe.torch_runtime.start", not_started("cannot run python: Permission denied"))
    code, out, err = cli("check", "--quick", "--only", "compat.torch", "--json")
    data = json.loads(out)
    assert code == ExitCode.CHECK_INCOMPLETE
    assert data["verdict"] == "UNKNOWN" and data["exit_code"] == ExitCode.CHECK_INCOMPLETE
    assert data["could_not_run"] == ["the torch probe could not start: cannot run python: Permission denied"]
    assert data["checks"][0]["status"] == "SKIP"
    assert err == "gpudiag: could not run: the torch probe could not start: cannot run python: Permission denied\n"


def test_a_failure_outranks_could_not_run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    live_as(monkeypatch, "no-nvml-library")
    monkeypatch.setattr("gpudiag.probe.torch_runtime.start", not_started("x"))
    code, _, err = cli("check", "--quick", "--only", "compat.torch", "--only", "nvml.init")
    assert code == ExitCode.FAILED  # NVML is missing: the node is not ready, whatever else
    assert "could not run" in err


def test_a_missing_nvml_binding_means_could_not_run(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        raise GpudiagError("cannot import pynvml (No module named 'pynvml')", ExitCode.NVML_ERROR)

    monkeypatch.setattr("gpudiag.probe.collect._import_pynvml", broken)
    code, out, err = cli("check", "--quick")
    assert code == ExitCode.CHECK_INCOMPLETE and out == ""
    assert err == "gpudiag: check could not run: cannot import pynvml (No module named 'pynvml')\n"


# --- the live path on a fixture: one torch child (probe + functional test) injected ----


HEALTHY_HOST = DeviceFacts(
    tuple(DeviceNode(f"/dev/{n}", True, True) for n in ("nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(8)))),
    frozenset({"nvidia", "nvidia_uvm"}),
    True,
)

RUNTIME = {
    "python": "/venv/bin/python",
    "version": "2.5.1+cu124",
    "cuda": "12.4",
    "cuda_available": True,
    "cuda_error": "",
    "device_count": 8,
    "arch_list": ["sm_80", "sm_90"],
    "cudnn_version": 90100,
    "cudnn_compiled": [9, 1, 0],
    "nccl_version": [2, 21, 5],
    "devices": [],
    "import_seconds": 1.4,
    "init_seconds": 0.6,
}


class FakeTorchChild:
    """Stands in for the torch child: the probe's stage lines, then the functional test's lines.

    ``stop_at``: the probe stage where the child hangs (``"importing"``); ``bad``: the GPU on which
    the functional test ends with ``outcome``. It records, per child, whether the parent asked for
    the functional test (on the child's stdin, once NVML was read) and the timeout it was given.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.deadlines: list[str] = []
        self.outcome = ChildOutcome.OK
        self.bad = -1
        self.stop_at = ""
        self.not_started = False
        self.started_before_nvml: list[bool] = []
        self.nvml_read = False
        machine = fixtures.load("h100x8-healthy")[0]
        self.uuids = [(g.uuid.value or "").removeprefix("GPU-") for g in machine.gpus]

    def __call__(self, args: list[str], **_: Any) -> Running:
        self.started_before_nvml.append(not self.nvml_read)
        if self.not_started:
            return Running(None, time.monotonic(), "cannot run /venv/bin/python: Permission denied")
        return FakeRunning(self)


class FakeRunning(Running):
    def __init__(self, owner: FakeTorchChild) -> None:
        super().__init__(None, time.monotonic())
        self.owner, self.settings = owner, ""

    def send(self, line: str) -> None:
        self.settings = line

    def kill(self) -> None:
        pass

    def finish(self, on_line: Any, deadline: Any) -> ChildResult:
        owner, functional_test = self.owner, bool(self.settings)
        owner.calls.append("probe+functional" if functional_test else "probe")

        def stage(facts: dict[str, Any]) -> str:
            return protocol.STAGE + json.dumps(facts)

        on_line(stage({"stage": "importing", "python": "/venv/bin/python"}))
        owner.deadlines.append(deadline()[1])
        if owner.stop_at == "importing":
            return ChildResult(ChildOutcome.TIMEOUT, detail=deadline()[1])
        on_line(stage({"stage": "runtime", **RUNTIME}))
        if functional_test:
            owner.deadlines.append(deadline()[1])
            for idx, uuid in enumerate(owner.uuids):
                on_line(f"{protocol.START} {idx} {uuid}")
                if idx == owner.bad:
                    return ChildResult(owner.outcome, detail="crashed with SIGSEGV")
                on_line(f"{protocol.LOADED} {idx} {uuid}")
                result = {"torch_index": idx, "uuid": uuid, "ok": True, "error": "", "context_seconds": 0.3}
                result |= {"memory_ok": True, "matmul_rel_error": 2e-7, "tflops": 51.2}
                on_line(f"{protocol.GPU} {json.dumps(result)}")
        return ChildResult(owner.outcome, dict(RUNTIME))


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> FakeTorchChild:
    """Make the 'live' machine the healthy H100 example, with its host facts and torch child faked."""
    from gpudiag.probe import collect

    fake = FakeTorchChild()

    def live_source(environ: Any) -> Any:
        fake.nvml_read = True
        source = collect._replay_source("h100x8-healthy")
        source.name = "live"
        return source

    monkeypatch.setattr(collect, "_live_source", live_source)
    monkeypatch.setattr("gpudiag.probe.torch_runtime.start", fake)
    monkeypatch.setattr("gpudiag.probe.devices.read_device_facts", lambda minors: HEALTHY_HOST)
    return fake


def test_full_live_check_runs_the_functional_test_in_the_torch_child(cli: Cli, child: FakeTorchChild) -> None:
    code, data = check_json(cli, "check")
    checks = by_id(data)
    assert code == ExitCode.OK, [c for c in data["checks"] if c["status"] != "PASS"]
    assert data["verdict"] == "READY"
    assert child.calls == ["probe+functional"]  # one child: one import, one CUDA initialisation
    assert child.started_before_nvml == [True]  # torch imports while NVML and the host are read
    assert [c["target"] for c in checks["func.gpu"]] == [f"GPU {i}" for i in range(8)]
    assert checks["func.gpu"][0]["finding"] == (
        "context 0.30 s, fp32 matmul 51.2 TFLOP/s, rel. error 2.0e-07, PCIe Gen5 x16 under load"
    )
    assert checks["health.pcie"][0]["finding"] == "Gen5 x16 under the functional test's load (Gen5 x16 max)"
    assert checks["host.device_nodes"][0]["status"] == "PASS"
    assert checks["compat.torch"][0]["finding"].startswith("torch 2.5.1+cu124 (CUDA 12.4) sees 8 device(s)")
    assert data["versions"]["torch"] == "2.5.1+cu124  (/venv/bin/python)"


def test_quick_asks_torch_only(cli: Cli, child: FakeTorchChild) -> None:
    code, data = check_json(cli, "check", "--quick")
    assert code == ExitCode.OK and child.calls == ["probe"]
    assert by_id(data)["func.gpu"][0]["finding"] == "--quick"


def test_a_gpu_that_crashes_the_test_fails_the_node_and_torch_stays_good(cli: Cli, child: FakeTorchChild) -> None:
    child.outcome, child.bad = ChildOutcome.CRASHED, 3
    code, data = check_json(cli, "check")
    failed = [c for c in data["checks"] if c["status"] == "FAIL"]
    assert code == ExitCode.FAILED
    assert [(c["id"], c["target"]) for c in failed] == [("func.gpu", "GPU 3")]
    assert failed[0]["finding"].startswith("the test process crashed with SIGSEGV while testing this GPU")
    assert [c["target"] for c in by_id(data)["func.gpu"]] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]


def test_a_torch_child_that_cannot_start_means_could_not_run(cli: Cli, child: FakeTorchChild) -> None:
    child.not_started = True
    code, data = check_json(cli, "check")
    assert code == ExitCode.CHECK_INCOMPLETE
    assert data["could_not_run"] == ["the torch probe could not start: cannot run /venv/bin/python: Permission denied"]
    assert by_id(data)["func.gpu"][0]["finding"] == "needs a torch that can use CUDA (see compat.torch)"


def test_selected_checks_that_need_no_torch_do_not_start_it(cli: Cli, child: FakeTorchChild) -> None:
    code, _, _ = cli("check", "--only", "health", "--only", "nvml")
    assert code == ExitCode.OK and child.calls == []


def test_torch_hung_while_importing(cli: Cli, child: FakeTorchChild) -> None:
    child.stop_at = "importing"
    code, data = check_json(cli, "check")
    checks = by_id(data)
    assert code == ExitCode.FAILED
    assert checks["compat.torch"][0]["finding"] == "torch hung during `import torch`: no answer within 90 s"
    assert checks["func.gpu"][0]["finding"] == "needs a torch that can use CUDA (see compat.torch)"
    assert checks["compat.arch"][0]["finding"] == "torch does not work here (see compat.torch)"


@pytest.mark.gpu
def test_full_check_on_a_real_gpu(cli: Cli) -> None:
    """On a GPU machine with a CUDA torch: the whole check, functional test included, in seconds."""
    import time

    torch = pytest.importorskip("torch")
    if torch.version.cuda is None:
        pytest.skip("a CUDA build of torch is needed")
    start = time.perf_counter()
    _, data = check_json(cli, "check", "--allow-processes")
    seconds = time.perf_counter() - start
    checks = by_id(data)
    assert checks["compat.torch"][0]["status"] in ("PASS", "WARN"), checks["compat.torch"]
    assert all(c["status"] == "PASS" for c in checks["func.gpu"]), checks["func.gpu"]
    assert all("TFLOP/s" in c["finding"] for c in checks["func.gpu"])
    assert data["could_not_run"] == []
    assert seconds < 30 + 10 * len(checks["func.gpu"])


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--replay", "h100x8-healthy", "check", "--quick"], ["check", "--only", "compat"]])
def test_torch_is_never_imported_by_gpudiag_itself(args: list[str]) -> None:
    import subprocess

    code = (
        "import sys\n"
        "from gpudiag.cli.app import main\n"
        f"sys.argv = ['gpudiag', *{args!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('IMPORTED' if 'torch' in sys.modules else 'clean')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.endswith("clean"), done.stderr


def test_the_timeout_is_torchs_and_the_functional_test_has_its_own_budget(cli: Cli, child: FakeTorchChild) -> None:
    code, _ = check_json(cli, "check", "--timeout", "5")
    assert code == ExitCode.OK
    assert child.deadlines[0] == "no answer within 5 s (hung, e.g. in CUDA initialisation)"
    assert child.deadlines[1].startswith("the functional test did not finish within its budget of 160 s")


HANGING_TORCH = "import time\ntime.sleep(60)\n"


@pytest.mark.slow
def test_a_torch_that_hangs_in_import_gives_up_at_the_users_timeout(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real child and a torch package whose import hangs: the check ends after --timeout, not later."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(HANGING_TORCH)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    live_as(monkeypatch, "h100x8-healthy")
    start = time.monotonic()
    code, data = check_json(cli, "check", "--timeout", "2", "--only", "compat.torch")
    seconds = time.monotonic() - start
    assert seconds < 10
    assert code == ExitCode.FAILED
    assert data["checks"][0]["finding"] == "torch hung during `import torch`: no answer within 2 s"
