"""`gpudiag report` over 10,000 and 50,000 node files: time against `json.load`, peak memory, lines.

Writes N `check --json` files of the 8-GPU example (as `check` prints them, one in fifty broken),
then runs, each in a fresh process: a floor that merely `json.load`s every file, `gpudiag report
DIR` (the grouped human report), `report DIR --json` and `report DIR --junit FILE`. Per run: wall
and CPU seconds, peak RSS (of that process alone), and for the human report its lines and bytes.

Targets (ratios measured in the same run): report and report --json within 3× the floor's CPU
time; every run ≤ 300 MiB peak RSS; the human report ≤ 100 lines at 10,000 nodes. CPU time is
what is compared: on a shared machine other work inflates wall time, not the work a run does.
Usage: python benchmarks/bench_report.py [--nodes 10000,50000] [--runs R] [--dir DIR]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_RATIO = 3.0
MAX_RSS_MIB = 300
MAX_LINES = 100  # of the human report at 10,000 nodes
LINES_AT = 10_000

FLOOR = """
import json, os, sys
directory = sys.argv[1]
for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), "rb") as handle:
        json.load(handle)
"""


def gpudiag(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, check=False).stdout


def make_fleet(directory: Path, nodes: int) -> int:
    """N check files (kept when the directory already holds them); returns the size of one in bytes."""
    healthy = json.loads(gpudiag("--replay", "h100x8-healthy", "check", "--json", "--no-torch"))
    broken = json.loads(gpudiag("--replay", "a100-ecc-errors", "check", "--json", "--no-torch"))
    texts = []
    for data in (healthy, broken):
        data["slurm_node"] = "@NODE@"
        texts.append(json.dumps(data, indent=2))
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(nodes):
        path = directory / f"gpu{i:05d}.json"
        if not path.exists():
            path.write_text(texts[i % 50 == 7].replace("@NODE@", f"gpu{i:05d}"))
    for extra in sorted(directory.glob("*.json"))[nodes:]:
        extra.unlink()
    return len(texts[0])


@dataclass
class Run:
    wall: float
    cpu: float
    rss_mib: float
    stdout: bytes


def child(argv: list[str]) -> Run:
    """One process: wall and CPU seconds (user + system) and peak RSS of that process alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped by wait4
    wall = time.perf_counter() - start
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out)


def median_run(argv: list[str], runs: int) -> Run:
    done = [child(argv) for _ in range(runs)]
    return Run(
        statistics.median(r.wall for r in done),
        statistics.median(r.cpu for r in done),
        max(r.rss_mib for r in done),
        done[-1].stdout,
    )


def measure(directory: Path, nodes: int, runs: int) -> list[str]:
    """The figures for one fleet size, as lines; a missed target says MISSES."""
    report = [sys.executable, "-m", "gpudiag", "report", str(directory)]
    junit = directory.parent / f"junit-{nodes}.xml"
    child([sys.executable, "-c", FLOOR, str(directory)])  # warm the page cache
    floor = median_run([sys.executable, "-c", FLOOR, str(directory)], runs)
    lines = [f"{nodes} nodes: json.load floor {floor.wall:.1f} s wall, {floor.cpu:.1f} s CPU, {floor.rss_mib:.0f} MiB"]
    for label, argv in (
        ("report", report),
        ("report --json", [*report, "--json"]),
        ("report --junit", [*report, "--junit", str(junit)]),
    ):
        run = median_run(argv, runs)
        ratio = run.cpu / floor.cpu
        verdicts = []
        if label != "report --junit":
            verdicts.append(
                f"{ratio:.2f}× the floor's CPU ({'meets' if ratio <= MAX_RATIO else 'MISSES'} ≤ {MAX_RATIO}×)"
            )
        verdicts.append(
            f"{run.rss_mib:.0f} MiB ({'meets' if run.rss_mib <= MAX_RSS_MIB else 'MISSES'} ≤ {MAX_RSS_MIB})"
        )
        extra = ""
        if label == "report":
            count = run.stdout.count(b"\n")
            target = f" ({'meets' if count <= MAX_LINES else 'MISSES'} ≤ {MAX_LINES})" if nodes == LINES_AT else ""
            extra = f", {count} lines{target}, {len(run.stdout) / 1024:.1f} KiB"
        elif label == "report --junit":
            extra = f", {junit.stat().st_size / 2**20:.0f} MiB of XML"
        lines.append(f"  gpudiag {label}: {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, " + ", ".join(verdicts) + extra)
    junit.unlink(missing_ok=True)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", default="10000,50000", help="fleet sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="keep the files here (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    compileall.compile_dir(str(ROOT / "gpudiag"), quiet=1)  # PYTHONDONTWRITEBYTECODE: compile first
    base = args.dir or Path(tempfile.mkdtemp(prefix="gpudiag-bench-report-"))
    try:
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}")
        missed = False
        for nodes in sizes:
            directory = base / f"n{nodes}"
            size = make_fleet(directory, nodes)
            print(f"{nodes} check files of 8 GPUs, {size / 1024:.0f} KiB each ({nodes * size / 2**20:.0f} MiB)")
            lines = measure(directory, nodes, args.runs)
            print("\n".join(lines), flush=True)
            missed = missed or any("MISSES" in line for line in lines)
        return 1 if missed else 0
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
