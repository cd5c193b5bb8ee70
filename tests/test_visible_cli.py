"""`gpudiag visible` end to end, including --probe against a real and a simulated CUDA runtime."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gpudiag.exitcodes import ExitCode
from gpudiag.model import Machine
from gpudiag.probe.child import ChildOutcome, ChildResult
from gpudiag.replay.fixtures import load
from tests.conftest import Cli, skip_without_torch

ROOT = Path(__file__).resolve().parent.parent
BOX = "tests/machines/a100x2-mig-beside-full-gpu.json"
H100 = load("h100x8-healthy")[0]
UUID = {i: f"8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b200{i}" for i in range(8)}
BUS = {g.index: g.pci_bus_id.get("") for g in H100.gpus}


def test_value_is_evaluated_without_touching_the_environment(cli: Cli) -> None:
    code, out, _ = cli("--replay", "h100x8-healthy", "visible", "--value", "2,3")
    assert code == 0
    assert "CUDA_VISIBLE_DEVICES='2,3' [--value]   CUDA_DEVICE_ORDER=FASTEST_FIRST [unset: CUDA's default]" in out
    assert "cuda:0     2   NVIDIA H100 80GB HBM3   GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2002   00000000:3A:00.0" in out
    assert "cuda:1     3" in out
    assert "device_ids=[0, 1], not [2, 3]" in out and "set_device(local_rank)" in out


def test_recorded_environment_is_used_in_a_replay(cli: Cli) -> None:
    code, out, _ = cli("--replay", "v100x4-tutorial", "visible")
    assert code == 0
    assert "CUDA_VISIBLE_DEVICES='0,1,2,3' [recorded environment]" in out
    code, out, _ = cli("--replay", "v100x4-tutorial", "visible", "--unset", "--order", "pci_bus_id")
    assert "(unset: every device) [--unset]" in out and "CUDA_DEVICE_ORDER='PCI_BUS_ID' [--order]" in out


def test_a_bad_recorded_order_is_shown_as_written_and_as_used(cli: Cli, tmp_path: Path) -> None:
    data = json.loads((ROOT / "gpudiag/machines/mixed-gpus-workstation.json").read_text())
    data["env"] = [["CUDA_VISIBLE_DEVICES", "0"], ["CUDA_DEVICE_ORDER", "pci_bus_id"]]
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data))
    code, out, _ = cli("--replay", str(path), "visible")
    assert code == 0
    assert "CUDA_DEVICE_ORDER='pci_bus_id' [recorded environment] → FASTEST_FIRST" in out
    assert "write PCI_BUS_ID" in out and "NVIDIA RTX A6000" in out


def test_dropped_entries_warnings_and_assumptions_are_all_shown(cli: Cli) -> None:
    code, out, _ = cli("--replay", "mixed-gpus-workstation", "visible", "--value", "0,7,1")
    assert code == 0
    lines = out.splitlines()
    assert any(re.match(r"0\s+'0'\s+used\s+device 0 in CUDA's heuristic order = nvidia-smi's GPU 1", x) for x in lines)
    assert any(re.match(r"1\s+'7'\s+dropped\s+out of range: only 2 device\(s\)", x) for x in lines)
    assert any(re.match(r"2\s+'1'\s+ignored\s+after an invalid entry", x) for x in lines)
    for heading in ("How CUDA reads the list", "Warnings", "PyTorch reads the variable differently", "In your code"):
        assert heading in lines
    code, out, _ = cli("--replay", BOX, "visible", "--value", "1,0")
    assert "Undocumented behaviour gpudiag assumes (check with --probe)" in out
    assert "[undocumented]" in out and "hides the non-MIG GPU 1" in out


def test_json_is_versioned_and_keeps_the_released_keys(cli: Cli) -> None:
    code, out, _ = cli("--replay", "mixed-gpus-workstation", "visible", "--value", "0", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["schema"] == "gpudiag.visible/1"
    released = {"schema", "origin", "cuda_visible_devices", "cuda_device_order", "order_is_heuristic", "devices",
                "entries", "warnings", "narrowed_by", "hints", "probe"}  # fmt: skip
    assert released <= set(data)
    assert data["order_is_heuristic"] is True and data["cuda_device_order_value"] is None
    device = data["devices"][0]
    assert {k: device[k] for k in ("cuda_ordinal", "nvml_index", "mig_index", "uuid", "pci_bus_id", "name")} == {
        "cuda_ordinal": 0,
        "nvml_index": 1,
        "mig_index": None,
        "uuid": "GPU-0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e",
        "pci_bus_id": "00000000:21:00.0",
        "name": "NVIDIA RTX A6000",
    }
    assert device["memory_total_bytes"] == 49140 * 1024 * 1024
    assert data["entries"][0] == {"position": 0, "token": "0", "outcome": "used",
                                  "reason": "device 0 in CUDA's heuristic order = nvidia-smi's GPU 1",
                                  "kind": "index", "nvml_index": 1, "mig_index": None, "documented": False}  # fmt: skip
    assert data["pytorch"]["nvml_index_by_cuda_ordinal"] == [{"cuda_ordinal": 0, "nvml_index": 0, "error": None}]


def test_json_for_a_mig_device(cli: Cli) -> None:
    legacy = "MIG-GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c/5/0"
    _, out, _ = cli("--replay", "a100-mig", "visible", "--json", "--value", legacy)
    (device,) = json.loads(out)["devices"]
    assert device["mig_index"] == 1 and device["gpu_instance_id"] == 5 and device["compute_instance_id"] == 0
    assert device["uuid"].startswith("MIG-2e3f") and device["parent_uuid"].startswith("GPU-4d5e")
    assert device["memory_total_bytes"] == 10334765056


def test_select_prints_lines_a_shell_can_eval(cli: Cli) -> None:
    code, out, _ = cli("--replay", "mixed-gpus-workstation", "visible", "--select", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1"
    assert lines[1] == "# or, immune to ordering: export CUDA_VISIBLE_DEVICES=GPU-0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"
    assert lines[2] == "# then cuda:0 = GPU 1 (NVIDIA RTX A6000)"
    if shutil.which("sh"):
        shown = subprocess.run(["sh", "-c", out + "\necho $CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES"],
                               capture_output=True, text=True, check=True)  # fmt: skip
        assert shown.stdout.strip() == "PCI_BUS_ID 1"
    code, out, _ = cli("--replay", "a100-mig", "visible", "--select", "MIG-9f8e")
    assert out.splitlines() == [
        "export CUDA_VISIBLE_DEVICES=MIG-9f8e7d6c-5b4a-5392-8170-6f5e4d3c2b1a",
        "# then cuda:0 = GPU 0 MIG 2 (NVIDIA A100-SXM4-40GB MIG 1g.5gb)",
    ]
    code, out, _ = cli("--replay", "h100x8-healthy", "visible", "--select", "5,00000000:18:00.0", "--json")
    data = json.loads(out)
    assert data["select"]["nvml_indices"] == [5, 0] and [d["nvml_index"] for d in data["devices"]] == [5, 0]
    assert data["select"]["exports"][0].endswith("CUDA_VISIBLE_DEVICES=5,0")


@pytest.mark.parametrize(
    ("machine", "args", "message"),
    [
        ("h100x8-healthy", ["--order", "SLOWEST"], "use FASTEST_FIRST or PCI_BUS_ID"),
        ("h100x8-healthy", ["--value", "1", "--unset"], "choose one of --value and --unset"),
        ("h100x8-healthy", ["--probe"], "cannot probe a replayed machine"),
        ("h100x8-healthy", ["--select", "12"], "no GPU with index 12"),
        ("a100-mig", ["--select", "0"], "select one of its MIG instances"),
        ("gpu-lost", ["--select", "2"], "GPU 2 is lost"),
    ],
)
def test_bad_options_are_usage_errors(cli: Cli, machine: str, args: list[str], message: str) -> None:
    code, out, err = cli("--replay", machine, "visible", *args)
    assert code == ExitCode.USAGE
    assert message in err and out == "" and len(err.strip().splitlines()) == 1


def test_nvml_unavailable_gives_its_code(cli: Cli) -> None:
    code, _, err = cli("--replay", "driver-mismatch", "visible")
    assert code == ExitCode.NVML_VERSION_MISMATCH
    assert "version mismatch" in err


def test_narrow_console_never_cuts_a_uuid(cli: Cli) -> None:
    for width in (120, 80, 60):
        _, out, _ = cli("--replay", "a100-mig", "visible", width=width)
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("cuda:0"))
        end = lines.index("", start)
        assert "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b" in "".join("".join(lines[start:end]).split()), out
        assert "…" not in "".join(lines[start:end])
        assert max(len(line) for line in lines) <= width


@pytest.mark.slow
def test_the_command_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['gpudiag', '--replay', 'h100x8-healthy', 'visible', '--value', '2,3', '--json']\n"
        "from gpudiag.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["schema"] == "gpudiag.visible/1"


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=30))
def test_any_value_on_the_command_line_gives_output_not_a_traceback(cli: Cli, value: str) -> None:
    for machine in ("h100x8-healthy", BOX):
        code, out, err = cli("--replay", machine, "visible", f"--value={value}")
        assert code == 0, err
        assert "CUDA_VISIBLE_DEVICES=" in out
        code, out, _ = cli("--replay", machine, "visible", f"--value={value}", "--json")
        assert json.loads(out)["cuda_visible_devices"] == value


# --- --probe ----------------------------------------------------------------------------


def _live(monkeypatch: pytest.MonkeyPatch, machine: Machine) -> None:
    """Make the command read `machine` as if it were this live machine."""
    monkeypatch.setattr(
        "gpudiag.cli.visible_run.collect", lambda replay=None, facts=None: replace(machine, source="live")
    )


CPU_TORCH = "__version__ = '2.13.0+cpu'\n\nclass version:\n    cuda = None\n"


@pytest.fixture
def cpu_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The probe child finds a CPU-only torch, whatever torch this machine has (a CUDA one would answer)."""
    package = tmp_path / "fake-torch" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(CPU_TORCH)
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    return "2.13.0+cpu"


