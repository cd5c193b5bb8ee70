"""`list --query` near its floor (issue 35: <= 1.5x `python -c "import pynvml, psutil"`): what was cut
from its path stays out, replayed or live (docs/performance.md measures what each cost), and the run
neither collects garbage nor leaves its objects to the collection at exit."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUERY_7 = "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu"

# Modules the path does not run, each cut from it: the CLI framework; pathlib with the urllib.parse and
# ipaddress it imports (the replay loader reads an example through os.path); dataclasses (MachineSource);
# json (only --json prints it); the replay's series (only monitors play it); the Xid watch (check).
NOT_ON_THE_PATH = (
    "typer",
    "rich",
    "click",
    "pathlib",
    "urllib.parse",
    "ipaddress",
    "dataclasses",
    "json",
    "gpudiag.replay.series",
    "gpudiag.probe.xid_watch",
)

_SCRIPT = """
import gc, sys
from gpudiag.entry import main
sys.argv = ["gpudiag", *sys.argv[1:]]
try:
    main()
except SystemExit as stop:
    code = stop.code
loaded = sorted(m for m in sys.modules if m in {cut})
print("CODE", code, "LOADED", loaded, "GC", gc.isenabled(), gc.get_freeze_count() > 10000, file=sys.stderr)
"""


def _run(*args: str) -> str:
    """The last line the script writes: the exit code, what it loaded of NOT_ON_THE_PATH, the collector."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GPUDIAG_REPLAY", None)
    script = _SCRIPT.format(cut=set(NOT_ON_THE_PATH))
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, cwd="/", timeout=60
    )
    return done.stderr.splitlines()[-1]


def test_a_replayed_query_imports_nothing_cut_from_its_path() -> None:
    assert _run("--replay", "h100x8-healthy", "list", "--query", QUERY_7, "--format", "csv") == (
        "CODE 0 LOADED [] GC False True"
    )


def test_a_live_query_imports_nothing_cut_from_the_replayed_path() -> None:
    """Without a GPU (NVML not found: 12) as with one (0): the live source reads the host with os.path."""
    code, rest = _run("list", "--query", "index,name,memory.used", "--format", "csv").split(" LOADED ")
    assert code in ("CODE 0", "CODE 12") and rest == "[] GC False True"


def test_a_run_of_samples_keeps_its_collector() -> None:
    """dmon and pmon -c N sample N times, for as long as N says: their garbage is collected."""
    assert _run("--replay", "h100x8-healthy", "dmon", "-c", "1", "--json").endswith(" GC True True")


def test_the_front_run_in_process_leaves_the_collector_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """The policy belongs to the process (gpudiag.entry), not to the front a program or test may run."""
    from gpudiag import argv
    from gpudiag.cli import plain_front

    found = plain_front.read(argv.read(["--replay", "h100x8-healthy", "list", "--query", "index"]), {})
    assert found is not None and gc.isenabled()
    frozen = gc.get_freeze_count()
    assert plain_front.run(found) == 0
    assert capsys.readouterr().out.startswith("index\n0\n")
    assert gc.isenabled() and gc.get_freeze_count() == frozen
