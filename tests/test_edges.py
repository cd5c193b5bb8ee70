"""Edges a user hits (issue 11): hostile input, closed or broken output, interrupts, impossible
replay files, and exit codes and JSON that keep the README's promises. Every case here was an
internal error, a traceback or a silent wrong answer before."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest

import gpudiag
from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli

MACHINES = Path(gpudiag.__file__).resolve().parent / "machines"
HUGE = "9" * 5000  # beyond Python's 4300-digit int() limit
GPUDIAG = [sys.executable, "-m", "gpudiag"]


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}


def _raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MACHINES / f"{name}.json").read_text())
    return data


# --- bad input: one line, exit 2 --------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--id", HUGE],
        ["list", "--id", f"0,{HUGE}"],
        ["memory", "--id", HUGE],
        ["check", "--quick", "--require-driver", HUGE],
        ["check", "--quick", "--require-cuda", f"12.{HUGE}"],
        ["check", "--quick", "--require-capability", HUGE],
        ["check", "--quick", "--require-driver", "５５０"],  # fullwidth digits: not a version
    ],
)
def test_huge_or_foreign_numbers_are_one_short_usage_line(cli: Cli, args: list[str]) -> None:
    code, out, err = cli.replay("h100x8-healthy", *args)
    assert code == ExitCode.USAGE, err
    assert len(err.splitlines()) == 1 and len(err) < 300 and "internal error" not in err
    assert out == ""


def test_a_version_component_too_long_to_mean_anything_is_refused(cli: Cli) -> None:
    code, _, err = cli.replay("h100x8-healthy", "check", "--quick", "--require-driver", "5500000000")
    assert code == ExitCode.USAGE and "expected a version like 550" in err


def test_a_replay_file_nested_100000_deep_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = cli.replay(str(deep), "list")
    assert code == ExitCode.USAGE and "nested too deeply" in err and len(err.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "kind"),
    [("DIR", "is a directory"), ("/dev/zero", "is a character device"), ("FIFO", "is a named pipe (FIFO)")],
)
def test_a_replay_path_that_is_not_a_file_says_what_it_is(path: str, kind: str, tmp_path: Path) -> None:
    if path == "DIR":
        path = str(tmp_path)
    elif path == "FIFO":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    # A subprocess with a timeout: opening a FIFO to read it would block for ever.
    result = subprocess.run(
        [*GPUDIAG, "--replay", path, "list"], capture_output=True, text=True, timeout=60, env=_env()
    )
    assert result.returncode == ExitCode.USAGE
    assert result.stderr == (
        f"gpudiag: replay file {path} {kind}: give a snapshot file (gpudiag snapshot > FILE) or an example name\n"
    )


def test_a_missing_replay_file_still_says_not_found(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli.replay(str(tmp_path / "nope.json"), "list")
    assert code == ExitCode.USAGE and err == f"gpudiag: replay file not found: {tmp_path / 'nope.json'}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--quick", "--min-free", "80"], "--min-free: size '80' needs a unit, e.g. 80GiB, 80MiB"),
        (["memory", "--count", "1", "--until-free", "20"], "--until-free: size '20' needs a unit"),
        (["memory", "--count", "1", "--alert-free-below", "1.5"], "--alert-free-below: size '1.5' needs a unit"),
        (["memory", "--count", "1", "--interval", "1e-9"], "--interval 1e-09: use at least 0.1 seconds"),
        (["memory", "--count", "1", "--interval", "0.09"], "use at least 0.1 seconds"),
        (["check", "--quick", "--only", "health", "--skip", "health"], "selects no check"),
        (["check", "--quick", "--skip", "nvml,host,compat,env,config,health,req,func"], "skips every check"),
        (["check", "--quick", "--only", ""], "--only '': empty entry"),
        (["check", "--quick", "--skip", "health,"], "--skip 'health,': empty entry"),
        (["check", "--quick", "--only", "req"], "the selected checks have nothing to check"),
        (["memory", "--id", ""], "empty entry in --id ''"),
        (["memory", "--id", "0,,1"], "empty entry in --id '0,,1'"),
        (["list", "--id", ""], "empty entry in --id ''"),
    ],
)
def test_input_that_means_nothing_or_something_else_is_refused(cli: Cli, args: list[str], message: str) -> None:
    code, out, err = cli.replay("h100x8-healthy", *args)
    assert code == ExitCode.USAGE and message in err and len(err.splitlines()) == 1, err
    assert out == ""


def test_zero_needs_no_unit_and_a_byte_count_says_b(cli: Cli) -> None:
    assert cli.replay("h100x8-healthy", "check", "--quick", "--only", "health", "--min-free", "0")[0] == 0
    assert cli.replay("h100x8-healthy", "check", "--quick", "--only", "health", "--min-free", "1024B")[0] == 0


def test_the_interval_floor_itself_is_accepted(cli: Cli) -> None:
    code, _, _ = cli.replay("h100x8-healthy", "memory", "--count", "1", "--interval", "0.1")
    assert code == ExitCode.OK


# --- impossible replay files: named by JSON path ------------------------------------------


def _set(path: str, value: Any) -> Any:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data["gpus"][0]
        for key in parents:
            node = node.setdefault(key, {})  # merged over gpu_defaults by the loader
        node[last] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set("memory.used_bytes", -1), "$.gpus[0].memory.used_bytes: -1 is outside 0..2**64-1"),
        (_set("memory.used_bytes", 10**30), "$.gpus[0].memory.used_bytes: 1000000000000000000000000000000 is outside"),
        (_set("memory.used_bytes", 1e30), "$.gpus[0].memory.used_bytes: expected an integer"),
        (_set("memory.used_bytes", 2.5), "$.gpus[0].memory.used_bytes: expected an integer"),
        (_set("memory.total_bytes", 0), "$.gpus[0].memory.total_bytes: a GPU with 0 bytes of memory"),
        (_set("memory.used_bytes", 81559 * 2**20 + 1), "$.gpus[0].memory.used_bytes: 85520809985 exceeds total_bytes"),
        (  # the idle example uses 0 bytes (as a real idle H100): give it some, then free them all too
            lambda d: (_set("memory.used_bytes", 2**20)(d), _set("memory.free_bytes", 81559 * 2**20)(d)),
            "$.gpus[0].memory: used_bytes + free_bytes exceed total_bytes",
        ),
        (_set("utilization.gpu_percent", 101), "$.gpus[0].utilization.gpu_percent: 101 is above 100"),
        (_set("utilization.memory_percent", 250), "$.gpus[0].utilization.memory_percent: 250 is above 100"),
        (_set("temperature_c", -5), "$.gpus[0].temperature_c: -5 is outside 0..2**64-1"),
        (_set("power_draw_w", -3.5), "$.gpus[0].power_draw_w: -3.5 is not a finite non-negative number"),
        (_set("pstate", 20), "$.gpus[0].pstate: 20 is not a performance state"),
        (_set("minor_number", 2**64), "$.gpus[0].minor_number: 18446744073709551616 is outside 0..2**64-1"),
    ],
)
def test_the_loader_rejects_what_nvml_cannot_return(cli: Cli, tmp_path: Path, mutate: Any, message: str) -> None:
    data = copy.deepcopy(_raw("h100x8-healthy"))
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, out, err = cli.replay(str(path), "list")
    assert code == ExitCode.USAGE and out == ""
    assert message in err and len(err.splitlines()) == 1, err


def test_a_process_using_more_than_its_gpu_is_rejected(cli: Cli, tmp_path: Path) -> None:
    data = copy.deepcopy(_raw("h100x8-training-64procs"))
    position = 5
    data["gpus"][position]["processes"][0]["used_memory_bytes"] = 2**40
    (tmp_path / "bad.json").write_text(json.dumps(data))
    code, _, err = cli.replay(str(tmp_path / "bad.json"), "memory")
    assert code == ExitCode.USAGE
    assert f"$.gpus[{position}].processes[0].used_memory_bytes: 1099511627776 exceeds the GPU's total" in err


# --- output that cannot be written; interrupts ---------------------------------------------


def test_closed_stdout_is_one_line_and_exit_2() -> None:
    cmd = f"{sys.executable} -m gpudiag --replay h100x8-healthy memory --watch --count 2 --interval 0.1 >&-"
    result = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=_env())
    assert result.returncode == ExitCode.USAGE
    assert result.stderr == "gpudiag: standard output is closed; redirect it (e.g. >/dev/null) instead\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["list", "--query", "index,name,memory.used"],
        ["memory"],
        ["memory", "--json"],
        ["memory", "--count", "2", "--interval", "0.1"],
        ["visible"],
        ["visible", "--json"],
        ["visible", "--select", "2,3"],
        ["check", "--quick", "--no-torch"],
        ["check", "--quick", "--no-torch", "--json"],
        ["snapshot"],
        ["examples"],
    ],
)
def test_a_reader_that_went_away_ends_every_command_quietly(args: list[str]) -> None:
    """`gpudiag … | head` where head has already gone: EPIPE on the first write, every command."""
    proc = subprocess.Popen(
        [*GPUDIAG, "--replay", "h100x8-healthy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the child writes a byte
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert err == "" and proc.returncode == 0


_STDLIB = sysconfig.get_paths()["stdlib"]


def _interpreter_start_up(err: str) -> bool:
    """A traceback whose every frame is the interpreter's own (frozen or standard library: site,
    runpy), printed before gpudiag's first line ran; none of gpudiag's or a library's frames."""
    if err.startswith("Fatal Python error: init_import_site"):  # in site (a .pth file): before gpudiag
        return True
    files = re.findall(r'File "([^"]+)"', err)
    ours = [f for f in files if not f.startswith("<frozen ")]
    return bool(files) and all(f.startswith(_STDLIB) and "-packages" not in f and "gpudiag" not in f for f in ours)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.5])