@pytest.mark.slow
def test_probe_on_this_machine_says_plainly_why_cuda_cannot_be_asked(cli: Cli) -> None:
    skip_without_torch()
    code, out, err = cli("visible", "--probe")
    if code in (ExitCode.OK, ExitCode.FAILED):
        pytest.skip("this machine has a working NVIDIA driver")
    # No driver here: NVML's reason (one line on stderr) and what the probe found; CUDA could not
    # be asked, so exit 3, as the README's --probe row and the exit-code table say.
    assert code == ExitCode.NO_CUDA_DEVICE
    assert len(err.strip().splitlines()) == 1
    assert "gpudiag cannot compute the mapping" in out
    assert "CUDA runtime probe (a child process with this setting): could not ask CUDA" in out
    assert "cannot be loaded" in out or "cuInit failed" in out
    assert "CPU-only build: it cannot see CUDA devices" in out or "is not installed" in out


@pytest.mark.slow
def test_probe_with_a_cpu_only_torch_and_no_driver(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, cpu_torch: str, tmp_path: Path
) -> None:
    torch_version = cpu_torch
    _live(monkeypatch, H100)
    monkeypatch.setenv("GPUDIAG_LIBCUDA", str(tmp_path / "libcuda.so.1"))  # no driver, on any machine
    code, out, _ = cli("visible", "--probe", "--value", "2,3", width=400)
    assert code == ExitCode.NO_CUDA_DEVICE
    assert "cuda:0     2" in out  # the computed mapping is still shown
    assert f"this torch ({torch_version}) is a CPU-only build: it cannot see CUDA devices" in out
    assert f"no NVIDIA driver here: {tmp_path / 'libcuda.so.1'} cannot be loaded" in out
    code, out, _ = cli("visible", "--probe", "--value", "2,3", "--json")
    probe = json.loads(out)["probe"]
    assert probe["status"] == "could_not_run"
    assert [s["answered"] for s in probe["sources"]] == [False, False]


