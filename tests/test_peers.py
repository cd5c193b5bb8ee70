"""gpustat and nvitop, unmodified, read every example machine through the replay's fake NVML.

Two independent readers of the same NVML answers: their per-GPU (memory used/total,
utilisation, temperature, power and its limit) and per-process (PID, GPU memory) figures are
held against ``gpudiag --replay NAME list --json``. Where a reader differs by design, the
comparison says why (see the ``# why:`` comments); anything else is a bug in the fake.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudiag.replay.fixtures import example_names
from tests.conftest import Cli

# Real gpustat and nvitop in children, one per tool, shared by every test here: all on one worker
# (ONE_WORKER_MODULES in conftest.py, with --dist loadgroup), and slow. Their presence is asked without importing them.
pytestmark = [
    pytest.mark.skipif(
        any(importlib.util.find_spec(tool) is None for tool in ("gpustat", "nvitop")), reason="needs gpustat and nvitop"
    ),
    pytest.mark.slow,
]

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20

# why: calls whose answers the machine model does not record; the fake lacks them, so nvitop
# shows N/A there (gpudiag never makes them).
NOT_RECORDED = {
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetProcessUtilization",
}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@functools.cache
def peer(tool: str) -> dict[str, Any]:
    """What ``tool`` read on every example machine (one child process per tool)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.peer_readers", tool, *example_names()],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def value(reading: Any) -> Any:
    """A JSON reading's value, or None where gpudiag says why there is none."""
    return None if isinstance(reading, dict) and "unavailable" in reading else reading


def milli(watts: Any) -> int | None:
    return None if value(watts) is None else round(value(watts) * 1000)


@functools.cache
def gpudiag_list(name: str) -> dict[str, Any]:
    _, out, _ = Cli().replay(name, "list", "--json")
    data: dict[str, Any] = json.loads(out)
    return data


def _ok_gpus(name: str) -> list[dict[str, Any]]:
    return [g for g in gpudiag_list(name)["gpus"] if g["state"] == "ok"]


def _nvml_error(name: str) -> str | None:
    status = gpudiag_list(name)["nvml"]["status"]
    return None if status == "ok" else status


def _no_process_query_of_r470(name: str) -> bool:
    """A driver older than R470: neither the v3 nor the v2 process query. gpustat 1.1.1 reads processes
    through nvidia-ml-py's unversioned wrapper, which asks for v3 (gpustat's own patch falls back to v2)
    and, finding neither, raises NVMLLibraryMismatchError, which is no NVMLError: gpustat stops there, as
    it does on such a driver (the fake runs pynvml's wrapper itself)."""
    missing = gpudiag_list(name)["nvml"]["functions_missing"]
    return all(f"nvmlDeviceGetComputeRunningProcesses{v}" in missing for v in ("_v3", "_v2"))


_INIT_ERROR_CLASSES = {
    "library_not_found": "NVMLError_LibraryNotFound",
    "driver_not_loaded": "NVMLError_DriverNotLoaded",
    "driver_library_mismatch": "NVMLError_LibRmVersionMismatch",
    "no_permission": "NVMLError_NoPermission",
}


@pytest.mark.parametrize("tool", ["gpustat", "nvitop"])
@pytest.mark.parametrize("name", example_names())
def test_a_broken_nvml_is_the_same_error_for_every_reader(tool: str, name: str) -> None:
    status = _nvml_error(name)
    read = peer(tool)[name]
    if status is None and tool == "gpustat" and _no_process_query_of_r470(name):
        assert read == {"error": "NVMLLibraryMismatchError"}
    elif status is None:
        assert "error" not in read, read
        assert [g["index"] for g in read["gpus"]] == [g["index"] for g in gpudiag_list(name)["gpus"]]
    else:
        assert read == {"error": _INIT_ERROR_CLASSES[status]}


