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
- against the torch floor ``python -c "import torch; torch.cuda.init()"``, interleaved: live
  `check --quick` (target ≤ 1.05x the floor) and the full live `check` (≤ the floor + 1.5 s,
  whatever the GPU count). Without a driver both still start the torch child.
- the functional test's child alone with N GPUs faked on the CPU (torch.cuda stood in for, as
  the tests do; the real 128 MiB pattern, 1024² reference and 0.8 s load window, 256² load
  matmuls): GPUs tested at once should take one GPU's time. ``--baseline DIR`` also runs another
  checkout's child in the same rounds (before/after).

Usage: python benchmarks/bench_check.py [--runs N] [--python PATH] [--no-live] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    from gpudiag.sources import collect

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
    from gpudiag import sources
    from gpudiag.checks.gather import Plan, gather
    from gpudiag.probe import collect, torch_runtime

    real = collect.live_source

    def slow(environ: object) -> collect.MachineSource:
        time.sleep(NVML_SECONDS)
        source = sources.replay_source("h100x8-healthy")
        source.name = "live"
        return source

    collect.live_source = slow  # type: ignore[assignment]
    together, serial = [], []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            gather(Plan(replay=None, torch_off="", functional_off="--quick", python=python))
            together.append(time.perf_counter() - start)
            start = time.perf_counter()
            with sources.open_source(None) as source:
                source.read()
            torch_runtime.probe(python)
            serial.append(time.perf_counter() - start)
    finally:
        collect.live_source = real  # type: ignore[assignment]
    return statistics.median(together), statistics.median(serial)


TORCH_FLOOR = [sys.executable, "-c", "import torch\ntry:\n    torch.cuda.init()\nexcept Exception:\n    pass"]
QUICK_VS_FLOOR = 1.05
FULL_OVER_FLOOR_S = 1.5


def against_torch_floor(runs: int) -> bool:
    """Live `check --quick` and `check` against torch's own import + CUDA start-up, interleaved."""
    gpudiag = [sys.executable, "-m", "gpudiag"]
    cases = {"torch floor": TORCH_FLOOR, "check --quick": [*gpudiag, "check", "--quick"], "check": [*gpudiag, "check"]}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, cmd in cases.items():
            times[name].append(wall(cmd)[0])
    floor, quick, full = (statistics.median(times[n]) for n in cases)
    print(f"torch floor (import torch; torch.cuda.init())  median {floor:.2f} s")
    print(f"live check --quick  median {quick:.2f} s = {quick / floor:.2f}x the floor (target <= {QUICK_VS_FLOOR}x)")
    print(f"live check          median {full:.2f} s = floor + {full - floor:.2f} s (target <= + {FULL_OVER_FLOOR_S} s)")
    return quick / floor <= QUICK_VS_FLOOR and full - floor <= FULL_OVER_FLOOR_S


FAKE_CUDA = """
import os, time, torch
n = int(os.environ["FAKE_CUDA_DEVICES"])
class _Event:
    def __init__(self, enable_timing=False):
        self.t = 0.0
    def record(self):
        self.t = time.perf_counter()
    def elapsed_time(self, other):
        return (other.t - self.t) * 1000.0
class _Props:
    def __init__(self, i):
        self.uuid = f"fake-{i}"
torch.cuda.init = lambda: None
torch.cuda.device_count = lambda: n
torch.cuda.get_device_properties = _Props
torch.cuda.synchronize = lambda dev=None: None
torch.cuda.Event = _Event
torch.cuda.empty_cache = lambda: None
"""
CHILD_SETTINGS = {"device_type": "cpu", "load_seconds": 0.8, "matmul_n": 1024, "load_n": 256, "words": 16 << 20}


def functional_child(runs: int, baseline: Path | None) -> None:
    """The functional child with 1, 2 and 4 GPUs faked on the CPU: seconds per run, medians."""
    import json

    trees = {"now": Path(__file__).resolve().parent.parent, **({"baseline": baseline} if baseline else {})}
    with tempfile.TemporaryDirectory() as fake:
        (Path(fake) / "sitecustomize.py").write_text(FAKE_CUDA)
        cases = {
            (tree, devices): [
                os.path.abspath(sys.executable),  # run in `fake`: a relative interpreter path would not be found
                str(root / "gpudiag" / "children" / "functional.py"),
                json.dumps(CHILD_SETTINGS),
            ]
            for tree, root in trees.items()
            for devices in (1, 2, 4)
        }
        times: dict[tuple[str, int], list[float]] = {key: [] for key in cases}
        for _ in range(runs):
            for (tree, devices), cmd in cases.items():
                env = {**os.environ, "PYTHONPATH": fake, "FAKE_CUDA_DEVICES": str(devices)}
                start = time.perf_counter()
                subprocess.run(cmd, env=env, cwd=fake, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                times[(tree, devices)].append(time.perf_counter() - start)
    print("functional child, GPUs faked on the CPU (torch import included), median s:")
    for tree in trees:
        row = "  ".join(f"{d} GPU{'s' if d > 1 else ''} {statistics.median(times[(tree, d)]):.2f}" for d in (1, 2, 4))
        print(f"  {tree:<9} {row}")


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
    parser.add_argument("--baseline", type=Path, help="another checkout whose functional child runs too")
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
    if not args.no_live:
        ok = against_torch_floor(args.runs) and ok
    functional_child(max(3, args.runs // 2), args.baseline)
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
