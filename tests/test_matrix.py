"""Every command on every example machine: an allowed exit code, and never a traceback."""

from __future__ import annotations

import json

import pytest

from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli, SkippingClock, every_example

NVML_CODES = {
    ExitCode.NVML_NO_PERMISSION,
    ExitCode.NVML_DRIVER_NOT_LOADED,
    ExitCode.NVML_LIBRARY_NOT_FOUND,
    ExitCode.NVML_VERSION_MISMATCH,
    ExitCode.NVML_ERROR,
}

COMMANDS: list[tuple[list[str], set[int]]] = [
    (["list"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["list", "--json"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (
        ["list", "--query", "index,name,memory.used,power.draw", "--format", "csv"],
        {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES},
    ),
    (["list", "--details"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (
        ["list", "--query", "serial,clocks.sm,power.limit,enforced.power.limit,ecc.errors.corrected.aggregate.sram"],
        {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES},
    ),
    (["list", "--query-compute-apps", "pid,process_name,used_memory"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["list", "--watch", "--count", "2", "--interval", "0.1"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["check", "--quick"], {ExitCode.OK, ExitCode.FAILED}),
    (["check", "--quick", "--json", "--strict"], {ExitCode.OK, ExitCode.FAILED}),
    (["memory"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["memory", "--json"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["memory", "--count", "2", "--interval", "0.1"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["visible"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["visible", "--value", "1,0,-1", "--json"], {ExitCode.OK, ExitCode.GPU_LOST, *NVML_CODES}),
    (["snapshot"], {ExitCode.OK}),
    (["bench-transfer"], {ExitCode.USAGE}),  # measures only the live machine
    # The nvidia-smi views: nvidia-smi's codes (6: no GPU, no MIG; 15: a lost GPU).
    *(
        (args, {ExitCode.OK, ExitCode.GPU_LOST, ExitCode.NOT_FOUND, *NVML_CODES})
        for args in (
            ["dmon", "-s", "pucvmet", "--count", "2", "--delay", "0.1"],
            ["dmon", "--count", "2", "--delay", "0.1", "--json"],
            ["pmon", "-s", "um", "--count", "2", "--delay", "0.1"],
            ["pmon", "--count", "1", "--json"],
            ["topo"],
            ["topo", "-p2p", "w"],
            ["topo", "--json"],
            ["nvlink"],
            ["nvlink", "-gt", "d"],
            ["nvlink", "--json"],
            ["mig"],
            ["mig", "-lci"],
            ["mig", "--json"],
            ["stat"],
            ["stat", "--json"],
            ["stat", "--watch", "--count", "2", "--interval", "0.1"],
        )
    ),
]


@pytest.fixture(autouse=True)
def _watches_wait_on_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exit codes are this matrix's business, not the waits between samples (at least 0.1 s each)."""
    from gpudiag.cli import list_watch, monitor_loop, stat_watch

    for module in (list_watch, monitor_loop, stat_watch):
        monkeypatch.setattr(module, "time", SkippingClock())


@pytest.mark.parametrize("name", every_example())
@pytest.mark.parametrize(("args", "allowed"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_command_on_machine(cli: Cli, name: str, args: list[str], allowed: set[int]) -> None:
    code, out, err = cli("--replay", name, *args, width=100)
    assert code in allowed, (code, err)
    if code in NVML_CODES or code == ExitCode.USAGE:
        assert len(err.strip().splitlines()) == 1, err  # one line that says why
    if "--json" in args and code in (ExitCode.OK, ExitCode.FAILED, ExitCode.GPU_LOST):
        documents = (
            [json.loads(line) for line in out.splitlines()] if args[0] in ("dmon", "pmon") else [json.loads(out)]
        )
        assert documents and all(d["schema"].startswith("gpudiag.") for d in documents)
