"""Start-up time and peak memory of gpudiag's read-only commands, beside the floor and the peers.

Whole processes, interleaved (one round runs every command once, in a shuffled order), medians:
the machine may be shared and noisy, so only ratios taken within one run mean anything.

- floor: ``python -c "import typer, rich, pynvml, psutil"``, what any tool built on the same
  libraries pays before it does anything; ``floor+rich`` adds ``rich.console`` and ``rich.table``,
  which any rich table needs. ``floor: app+json`` and ``floor: app+table`` (``floors.py``) add
  the least ``list --json`` and ``list`` must do with typer, msgspec and rich kept: a Typer app
  with the same options parsing the same command line, then a JSON document or an 8-row table;
  ``floor: app+checklist`` prints what ``check`` prints for 8 GPUs instead (118 rows).
- gpudiag on the replayed 8-GPU example, run the way the installed ``gpudiag`` script runs it, at 160
  columns (``list`` at 80 too: a narrow terminal leaves columns out, laying the table out again).
- the peers gpustat and nvitop (``-1``) on the same replayed machine, unmodified, through
  ``python -m gpudiag.replay`` (which puts the replay's fake NVML in front of them);
  ``replay-wrapper`` is that wrapper running an empty script: what it adds to the peers.

Targets (ratio of medians to the floor): list <= 1.4x, list --json and --query <= 1.15x, every
other read-only command <= 1.5x. The machine-readable outputs run without typer and rich
(cli.plain_front), so they also answer to ``floor: pynvml+psutil`` (``python -c "import pynvml,
psutil"``): ``list --query`` of seven fields <= 1.5x of it; and ``list --json`` and ``list -q -x``
<= the table (``list``). Each other ``--json`` the front runs (``memory``, ``visible``, ``stat``,
``topo``, ``nvlink``, ``mig``; ``dmon`` and ``pmon`` with ``-c 1``) is also run through Typer
(``… (typer)``: cli.app.run on the same command line, as before the front), to show what the
front saves. ``--baseline DIR`` also runs the gpudiag commands from another checkout (e.g.
``git archive`` of an older commit) in the same rounds: a before/after in one run.

Peak RSS (the child's ru_maxrss): every command above, and ``memory --watch`` after 100 and after
1,000 refreshes (at the 0.1 s minimum interval: ~100 s, both at once; ``--no-watch`` skips it),
and ``gpudiag exporter`` on the replayed 64-process example after 100 and 1,000 scrapes (VmHWM).

Usage: python benchmarks/bench_startup.py [--runs N] [--baseline DIR] [--no-watch] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "h100x8-healthy"
WATCH_EXAMPLE = "h100x8-training-64procs"
# Absolute: the cases run in another directory, and sys.executable is relative when python was found
# through a relative PATH entry (PATH=.venv/bin:$PATH).
PY = os.path.abspath(sys.executable)
FLOORS = Path(__file__).resolve().parent / "floors.py"
PY_FLOOR = "floor: pynvml+psutil"
# The seven fields of the H200's timing of `nvidia-smi --query-gpu` (docs/hardware/).
QUERY_7 = "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu"


@dataclass
class Case:
    name: str
    argv: list[str]
    target: float | None = None  # ratio to the floor
    # More targets, each a ratio to another case of the same run: (that case's name, the most allowed).
    against: tuple[tuple[str, float], ...] = ()
    tree: Path | None = None  # PYTHONPATH; None: the interpreter's own
    columns: int = 160  # the terminal's width (COLUMNS)
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # user + system seconds: steadier under load
    rss_kib: list[int] = field(default_factory=list)


def _gpudiag(*args: str) -> list[str]:
    script = shutil.which("gpudiag")
    script = script and os.path.abspath(script)  # found through a relative PATH entry, as PY may be
    # The installed entry script does `from gpudiag.entry import main; sys.exit(main())`.
    head = [PY, script] if script else [PY, "-c", "import sys; from gpudiag.entry import main; sys.exit(main())"]
    return [*head, "--replay", EXAMPLE, *args]


# The same command line through Typer (cli.app.run), skipping cli.plain_front: what the front saves.
_TYPER = "import sys; from gpudiag import argv; from gpudiag.cli.app import run; run(argv.read(sys.argv[1:]))"
# The --json outputs the front runs besides list's, each against its Typer run.
FRONTED = (
    ("memory", "--json"),
    ("visible", "--json"),
    ("stat", "--json"),
    ("topo", "--json"),
    ("nvlink", "--json"),
    ("mig", "--json"),
    ("dmon", "--json", "-c", "1"),
    ("pmon", "--json", "-c", "1"),
)


def _typer(*args: str) -> list[str]:
    return [PY, "-c", _TYPER, "--replay", EXAMPLE, *args]


def _env(tree: Path | None, columns: int = 160) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(COLUMNS=str(columns), LINES="50", NO_COLOR="1", TERM="dumb")
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def run_once(case: Case) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one whole process."""
    start = time.perf_counter()
    # cwd: not a checkout, whose gpudiag would come before PYTHONPATH's for `python -c` and `-m`.
    proc = subprocess.Popen(
        case.argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(case.tree, case.columns),
        cwd=tempfile.gettempdir(),
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: a check that fails is still a measured run
        raise SystemExit(f"{case.name}: exit {proc.returncode}: {err.decode(errors='replace')[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def cases(tree: Path, baseline: Path | None, empty_script: Path) -> list[Case]:
    floor = [PY, "-c", "import typer, rich, pynvml, psutil"]
    out = [
        Case("floor", floor),
        # What a script that reads NVML in Python pays before it reads anything: the floor of the
        # machine-readable outputs, which import neither typer nor rich (cli.plain_front).
        Case("floor: pynvml+psutil", [PY, "-c", "import pynvml, psutil"]),
        # What binds `list --query` above it: msgspec, which the machine model is made of, then the model.
        Case("floor: pynvml+msgspec", [PY, "-c", "import pynvml, msgspec"]),
        Case("floor: pynvml+model", [PY, "-c", "import pynvml, msgspec, gpudiag.model"], tree=tree),
        Case("floor+rich", [PY, "-c", "import typer, rich, pynvml, psutil, rich.console, rich.table"]),
        # The least `list --json` and `list` can cost with typer, msgspec and rich (floors.py).
        Case("floor: app+json", [PY, str(FLOORS), "json"]),
        Case("floor: app+table", [PY, str(FLOORS), "table"]),
        Case("floor: app+checklist", [PY, str(FLOORS), "checklist"]),
    ]
    commands: list[tuple[str, list[str], float | None, tuple[tuple[str, float], ...]]] = [
        ("list", ["list"], 1.4, ()),
        ("list (80 columns)", ["list"], 1.4, ()),  # a narrow terminal: columns left out, the table laid out again
        ("list --json", ["list", "--json"], 1.15, (("list", 1.0),)),
        ("list --query", ["list", "--query", "name,memory.used", "--format", "csv"], 1.15, ()),
        ("list --query (7 fields)", ["list", "--query", QUERY_7, "--format", "csv"], None, ((PY_FLOOR, 1.5),)),
        ("list -q -x", ["list", "-q", "-x"], None, (("list", 1.0),)),
        ("memory", ["memory"], 1.5, ()),
        ("visible", ["visible"], 1.5, ()),
        ("check --quick --no-torch", ["check", "--quick", "--no-torch"], 1.5, ()),
    ]
    for label, tree_path in (("", tree), ("base: ", baseline)):
        if tree_path is None:
            continue
        out += [
            Case(
                label + name,
                _gpudiag(*args),
                target,
                against if not label else (),
                tree_path,
                80 if "80 columns" in name else 160,
            )
            for name, args, target, against in commands
        ]
    for line in FRONTED:
        name = " ".join(line)
        out += [
            Case(name, _gpudiag(*line), None, ((f"{name} (typer)", 1.0),), tree),
            Case(f"{name} (typer)", _typer(*line), tree=tree),
        ]
    replay = [PY, "-m", "gpudiag.replay", EXAMPLE]
    if _has_replay_runner(tree):
        out += [
            Case("replay-wrapper", [*replay, str(empty_script)], tree=tree),
            Case("gpustat", [*replay, "-m", "gpustat"], tree=tree),
            Case("nvitop -1", [*replay, "-m", "nvitop", "-1"], tree=tree),
        ]
    return out


def _has_replay_runner(tree: Path) -> bool:
    return (tree / "gpudiag" / "replay" / "run.py").is_file()


def compile_bytecode(*trees: Path) -> None:
    """Write .pyc files as an installed package has them (this environment may forbid it)."""
    import compileall
    import sysconfig

    for path in (*trees, Path(sysconfig.get_paths()["purelib"])):
        compileall.compile_dir(str(path), quiet=2, workers=1)


def watch_rss(tree: Path) -> dict[int, int]:
    """Peak RSS (KiB) of `memory --watch --json` after 100 and 1,000 refreshes, run side by side."""
    procs = {}
    for count in (100, 1000):
        argv = [*_gpudiag("memory", "--watch", "--json", "--interval", "0.1", "--count", str(count))]
        argv[argv.index(EXAMPLE)] = WATCH_EXAMPLE
        procs[count] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=_env(tree), cwd=tempfile.gettempdir())
    peaks = {}
    for count, proc in procs.items():
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        peaks[count] = usage.ru_maxrss
    return peaks


def exporter_rss(tree: Path) -> dict[int, int] | None:
    """Peak RSS (KiB) of the exporter after 100 and 1,000 scrapes of /metrics; None without one."""
    import socket
    import urllib.request

    if not (tree / "gpudiag" / "cli" / "exporter_cmd.py").is_file():
        return None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = _gpudiag("exporter", "--port", str(port), "--bind", "127.0.0.1", "--no-kubelet")
    argv[argv.index(EXAMPLE)] = WATCH_EXAMPLE
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tree))
    peaks = {}
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        for _ in range(200):  # wait for it to listen
            try:
                urllib.request.urlopen(url, timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        for n in range(1, 1001):
            urllib.request.urlopen(url, timeout=5).read()
            if n in (100, 1000):
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peaks[n] = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
    finally:
        proc.terminate()
        proc.wait()
    return peaks


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="another checkout's root, run in the same rounds")
    parser.add_argument("--no-watch", action="store_true", help="skip the 100 s memory --watch RSS run")
    parser.add_argument("--only", default="", help="comma-separated case names (floor is always run)")
    args = parser.parse_args()
    tree = ROOT
    baseline = args.baseline.resolve() if args.baseline else None
    compile_bytecode(tree, *([baseline] if baseline else []))
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.py"
        empty.write_text("")
        todo = cases(tree, baseline, empty)
        if args.only:
            wanted = {"floor", *args.only.split(",")}
            todo = [c for c in todo if c.name in wanted or c.name.removeprefix("base: ") in wanted]
        for case in todo:  # warm the page cache and the bytecode
            run_once(case)
        rng = random.Random(16)
        for _ in range(args.runs):
            order = todo[:]
            rng.shuffle(order)
            for case in order:
                wall, cpu, rss = run_once(case)
                case.walls.append(wall)
                case.cpus.append(cpu)
                case.rss_kib.append(rss)
    report(todo, args.runs)
    if not args.no_watch:
        peaks = watch_rss(tree)
        growth = peaks[1000] - peaks[100]
        print(
            f"memory --watch ({WATCH_EXAMPLE}) peak RSS: {peaks[100] / 1024:.1f} MiB after 100 refreshes, "
            f"{peaks[1000] / 1024:.1f} MiB after 1,000 (growth {growth / 1024:+.1f} MiB)"
        )
        peaks = exporter_rss(tree)
        if peaks:
            growth = peaks[1000] - peaks[100]
            print(
                f"exporter ({WATCH_EXAMPLE}) peak RSS: {peaks[100] / 1024:.1f} MiB after 100 scrapes, "
                f"{peaks[1000] / 1024:.1f} MiB after 1,000 (growth {growth / 1024:+.1f} MiB)"
            )
    return 0 if all(ok for ok in _verdicts(todo)) else 1


