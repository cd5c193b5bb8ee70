"""Read replayed machines with gpustat or nvitop, unmodified: ``python -m tests.peer_readers TOOL NAME...``
(TOOL: gpustat or nvitop through their APIs; gpustat-cli or nvitop-cli through their command lines).

A child program for tests/test_peers.py. For each machine it loads the replay's fake NVML library into
the real ``pynvml`` (gpudiag.replay.c_boundary.installed, as ``python -m gpudiag.replay`` does),
imports the tool afresh (both keep NVML state in module globals) and prints what the tool read, as
one JSON object on stdout. gpustat drops a
process that psutil cannot open, so psutil answers for the recorded processes the way the
machine's own process table would (the replay's RecordedHost does the same for gpudiag).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import psutil

from gpudiag.model import HostState
from gpudiag.replay.c_boundary import installed
from gpudiag.replay.run import fake_for

_REAL_PROCESS = psutil.Process
_REAL_PID_EXISTS = psutil.pid_exists


class _RecordedProcess:
    """The psutil calls gpustat makes, answered from the recording."""

    def __init__(self, pid: int, user: str, command: str) -> None:
        self.pid, self._user, self._command = pid, user, command

    def username(self) -> str:
        return self._user

    def cmdline(self) -> list[str]:
        return self._command.split()

    def cpu_percent(self, interval: float | None = None) -> float:
        return 0.0

    def memory_percent(self) -> float:
        return 0.0


def _record_processes(fake: Any) -> None:
    # A PID the host could not see (exited, hidden, another PID namespace) is one psutil
    # cannot open either.
    seen = {}
    for gpu in fake._machine.gpus:
        for proc in gpu.processes.get(()):
            if proc.host.state is HostState.FOUND:
                seen[proc.pid] = _RecordedProcess(proc.pid, proc.host.user.get("?"), proc.host.command.get("?"))

    def process(pid: int | None = None) -> Any:
        if pid in seen:
            return seen[pid]
        raise psutil.NoSuchProcess(pid or 0)

    psutil.Process = process  # type: ignore[assignment,misc]
    psutil.pid_exists = lambda pid: pid in seen


def _fresh(prefix: str) -> None:
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[name]


def _number(value: Any) -> Any:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_gpustat() -> dict[str, Any]:
    _fresh("gpustat")
    import gpustat  # imported afresh for each machine

    try:
        collection = gpustat.new_query()
    except Exception as exc:  # the NVML error gpustat lets through, by class name
        return {"error": type(exc).__name__}
    gpus = []
    for gpu in collection.gpus:
        if isinstance(gpu, gpustat.core.InvalidGPU):
            gpus.append({"index": gpu.entry["index"], "invalid": type(gpu.exception).__name__})
            continue
        entry = gpu.entry
        gpus.append(
            {
                "index": entry["index"],
                "memory_used_mib": entry["memory.used"],
                "memory_total_mib": entry["memory.total"],
                "utilization": entry["utilization.gpu"],
                "temperature": entry["temperature.gpu"],
                "power_w": entry["power.draw"],
                "power_limit_w": entry["enforced.power.limit"],
                "processes": None
                if entry["processes"] is None
                else {str(p["pid"]): p["gpu_memory_usage"] for p in entry["processes"]},
            }
        )
    return {"gpus": gpus}


def read_nvitop() -> dict[str, Any]:
    _fresh("nvitop")
    import nvitop  # imported afresh for each machine
    from nvitop.api import libnvml

    try:
        count = nvitop.Device.count()
    except Exception as exc:
        return {"error": type(exc).__name__}
    gpus = []
    for index in range(count):
        device = nvitop.PhysicalDevice(index)
        gpus.append(
            {
                "index": index,
                "name": device.name(),
                "memory_used": _number(device.memory_used()),
                "memory_total": _number(device.memory_total()),
                "utilization": _number(device.gpu_utilization()),
                "temperature": _number(device.temperature()),
                "power_mw": _number(device.power_usage()),
                "power_limit_mw": _number(device.power_limit()),
                "processes": {str(pid): _number(p.gpu_memory()) for pid, p in device.processes().items()},
                "mig": [
                    {
                        "index": mig.mig_index,
                        "memory_used": _number(mig.memory_used()),
                        "memory_total": _number(mig.memory_total()),
                        "processes": {str(pid): _number(p.gpu_memory()) for pid, p in mig.processes().items()},
                    }
                    for mig in device.mig_devices()
                ],
            }
        )
    # Calls the fake lacks (the machine model does not record them): nvitop shows N/A.
    lacking = sorted({getattr(f, "__name__", str(f)) for f, _ in libnvml.UNKNOWN_FUNCTIONS.values()})
    return {"gpus": gpus, "lacking": lacking}


def run_cli(tool: str) -> dict[str, Any]:
    """The tool's own command line, unmodified (``nvitop -1``, ``gpustat``), as a user runs it: its
    exit status, the exception that ended it (a crash), and the lines it printed."""
    import contextlib
    import io

    _fresh(tool)
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = [tool, "-1"] if tool == "nvitop" else [tool]
    code: Any = 0
    crash = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if tool == "nvitop":
                from nvitop.cli import main as entry
            else:
                from gpustat.cli import main as entry
            code = entry()
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a crash of the tool itself, on this machine's NVML answers
        crash = f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv = argv
    return {"exit": code, "crash": crash, "lines": len(out.getvalue().splitlines()), "stderr": err.getvalue()[-300:]}


def main(argv: list[str]) -> None:
    tool, names = argv[0], argv[1:]
    out = {}
    for name in names:
        fake = fake_for(name)
        if tool.startswith("gpustat"):  # nvitop subclasses psutil.Process and lists NVML's PIDs as they are
            _record_processes(fake)
        try:
            with installed(fake.library):
                if tool.endswith("-cli"):
                    out[name] = run_cli(tool[: -len("-cli")])
                else:
                    out[name] = read_gpustat() if tool == "gpustat" else read_nvitop()
        finally:
            psutil.Process, psutil.pid_exists = _REAL_PROCESS, _REAL_PID_EXISTS  # type: ignore[misc]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    import logging

    logging.disable(logging.CRITICAL)  # nvitop logs each call the fake lacks; `lacking` reports them
    main(sys.argv[1:])