def _fake_child(data: dict[str, Any], outcome: ChildOutcome = ChildOutcome.OK) -> Callable[..., ChildResult]:
    seen: dict[str, Any] = {}

    def run_child(args: list[str], **kwargs: Any) -> ChildResult:
        seen.update(kwargs.get("env") or {})
        return ChildResult(outcome, data, "" if outcome is ChildOutcome.OK else "crashed with SIGSEGV")

    run_child.seen = seen  # type: ignore[attr-defined]
    return run_child


def _torch_answer(*indices: int, before: int | None = None) -> dict[str, Any]:
    devices = [{"name": "NVIDIA H100 80GB HBM3", "uuid": UUID[i], "total_memory_bytes": 85520809984} for i in indices]
    answer: dict[str, Any] = {"label": "torch 2.5.1 (CUDA 12.4)", "devices": devices}
    if before is not None:
        answer["count_before_init"] = before
    return {"torch": answer, "driver": {"label": "CUDA driver API", "error": "no NVIDIA driver here"}}


def test_probe_agreement_is_rendered(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _live(monkeypatch, H100)
    fake = _fake_child(_torch_answer(2, 3, before=2))
    monkeypatch.setattr("gpudiag.probe.child.run_child", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # the probe must use --value, not this
    code, out, _ = cli("visible", "--probe", "--value", "2,3", "--order", "PCI_BUS_ID", width=250)
    assert code == ExitCode.OK
    assert (
        "CUDA runtime probe (a child process with this setting): agrees: torch 2.5.1 (CUDA 12.4) (2 device(s))" in out
    )
    assert f"torch 2.5.1 (CUDA 12.4): 2 device(s): cuda:0 {UUID[2]}, cuda:1 {UUID[3]}" in out
    assert "torch.cuda.device_count() before CUDA initialised: 2" in out
    assert "CUDA driver API: no NVIDIA driver here" in out
    assert fake.seen["CUDA_VISIBLE_DEVICES"] == "2,3" and fake.seen["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # type: ignore[attr-defined]


def test_probe_disagreement_is_reported_not_hidden(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _live(monkeypatch, H100)
    monkeypatch.setattr("gpudiag.probe.child.run_child", _fake_child(_torch_answer(3, 2, 5, before=1)))
    code, out, _ = cli("visible", "--probe", "--value", "2,3", width=250)
    assert code == ExitCode.FAILED
    assert "DISAGREES with the computed mapping" in out
    assert "disagreement: torch 2.5.1 (CUDA 12.4) sees 3 device(s), gpudiag computed 2" in out
    assert (
        f"disagreement: torch 2.5.1 (CUDA 12.4): cuda:0 is NVIDIA H100 80GB HBM3 {UUID[3]}; gpudiag computed GPU 2"
        in out
    )
    assert "torch.cuda.device_count() before CUDA initialised returned 1; gpudiag predicted 2" in out
    code, out, _ = cli("visible", "--probe", "--value", "2,3", "--json")
    probe = json.loads(out)["probe"]
    assert probe["status"] == "disagrees" and len(probe["disagreements"]) == 4
    assert probe["sources"][1]["devices"][0]["uuid"] == UUID[3]


def test_probe_that_crashes_or_unsets_the_variable(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _live(monkeypatch, H100)
    monkeypatch.setattr("gpudiag.probe.child.run_child", _fake_child({}, ChildOutcome.CRASHED))
    code, out, _ = cli("visible", "--probe")
    assert code == ExitCode.NO_CUDA_DEVICE
    assert "could not ask CUDA: the probe process crashed with SIGSEGV" in out
    fake = _fake_child(_torch_answer(*range(8)))
    monkeypatch.setattr("gpudiag.probe.child.run_child", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    code, _, _ = cli("visible", "--probe", "--unset")
    assert code == ExitCode.OK and "CUDA_VISIBLE_DEVICES" not in fake.seen  # type: ignore[attr-defined]


# --- a fake libcuda: the real probe child, its ctypes calls and the comparison ------------

FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <string.h>
typedef struct { unsigned char bytes[16]; } CUuuid;
static const int count = COUNT;
static const char *names[] = {NAMES};
static const char *buses[] = {BUSES};
static const unsigned char uuids[][16] = {UUIDS};
int cuInit(unsigned int flags) { const char *rc = getenv("FAKE_CUINIT_RC"); return rc ? atoi(rc) : (count ? 0 : 100); }
int cuDeviceGetCount(int *n) { *n = count; return 0; }
int cuDeviceGet(int *dev, int ordinal) { if (ordinal < 0 || ordinal >= count) return 101; *dev = ordinal; return 0; }
int cuDeviceGetName(char *name, int len, int dev) { strncpy(name, names[dev], len - 1); name[len - 1] = 0; return 0; }
int cuDeviceGetUuid_v2(CUuuid *uuid, int dev) { memcpy(uuid->bytes, uuids[dev], 16); return 0; }
int cuDeviceGetPCIBusId(char *bus, int len, int dev) { strncpy(bus, buses[dev], len - 1); bus[len - 1] = 0; return 0; }
int cuDeviceTotalMem_v2(size_t *bytes, int dev) { *bytes = (size_t)85520809984ULL; return 0; }
int cuGetErrorName(int error, const char **text) {
    *text = error == 999 ? "CUDA_ERROR_UNKNOWN" : error == 101 ? "CUDA_ERROR_INVALID_DEVICE"
          : error == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_OTHER";
    return 0;
}
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[int]], str]:
    """Build a libcuda.so whose runtime 'sees' these H100 GPUs, in this order."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build a fake libcuda")
    directory = tmp_path_factory.mktemp("libcuda")

    def build(indices: list[int]) -> str:
        def uuid_bytes(i: int) -> str:
            raw = bytes.fromhex(UUID[i].replace("-", ""))
            return "{" + ",".join(str(b) for b in raw) + "}"

        cuda_bus = {i: "0000:" + BUS[i].split(":", 1)[1] for i in indices}  # the driver's 4-digit domain
        source = (
            FAKE_LIBCUDA.replace("COUNT", str(len(indices)))
            .replace("NAMES", ",".join('"NVIDIA H100 80GB HBM3"' for _ in indices) or "0")
            .replace("BUSES", ",".join(f'"{cuda_bus[i]}"' for i in indices) or "0")
            .replace("UUIDS", ",".join(uuid_bytes(i) for i in indices) or "{0}")
        )
        name = "_".join(map(str, indices)) or "none"
        c_file, so_file = directory / f"cuda_{name}.c", directory / f"libcuda_{name}.so"
        c_file.write_text(source)
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(so_file), str(c_file)], check=True, capture_output=True)
        return str(so_file)

    return build


@pytest.mark.slow
@pytest.mark.parametrize(
    ("value", "order", "runtime", "code", "status"),
    [
        ("2,3", None, [2, 3], ExitCode.OK, "agrees"),
        ("0,2,-1,1", None, [0, 2], ExitCode.OK, "agrees"),
        ("2,3", None, [3, 2], ExitCode.FAILED, "disagrees"),
        ("0,2,-1,1", None, [0, 2, 1], ExitCode.FAILED, "disagrees"),  # a runtime that ignored the -1 rule
        ("", None, [], ExitCode.OK, "agrees"),  # cuInit: CUDA_ERROR_NO_DEVICE
    ],
)
def test_probe_child_through_the_driver_api(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    fake_libcuda: Callable[[list[int]], str],
    cpu_torch: str,
    value: str,
    order: str | None,
    runtime: list[int],
    code: int,
    status: str,
) -> None:
    _live(monkeypatch, H100)
    monkeypatch.setenv("GPUDIAG_LIBCUDA", fake_libcuda(runtime))
    got, out, _ = cli("visible", "--probe", f"--value={value}", "--json")
    probe = json.loads(out)["probe"]
    assert got == code and probe["status"] == status, probe
    driver = probe["sources"][0]
    assert driver["answered"] and [d["uuid"] for d in driver["devices"]] == [UUID[i] for i in runtime]
    assert all(d["memory_total_bytes"] == 85520809984 for d in driver["devices"])


@pytest.mark.slow
def test_probe_child_reports_a_failing_cuinit(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, fake_libcuda: Callable[[list[int]], str], cpu_torch: str
) -> None:
    _live(monkeypatch, H100)
    monkeypatch.setenv("GPUDIAG_LIBCUDA", fake_libcuda([0]))
    monkeypatch.setenv("FAKE_CUINIT_RC", "999")
    code, out, _ = cli("visible", "--probe", "--value", "0", width=250)
    # a cuInit error is CUDA's answer (no device, and why), not "could not ask CUDA"
    assert code == ExitCode.FAILED
    assert "CUDA driver API (cuInit in a child process) sees 0 device(s) (cuInit: CUDA_ERROR_UNKNOWN (999))" in out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rc", "value", "code", "status"),
    [
        ("101", "0,0", ExitCode.OK, "agrees"),  # driver 580: a repeated device fails cuInit with 101
        ("100", "0,0", ExitCode.FAILED, "disagrees"),  # the error must be the predicted one
        ("100", "9", ExitCode.OK, "agrees"),
    ],
)
def test_probe_compares_cuinits_error_with_the_prediction(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    fake_libcuda: Callable[[list[int]], str],
    cpu_torch: str,
    rc: str,
    value: str,
    code: int,
    status: str,
) -> None:
    _live(monkeypatch, H100)
    monkeypatch.setenv("GPUDIAG_LIBCUDA", fake_libcuda([0]))
    monkeypatch.setenv("FAKE_CUINIT_RC", rc)
    got, out, _ = cli("visible", "--probe", f"--value={value}", "--json")
    probe = json.loads(out)["probe"]
    assert (got, probe["status"]) == (code, status), probe
    assert probe["sources"][0]["answered"] and probe["sources"][0]["devices"] == []


# --- the README section is real output ----------------------------------------------------

DOC = ROOT / "docs" / "commands" / "visible.md"


def _doc_examples() -> list[tuple[list[str], str]]:
    text = DOC.read_text()
    examples = []
    for block in re.findall(r"```\n(\$ gpudiag .*?)```", text, re.S):
        command, _, output = block.partition("\n")
        examples.append((command[2:].split()[1:], output))
    return examples


def test_the_readme_section_shows_real_output(cli: Cli) -> None:
    examples = _doc_examples()
    assert len(examples) >= 4
    for args, expected in examples:
        _, out, _ = cli(*[a.strip("'") for a in args], width=120)
        shown = "\n".join(line.rstrip() for line in out.splitlines())
        assert shown == expected.rstrip("\n"), " ".join(args)


@pytest.mark.parametrize("select", ["²", "٣", "3\u0663"])
def test_only_ascii_digits_are_gpu_indices(cli: Cli, select: str) -> None:
    """`--select '²'` was an internal error and `--select '٣'` picked GPU 3 (str.isdigit accepts both)."""
    code, out, err = cli.replay("h100x8-healthy", "visible", "--select", select)
    assert code == ExitCode.USAGE and out == ""
    assert err == (
        f"gpudiag: {select!r} is not a GPU index, UUID (GPU-…) or PCI bus id; "
        "GPUs here: 0-7 (`gpudiag list` shows their UUIDs and bus ids)\n"
    )


def test_a_huge_value_is_read_as_far_as_cuda_reads_it(cli: Cli) -> None:
    """50,000 entries took 32-36 s and printed 4.3 MB: CUDA stops at the first invalid or repeated
    entry, so gpudiag does too, and sums up the rest."""
    import time

    for value in (",".join(["9"] * 50_000), ",".join(str(i % 8) for i in range(50_000))):
        start = time.perf_counter()
        code, out, _ = cli.replay("h100x8-healthy", "visible", "--value", value)
        seconds = time.perf_counter() - start
        assert code == ExitCode.OK and seconds < 1.0, seconds
        assert len(out) < 10_000
        assert "(50000 entries, 99999 characters)" in out
        assert "more entries" in out
        _, out, _ = cli.replay("h100x8-healthy", "visible", "--value", value, "--json")
        entries = json.loads(out)["entries"]
        assert len(entries) <= 20 and entries[-1]["outcome"] == "ignored"