def test_ctrl_c_at_any_moment_ends_quietly(delay: float) -> None:
    """Ctrl-C while Python imports typer and rich, parses options or runs the command: no
    traceback, exit 130 (or the signal's own death before Python runs at all). Only frames of the
    interpreter's own start-up, before gpudiag's first line, are beyond reach (see gpudiag.entry)."""
    proc = subprocess.Popen(
        [*GPUDIAG, "--replay", "h100x8-healthy", "memory", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if _interpreter_start_up(err):
        return  # before gpudiag's first line: beyond any program's reach
    assert proc.returncode in (ExitCode.INTERRUPTED, -signal.SIGINT, ExitCode.OK), (proc.returncode, err)
    assert err == ""


def test_ctrl_c_while_a_command_runs_exits_130(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("gpudiag.cli.list_cmd.read_machine", interrupted)
    code, out, err = cli.replay("h100x8-healthy", "list")
    assert code == ExitCode.INTERRUPTED and out == "" and err == ""


# --- exit codes and JSON --------------------------------------------------------------------

LOST_LINE = (
    "gpudiag: GPU 2: GPU is lost (fallen off the bus, XID 79): reset the GPU or reboot the node "
    "(the other GPUs are shown)\n"
)


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["list", "--json"],
        ["list", "--query", "index,name"],
        ["memory"],
        ["memory", "--json"],
        ["visible"],
        ["visible", "--json"],
        ["visible", "--select", "0"],
    ],
)
def test_a_lost_gpu_is_the_same_in_every_command(cli: Cli, args: list[str]) -> None:
    code, out, err = cli.replay("gpu-lost", *args)
    assert code == ExitCode.GPU_LOST
    assert out.strip()  # the data is still shown
    assert err == LOST_LINE


def test_a_lost_gpu_outside_the_selection_does_not_fail_it(cli: Cli) -> None:
    assert cli.replay("gpu-lost", "list", "--id", "0,1") == (0, *cli.replay("gpu-lost", "list", "--id", "0,1")[1:])
    assert cli.replay("gpu-lost", "memory", "--id", "3")[0] == ExitCode.OK


def test_check_and_snapshot_keep_their_own_contract_for_a_lost_gpu(cli: Cli) -> None:
    code, out, _ = cli.replay("gpu-lost", "check", "--quick", "--no-torch")
    assert code == ExitCode.FAILED and "nvml.gpu_lost" in out  # check's verdict is its exit code
    code, out, err = cli.replay("gpu-lost", "snapshot")
    assert code == ExitCode.OK and err == "" and json.loads(out)["gpus"][2]["state"] == "lost"  # recorded


def test_a_filtered_snapshot_replays_with_its_real_indices(cli: Cli, tmp_path: Path) -> None:
    code, out, _ = cli.replay("h100x8-healthy", "list", "--json", "--id", "3,1")
    assert code == 0
    snapshot = tmp_path / "two.json"
    snapshot.write_text(out)
    code, out, err = cli.replay(str(snapshot), "list", "--no-processes")
    assert code == 0 and err == ""
    rows = [line.split()[0] for line in out.splitlines() if re.match(r"^\s+\d+\s+NVIDIA", line)]
    assert rows == ["1", "3"]  # NVML order, real indices
    code, out, _ = cli.replay(str(snapshot), "memory", "--json", "--id", "3")
    assert code == 0 and [g["index"] for g in json.loads(out)["gpus"]] == [3]
    code, _, err = cli.replay(str(snapshot), "list", "--id", "0")
    assert code == ExitCode.USAGE and "no GPU with index 0" in err


# Keys that may be null in `memory --json`: "does not apply", never "could not be read".
_NULL_MEANS_NOT_APPLICABLE = {
    "state_detail",
    "gpu_instance_id",
    "compute_instance_id",
    "torch",
    "command",
    "peak_used_bytes",
    "mig_uuid",
    "slurm_node",  # not run by Slurm
    "rank",  # not in a distributed job (or not tracked)
    "steps",  # the program does not mark its steps (or is not tracked)
    "forecast",  # not filling up
    "other_bytes",  # the allocator's figures and NVML's are not of one moment (torch.published_at says when)
}


def _nulls(data: Any, key: str = "$") -> list[str]:
    if isinstance(data, dict):
        return [n for k, v in data.items() for n in _nulls(v, k)]
    if isinstance(data, list):
        return [n for item in data for n in _nulls(item, key)]
    return [key] if data is None else []


@pytest.mark.parametrize("name", sorted(p.stem for p in MACHINES.glob("*.json")))
def test_memory_json_writes_a_missing_reading_as_list_json_does(cli: Cli, name: str) -> None:
    code, out, _ = cli.replay(name, "memory", "--json")
    if code not in (ExitCode.OK, ExitCode.GPU_LOST):
        return  # NVML itself unavailable: no document
    data = json.loads(out)
    assert data["schema"] == "gpudiag.memory/2"
    assert set(_nulls(data)) <= _NULL_MEANS_NOT_APPLICABLE


def test_mig_utilization_is_the_reason_not_null(cli: Cli) -> None:
    _, out, _ = cli.replay("a100-mig", "memory", "--json")
    gpu = json.loads(out)["gpus"][0]
    assert gpu["utilization_percent"]["unavailable"] == "not_supported"
    _, out, _ = cli.replay("a100-mig", "list", "--json")
    assert json.loads(out)["gpus"][0]["utilization"]["unavailable"] == "not_supported"


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["--replay", "h100x8-healthy", "list"],
        ["--replay", "h100x8-healthy", "list", "--json"],
        ["--replay", "h100x8-healthy", "list", "--query", "name", "--format", "csv"],
        ["--replay", "h100x8-healthy", "memory"],
        ["--replay", "h100x8-healthy", "visible"],
        ["--replay", "h100x8-healthy", "check", "--quick", "--no-torch"],
        ["--version"],
        ["--help"],
    ],
)
def test_a_full_disk_is_one_line_and_exit_74(args: list[str]) -> None:
    """Output that cannot be written (disk full) is the machine's fault, not a gpudiag bug."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "gpudiag", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert result.returncode == ExitCode.OUTPUT_ERROR == 74
    assert result.stderr == "gpudiag: cannot write standard output: No space left on device\n"
