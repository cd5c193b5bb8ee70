"""Issue 35's GPU targets on a live GPU machine: gpudiag against nvidia-smi and torch, one run.

Whole processes, interleaved: each round runs every command once, in a shuffled order; medians of
wall time and of the child's CPU (user + system, its waited-for children included: ``check``'s torch
child). The commands (``QUERY_7``: the seven fields of the H200's timing in docs/hardware/):

    nvidia-smi                         nvidia-smi --query-gpu=<QUERY_7> --format=csv
    gpudiag list                       gpudiag list --query <QUERY_7> --format csv
    gpudiag list --json                gpudiag check --quick --no-torch
    gpudiag check                      python -c "import torch; torch.cuda.init()"

The targets (:data:`TARGETS`, judged on the wall medians): ``list --query`` <= 2x ``nvidia-smi
--query-gpu``, ``list`` <= 1.5x ``nvidia-smi``, ``list --json`` <= ``list``, ``check --quick
--no-torch`` <= ``list`` + 50 ms, ``check`` <= torch's import and CUDA start + 0.5 s.

Time: a warm-up round, then ``--rounds`` rounds (15) of the quick commands, of which ``--heavy-rounds``
(5) also run ``check`` and the torch start (~6 s each on the H200): about 1.5 minutes on one H200.
No round starts after ``--budget-s`` (150 s), a command is killed after ``--timeout-s`` (60 s) and
left out of the rounds after (a failure in the warm-up round too), so the whole run ends within the
budget plus one round, each command that hangs costing its timeout once.

Writes ``OUTDIR/gpu-targets.md`` (the tables, ready to commit into ``docs/hardware/<board>/``) and
``OUTDIR/gpu-targets.json`` (every sample); prints the markdown. Exit 0: every target met; 1: one
over, or a command that failed (its exit status is in the table); 2: usage; 3: no GPU here (no
``nvidia-smi`` on PATH, or NVML cannot start), said in one line, nothing measured.
``--replay NAME`` runs only gpudiag's commands, on an example machine, to try the script without a
GPU (no reference: only the targets between gpudiag's own commands are shown, and none decides
the exit status, 0 when every command ran).

Usage: python benchmarks/bench_gpu_targets.py OUTDIR [--rounds N] [--heavy-rounds N] [--budget-s S]
       [--timeout-s S] [--replay NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = os.path.abspath(sys.executable)
QUERY_7 = "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu"
NO_GPU = 3  # the exit status without a GPU, as gpudiag's own for a command that needs a device
SCHEMA = "gpudiag-bench-gpu-targets/1"
# What the installed `gpudiag` script runs; the tree comes from PYTHONPATH, as on the device machine.
_ENTRY = [PY, "-c", "import sys; from gpudiag.entry import main; sys.exit(main())"]


@dataclass
class Case:
    name: str
    argv: list[str]
    heavy: bool = False  # seconds a run: only in the heavy rounds
    reference: bool = False  # not gpudiag: left out of a replay
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    error: str = ""  # the last line a failed run said, or its timeout


@dataclass(frozen=True)
class Target:
    """``case`` against ``reference``: a ratio of their medians at most ``limit``, or (``plus``) a
    difference at most ``limit`` seconds."""

    label: str
    case: str
    reference: str
    limit: float
    plus: bool = False


@dataclass(frozen=True)
class Verdict:
    target: Target
    value: float | None  # the ratio, or the difference in seconds; None: a side did not run
    ok: bool | None

    def shown(self) -> str:
        if self.value is None:
            return "n/a"
        return f"{self.value * 1000:+.0f} ms" if self.target.plus else f"{self.value:.2f}x"

    def word(self) -> str:
        return "n/a" if self.ok is None else ("ok" if self.ok else "OVER")


TARGETS = (
    Target("`list --query` <= 2x `nvidia-smi --query-gpu`", "gpudiag list --query", "nvidia-smi --query-gpu", 2.0),
    Target("`list` <= 1.5x `nvidia-smi`", "gpudiag list", "nvidia-smi", 1.5),
    Target("`list --json` <= `list`", "gpudiag list --json", "gpudiag list", 1.0),
    Target(
        "`check --quick --no-torch` <= `list` + 50 ms",
        "gpudiag check --quick --no-torch",
        "gpudiag list",
        0.050,
        plus=True,
    ),
    Target(
        "`check` <= torch's import and CUDA start + 0.5 s", "gpudiag check", "torch import + CUDA start", 0.5, plus=True
    ),
)


def cases(replay: str | None = None) -> list[Case]:
    head = [*_ENTRY, *(["--replay", replay] if replay else [])]
    out = [
        Case("nvidia-smi", ["nvidia-smi"], reference=True),
        Case("nvidia-smi --query-gpu", ["nvidia-smi", f"--query-gpu={QUERY_7}", "--format=csv"], reference=True),
        Case("gpudiag list", [*head, "list"]),
        Case("gpudiag list --query", [*head, "list", "--query", QUERY_7, "--format", "csv"]),
        Case("gpudiag list --json", [*head, "list", "--json"]),
        Case("gpudiag check --quick --no-torch", [*head, "check", "--quick", "--no-torch"]),
        Case("gpudiag check", [*head, "check"], heavy=True),
        Case("torch import + CUDA start", [PY, "-c", "import torch; torch.cuda.init()"], heavy=True, reference=True),
    ]
    return [c for c in out if not (replay and c.reference)]


def medians(todo: Sequence[Case], cpu: bool = False) -> dict[str, float | None]:
    """Each case's median wall (or CPU) seconds; None for one that failed or never ran."""
    return {c.name: statistics.median(c.cpus if cpu else c.walls) if c.walls and not c.error else None for c in todo}


