"""`gpudiag list` on the 8-GPU example vs its dependency-import floor, in one run.

The floor is what any Python tool built on the same libraries pays before doing
anything: `python -c "import typer, rich, pynvml, psutil"`. Target: list ≤ 1.5× floor.
Usage: python benchmarks/bench_list.py [--runs N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time

FLOOR = [sys.executable, "-c", "import typer, rich, pynvml, psutil"]
# For context only: the same plus the rich modules any table rendering needs.
RICH_FLOOR = [sys.executable, "-c", "import typer, rich, pynvml, psutil, rich.console, rich.table"]
LIST = [sys.executable, "-m", "gpudiag", "--replay", "h100x8-healthy", "list"]
TARGET = 1.5


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"COLUMNS": "160"})
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    wall(FLOOR), wall(LIST)  # warm the page cache for both
    floors, lists, rich_floors = [], [], []
    for _ in range(args.runs):  # interleaved, so drift hits all alike
        floors.append(wall(FLOOR))
        rich_floors.append(wall(RICH_FLOOR))
        lists.append(wall(LIST))
    floor, listed = statistics.median(floors), statistics.median(lists)
    rich_floor = statistics.median(rich_floors)
    ratio = listed / floor
    print(f"machine: {platform.machine()} {platform.processor() or ''} python {platform.python_version()}")
    print(f"import floor  median {floor * 1000:7.1f} ms  (min {min(floors) * 1000:.1f})")
    print(f"gpudiag list  median {listed * 1000:7.1f} ms  (min {min(lists) * 1000:.1f})")
    print(f"ratio {ratio:.2f}x  (target <= {TARGET}x): {'OK' if ratio <= TARGET else 'OVER TARGET'}")
    context = f"floor + rich.console/rich.table median {rich_floor * 1000:.1f} ms"
    print(f"context: {context}; list is {listed / rich_floor:.2f}x that")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
