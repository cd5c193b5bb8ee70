"""`check --quick` wall time on the 8-GPU example (target ≤ 1 s) and the torch probe's cost.

Usage: python benchmarks/bench_check.py [--runs N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time

QUICK = [sys.executable, "-m", "gpudiag", "--replay", "h100x8-healthy", "check", "--quick"]
TARGET_S = 1.0


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"COLUMNS": "120"})
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from gpudiag.probe.torch_runtime import probe

    wall(QUICK)
    quick = [wall(QUICK) for _ in range(args.runs)]
    probes = []
    for _ in range(3):
        start = time.perf_counter()
        reading = probe()
        probes.append(time.perf_counter() - start)
    rt = reading.value
    print(f"machine: {platform.machine()} python {platform.python_version()}")
    print(f"check --quick (8-GPU example)  median {statistics.median(quick):.3f} s  (target <= {TARGET_S} s)")
    label = f"torch {rt.version}, CUDA {'yes' if rt.cuda_available else 'no'}" if rt else reading.detail
    print(f"torch probe (child: import + CUDA init)  median {statistics.median(probes):.2f} s  [{label}]")
    if rt:
        print(f"  of which import {rt.import_seconds:.2f} s, CUDA init {rt.init_seconds:.2f} s (last run)")
    return 0 if statistics.median(quick) <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