def judge(target: Target, seconds: dict[str, float | None]) -> Verdict:
    mine, theirs = seconds.get(target.case), seconds.get(target.reference)
    if mine is None or theirs is None:
        return Verdict(target, None, None)
    value = mine - theirs if target.plus else mine / theirs
    return Verdict(target, value, value <= target.limit)


def heavy_rounds_of(rounds: int, heavy: int) -> set[int]:
    """Which of ``rounds`` also run the heavy commands: ``heavy`` of them, spread evenly, the first included."""
    heavy = max(0, min(heavy, rounds))
    return {k * rounds // heavy for k in range(heavy)} if heavy else set()


def gpu_absent(which: Callable[[str], str | None] | None = None) -> str | None:
    """Why there is no GPU to measure here, or None when nvidia-smi and NVML are both there."""
    if (which or shutil.which)("nvidia-smi") is None:
        return "nvidia-smi is not on PATH"
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"NVML could not start: {exc}"
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    return None if count else "NVML found no GPU"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(PYTHONPATH=path, COLUMNS="160", LINES="50", NO_COLOR="1", TERM="dumb")
    return env


def run_once(case: Case, timeout_s: float, ok_exits: Sequence[int] = (0, 1)) -> None:
    """One whole process: its wall and CPU seconds appended; a failure or timeout kept in ``error``."""
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its children too (check's torch child)

    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        # cwd: not a checkout, whose gpudiag would come before PYTHONPATH's for `python -c`.
        proc = subprocess.Popen(
            case.argv,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_env(),
            cwd=tempfile.gettempdir(),
            start_new_session=True,
        )
        timer = threading.Timer(timeout_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)  # not proc.wait(): wait4 gives the child's CPU
        wall = time.perf_counter() - start
        timer.cancel()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        said = [line for line in err.read().decode(errors="replace").splitlines() if line.strip()]
    case.exits.append(code)
    if killed.is_set():
        case.error = f"killed after {timeout_s:g} s"
    elif code not in ok_exits:
        case.error = f"exit {code}: {said[-1][:200] if said else 'nothing on stderr'}"
    else:
        case.walls.append(wall)
        case.cpus.append(usage.ru_utime + usage.ru_stime)


def measure(todo: list[Case], rounds: int, heavy_rounds: int, budget_s: float, timeout_s: float, seed: int = 35) -> int:
    """A warm-up round, then the interleaved rounds; the number of rounds run within the budget.
    A case that failed is left out of the rounds after (a hang would eat the budget)."""
    for case in todo:  # the page cache, the bytecode, the driver's first open
        run_once(case, timeout_s)
        case.walls.clear()
        case.cpus.clear()
        case.exits.clear()
    rng = random.Random(seed)
    heavy = heavy_rounds_of(rounds, heavy_rounds)
    begun = time.monotonic()
    done = 0
    for index in range(rounds):
        if time.monotonic() - begun > budget_s:
            break
        order = [c for c in todo if not c.error and (index in heavy or not c.heavy)]
        rng.shuffle(order)
        for case in order:
            run_once(case, timeout_s)
        done += 1
    return done


def _machine() -> dict[str, str]:
    info = {
        "python": platform.python_version(),
        "cpus": str(os.cpu_count()),
        "kernel": platform.release(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,pci.bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        info["gpus"] = "; ".join(line.strip() for line in smi.stdout.splitlines() if line.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:.0f}"


def render(todo: list[Case], verdicts: list[Verdict], machine: dict[str, str], rounds: int) -> str:
    """The markdown of one run: the commands' medians, then each target's verdict (on wall time; the
    same figure on CPU time beside it)."""
    on_cpu = medians(todo, cpu=True)
    title = "replay: gpudiag's commands only, no GPU measured" if "replay" in machine else "one live run"
    lines = [
        f"# Issue 35's GPU targets (`benchmarks/bench_gpu_targets.py`, {title})",
        "",
        "; ".join(f"{k}: {v}" for k, v in machine.items()),
        "",
        f"{rounds} interleaved rounds (shuffled), medians; CPU: the child's user + system, its children included.",
        "",
        "| command | wall ms | min ms | CPU ms | runs | failed |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for case in todo:
        wall = statistics.median(case.walls) if case.walls else None
        cpu = statistics.median(case.cpus) if case.cpus else None
        low = min(case.walls) if case.walls else None
        lines.append(f"| `{case.name}` | {_ms(wall)} | {_ms(low)} | {_ms(cpu)} | {len(case.walls)} | {case.error} |")
    lines += ["", "| target | wall | CPU | verdict (wall) |", "|---|---:|---:|---|"]
    lines += [f"| {v.target.label} | {v.shown()} | {judge(v.target, on_cpu).shown()} | {v.word()} |" for v in verdicts]
    return "\n".join(lines) + "\n"


def record(todo: list[Case], verdicts: list[Verdict], machine: dict[str, str], rounds: int) -> dict[str, object]:
    return {
        "schema": SCHEMA,
        "machine": machine,
        "rounds": rounds,
        "cases": {
            c.name: {"argv": c.argv, "walls_s": c.walls, "cpus_s": c.cpus, "exits": c.exits, "error": c.error}
            for c in todo
        },
        "targets": [
            {"target": v.target.label, "value": v.value, "limit": v.target.limit, "plus": v.target.plus, "ok": v.ok}
            for v in verdicts
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_gpu_targets.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--heavy-rounds", type=int, default=5, help="rounds that also run check and the torch start")
    parser.add_argument("--budget-s", type=float, default=150.0, help="no round starts after this many seconds")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="a command is killed after this")
    parser.add_argument("--replay", help="gpudiag's commands only, on this example machine (no GPU needed)")
    args = parser.parse_args(argv)
    if not args.replay:
        why = gpu_absent()
        if why is not None:
            print(f"bench_gpu_targets: no GPU here ({why}): nothing measured", file=sys.stderr)
            return NO_GPU
    todo = cases(args.replay)
    rounds = measure(todo, args.rounds, args.heavy_rounds, args.budget_s, args.timeout_s)
    walls = medians(todo)
    verdicts = [judge(t, walls) for t in TARGETS]
    machine = {"replay": args.replay} if args.replay else _machine()
    text = render(todo, verdicts, machine, rounds)
    args.outdir.mkdir(parents=True, exist_ok=True)
    (args.outdir / "gpu-targets.md").write_text(text)
    (args.outdir / "gpu-targets.json").write_text(json.dumps(record(todo, verdicts, machine, rounds), indent=1))
    sys.stdout.write(text)
    failed = any(c.error for c in todo) or (not args.replay and any(v.ok is False for v in verdicts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
