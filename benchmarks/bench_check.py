"""What `gpudiag check` costs.

- `check --quick` on the 8-GPU example, as a scheduler runs it (a fresh process each time):
  target ≤ 1 s.
- the rules alone on that machine, in process (the pure part);
- the torch probe child (interpreter start, `import torch`, CUDA initialisation);
- the overlap: `check` starts the torch child first and reads NVML while torch imports; with the
  live source slowed to what NVML costs on an 8-GPU node (0.6 s: 68 ms of InfoROM validation per
  GPU and the other reads), the gathering against the serial order (read NVML, then start torch);
- on a machine with an NVIDIA driver: the full live `check` (torch probe, functional test of
  every GPU): target ≤ 5 s for one GPU, torch import included.

Usage: python benchmarks/bench_check.py [--runs N] [--python PATH] [--no-live]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

QUICK = [sys.executable, "-m", "gpudiag", "--replay", "h100x8-healthy", "check", "--quick"]
QUICK_TARGET_S = 1.0
FULL_TARGET_S = 5.0  # one GPU, torch import included


def wall(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "120"}
    )
    return time.perf_counter() - start, done.returncode


def rules_alone(runs: int) -> float:
    from gpudiag.checks import Facts, Options, rules
    from gpudiag.probe.collect import collect

    machine = collect("h100x8-healthy")
    facts = Facts(machine=machine, torch=machine.torch_runtime, devices=None)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        rules.run(facts, Options(require_gpu="H100", require_cuda="12.4"))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


NVML_SECONDS = 0.6  # live NVML reads of an 8-GPU node, InfoROM validation included


def overlap(runs: int, python: str | None) -> tuple[float, float]:
    """Median seconds to gather check's facts (no functional test) with a slow NVML: overlapped, serial."""
    from gpudiag.checks.gather import Plan, gather
    from gpudiag.probe import collect, torch_runtime

    real = collect._live_source

    def slow(environ: object) -> collect.MachineSource:
        time.sleep(NVML_SECONDS)
        source = collect._replay_source("h100x8-healthy")
        source.name = "live"
        return source

    collect._live_source = slow  # type: ignore[assignment]
    together, serial = [], []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            gather(Plan(replay=None, torch_off="", functional_off="--quick", python=python))
            together.append(time.perf_counter() - start)
            start = time.perf_counter()
            with collect.open_source(None) as source:
                source.read()
            torch_runtime.probe(python)
            serial.append(time.perf_counter() - start)
    finally:
        collect._live_source = real  # type: ignore[assignment]
    return statistics.median(together), statistics.median(serial)


def has_driver() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", default=None, help="interpreter whose torch the probe imports")
    parser.add_argument("--no-live", action="store_true", help="skip the full live check")
    args = parser.parse_args()
    from gpudiag.probe.torch_runtime import probe

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}")
    print(f"python {platform.python_version()}")

    wall(QUICK)  # warm the page cache
    quick = [wall(QUICK)[0] for _ in range(args.runs)]
    median = statistics.median(quick)
    print(
        f"check --quick (8-GPU example, fresh process)  median {median:.3f} s  min {min(quick):.3f} s"
        f"  (target <= {QUICK_TARGET_S} s)"
    )
    print(f"rules alone (8-GPU example, in process)      median {rules_alone(args.runs) * 1000:.2f} ms")

    probes = []
    reading = None
    for _ in range(3):
        start = time.perf_counter()
        reading = probe(args.python)
        probes.append(time.perf_counter() - start)
    assert reading is not None
    rt = reading.value
    label = f"torch {rt.version}, CUDA {'available' if rt.cuda_available else 'unavailable'}" if rt else reading.detail
    print(f"torch probe (child: import + CUDA init)      median {statistics.median(probes):.2f} s  [{label}]")
    if rt:
        print(f"  of which import {rt.import_seconds:.2f} s, CUDA init {rt.init_seconds:.2f} s (last run)")

    together, serial = overlap(max(3, args.runs // 2), args.python)
    print(
        f"facts with NVML taking {NVML_SECONDS} s: torch first {together:.2f} s, NVML first {serial:.2f} s"
        f"  (saved {serial - together:.2f} s)"
    )

    ok = median <= QUICK_TARGET_S
    if not args.no_live and has_driver():
        full_cmd = [sys.executable, "-m", "gpudiag", "check"] + (["--python", args.python] if args.python else [])
        seconds, code = wall(full_cmd)
        print(
            f"full live check (functional test included)   {seconds:.2f} s  exit {code}  (target <= {FULL_TARGET_S} s)"
        )
        ok = ok and seconds <= FULL_TARGET_S
    else:
        print("full live check: skipped (no NVIDIA driver here)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