@pytest.mark.parametrize("name", example_names())
def test_gpustat_reads_what_gpudiag_reads(name: str) -> None:
    read = peer("gpustat")[name]
    if "error" in read:
        return  # held by the test above
    by_index = {g["index"]: g for g in read["gpus"]}
    for gpu in gpudiag_list(name)["gpus"]:
        seen = by_index[gpu["index"]]
        if gpu["state"] != "ok":
            # why: gpustat shows a GPU whose handle fails as an "invalid" row named by the error.
            assert seen["invalid"] == ("NVMLError_GpuIsLost" if gpu["state"] == "lost" else "NVMLError_Unknown")
            continue
        memory = value(gpu["memory"])
        # why: gpustat floors bytes to MiB and milliwatts to watts (``// MB``, ``// 1000``).
        assert seen["memory_used_mib"] == memory["used_bytes"] // MiB
        assert seen["memory_total_mib"] == memory["total_bytes"] // MiB
        assert seen["utilization"] == (value(gpu["utilization"]) or {}).get("gpu_percent")
        assert seen["temperature"] == value(gpu["temperature_c"])
        power, limit = milli(gpu["power_draw_w"]), milli(gpu["power_limit_w"])
        assert seen["power_w"] == (None if power is None else power // 1000)
        assert seen["power_limit_w"] == (None if limit is None else limit // 1000)
        processes = value(gpu["processes"])
        api = gpudiag_list(name)["nvml"]["process_query_api"]
        if api != "_v3":
            # why: gpustat asks nvidia-ml-py's unversioned call, which is v3 (its fallback adds
            # v2 only); gpudiag falls back to the raw v1 query that old drivers have.
            assert seen["processes"] is None
            continue
        # why: gpustat drops a process that psutil cannot open (exited, hidden by hidepid, in
        # another PID namespace); gpudiag lists every PID NVML reports, with what the host said.
        expected = {
            str(p["pid"]): None if value(p["used_memory_bytes"]) is None else p["used_memory_bytes"] // MiB
            for p in processes
            if p["host"]["state"] == "found"
        }
        assert seen["processes"] == expected


@pytest.mark.parametrize("name", example_names())
def test_nvitop_reads_what_gpudiag_reads(name: str) -> None:
    read = peer("nvitop")[name]
    if "error" in read:
        return
    assert set(read["lacking"]) <= NOT_RECORDED
    by_index = {g["index"]: g for g in read["gpus"]}
    for gpu in gpudiag_list(name)["gpus"]:
        seen = by_index[gpu["index"]]
        if gpu["state"] != "ok":
            # why: nvitop keeps a GPU it cannot open as a row of N/A.
            assert seen["memory_used"] is None and seen["temperature"] is None
            continue
        memory = value(gpu["memory"])
        assert seen["memory_used"] == memory["used_bytes"]
        assert seen["memory_total"] == memory["total_bytes"]
        assert seen["utilization"] == (value(gpu["utilization"]) or {}).get("gpu_percent")
        assert seen["temperature"] == value(gpu["temperature_c"])
        assert seen["power_mw"] == milli(gpu["power_draw_w"])
        assert seen["power_limit_mw"] == milli(gpu["power_limit_w"])
        processes = value(gpu["processes"])
        assert seen["processes"] == {str(p["pid"]): value(p["used_memory_bytes"]) for p in processes}
        migs = {m["index"]: m for m in seen["mig"]}
        assert sorted(migs) == [m["index"] for m in gpu["mig_devices"]]
        for mig in gpu["mig_devices"]:
            mine = value(mig["memory"])
            assert migs[mig["index"]]["memory_used"] == mine["used_bytes"]
            assert migs[mig["index"]]["memory_total"] == mine["total_bytes"]
            # The query on a MIG device's handle lists that instance's processes only.
            inside = {
                str(p["pid"]): value(p["used_memory_bytes"])
                for p in processes
                if (p["gpu_instance_id"], p["compute_instance_id"])
                == (value(mig["gpu_instance_id"]), value(mig["compute_instance_id"]))
            }
            assert migs[mig["index"]]["processes"] == inside


@pytest.mark.parametrize("tool", ["gpustat", "nvitop"])
def test_the_peers_command_lines_run_on_every_example_machine(tool: str) -> None:
    """`nvitop -1` and `gpustat`, unmodified, on every example: no crash (nvitop once died on the
    A100 under MIG, whose MIG devices' BAR1 the fake did not answer), and a broken NVML ends them
    the way it ends them on real hardware (an error line, no table)."""
    shown = peer(f"{tool}-cli")
    assert sorted(shown) == example_names()
    for name, run in shown.items():
        assert run["crash"] == "", (name, run)
        if tool == "gpustat" and _no_process_query_of_r470(name):
            assert run["exit"] == 1 and "versioned function" in run["stderr"], (name, run)
        elif _nvml_error(name) is None and gpudiag_list(name)["gpus"]:
            assert run["exit"] in (0, None) and run["lines"] >= 2, (name, run)


def test_the_comparison_sees_processes_and_mig_instances() -> None:
    """The examples exercise what the readers are compared on, so the tests above can fail."""
    gpustat, nvitop = peer("gpustat"), peer("nvitop")
    assert sum(len(g.get("processes") or {}) for m in gpustat.values() for g in m.get("gpus", [])) >= 20
    mig = [g for g in nvitop["a100-mig"]["gpus"] if g["mig"]]
    assert mig and sum(bool(m["processes"]) for m in mig[0]["mig"]) >= 2
    assert any(g.get("invalid") == "NVMLError_GpuIsLost" for g in gpustat["gpu-lost"]["gpus"])


def test_the_replay_runner_runs_gpustat_unmodified() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag.replay", "misconfigured-node", "-m", "gpustat", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["driver_version"] == "550.54.15"
    assert [(g["name"], g["memory.used"], g["memory.total"]) for g in shown["gpus"]] == [
        ("NVIDIA A40", 12188, 46068),
        ("NVIDIA A40", 0, 46068),
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["no-such-machine", "-m", "gpustat"], "no example machine named 'no-such-machine'"),
        (["h100x8-healthy", "-m", "no_such_module_here"], "no module named 'no_such_module_here'"),
        (["h100x8-healthy", "missing-script.py"], "no such script: missing-script.py"),
        (["h100x8-healthy"], "usage: python -m gpudiag.replay"),
    ],
)
def test_the_replay_runner_explains_bad_input_in_one_line(args: list[str], words: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag.replay", *args], capture_output=True, text=True, cwd=ROOT, env=_env()
    )
    assert done.returncode == 2
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _replayed(name: str, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag.replay", name, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**_env(), "COLUMNS": "120"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


CAPTURE = ROOT / "docs" / "hardware" / "h100-80gb-hbm3-driver580"


def test_nvitop_on_the_replayed_h100_shows_what_it_showed_on_the_real_one() -> None:
    """nvitop -1 on the busy H100 (captured, a second GPU of the kind at the same workload) and on
    its replay: the same memory cells. Temperature, power and PID were that GPU's own."""
    real = (CAPTURE / "nvitop-1-busy.txt").read_text()
    replayed = _replayed("h100-driver580-busy", "-m", "nvitop", "-1")
    for cell in ("12815MiB / 79.65GiB", "MEM: ", "12806MiB", "Default", "Disabled", "00000000:00:06.0"):
        assert cell in real and cell in replayed, cell


def test_gpustat_on_the_replayed_h100_shows_what_it_showed_on_the_real_one() -> None:
    real = json.loads((CAPTURE / "gpustat-json-busy.json").read_text())["gpus"][0]
    replayed = json.loads(_replayed("h100-driver580-busy", "-m", "gpustat", "--json"))["gpus"][0]
    for key in ("name", "memory.used", "memory.total", "enforced.power.limit", "utilization.gpu", "fan.speed"):
        assert replayed[key] == real[key], key