def _verdicts(todo: list[Case]) -> list[bool]:
    floor = statistics.median(todo[0].walls)
    by_name = {c.name: c for c in todo}
    return [
        statistics.median(c.walls) / floor <= c.target
        for c in todo
        if c.target is not None and not c.name.startswith("base: ")  # the verdict is on wall time
    ] + [
        statistics.median(c.walls) / statistics.median(by_name[other].walls) <= most
        for c in todo
        for other, most in c.against
        if other in by_name
    ]


def report(todo: list[Case], runs: int) -> None:
    floor = statistics.median(next(c for c in todo if c.name == "floor").walls)
    by_name = {c.name: c for c in todo}
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"{runs} interleaved rounds, medians; replay of {EXAMPLE}"
    )
    cpu_floor = statistics.median(next(c for c in todo if c.name == "floor").cpus)
    print("wall: elapsed ms; cpu: the child's user+system ms (less disturbed by other load); x: ratio to the floor")
    print(f"{'command':<28}{'wall':>7}{'min':>7}{'x':>6}{'cpu':>7}{'x':>6}{'target':>7}  {'verdict':<8}{'RSS MiB':>7}")
    for case in todo:
        med = statistics.median(case.walls)
        ratio = med / floor
        cpu = statistics.median(case.cpus)
        target = f"{case.target:.2f}" if case.target else ""
        verdict = "" if case.target is None else ("ok" if ratio <= case.target else "OVER")
        extra = ""
        base = by_name.get("base: " + case.name)
        if base is not None:
            extra = (
                f"  after/before wall {med / statistics.median(base.walls):.2f}"
                f" cpu {cpu / statistics.median(base.cpus):.2f}"
            )
        rss = statistics.median(case.rss_kib) / 1024
        print(
            f"{case.name:<28}{med * 1000:>7.0f}{min(case.walls) * 1000:>7.0f}{ratio:>6.2f}{cpu * 1000:>7.0f}"
            f"{cpu / cpu_floor:>6.2f}{target:>7}  {verdict:<8}{rss:>7.1f}{extra}"
        )
    for case in todo:
        for other, most in case.against:
            if other not in by_name:
                continue
            ref = by_name[other]
            wall = statistics.median(case.walls) / statistics.median(ref.walls)
            cpu = statistics.median(case.cpus) / statistics.median(ref.cpus)
            verdict = "ok" if wall <= most else "OVER"
            print(f"{case.name} / {other}: wall {wall:.2f}, cpu {cpu:.2f}  (target <= {most:.2f}) {verdict}")
    if "nvitop -1" in by_name and "list" in by_name:
        lst, top = by_name["list"], by_name["nvitop -1"]
        wall = statistics.median(lst.walls) / statistics.median(top.walls)
        cpu = statistics.median(lst.cpus) / statistics.median(top.cpus)
        print(f"list / nvitop -1 (both on the replay): wall {wall:.2f}, cpu {cpu:.2f}  (target < 1)")


if __name__ == "__main__":
    sys.exit(main())
