"""NVML calls per command on the 8-GPU example (h100x8-healthy), counted on the fake NVML.

Each command asks the source only for the fact groups it shows or judges (gpudiag.model.FactGroup);
this prints what that costs in NVML calls, and the time the InfoROM check alone costs on real
hardware (docs/hardware/h100-80gb-hbm3-driver580: nvmlDeviceValidateInforom took 68 ms per GPU,
more than every other call of a `list` together; each of those took at most 2 ms).
Usage: python benchmarks/bench_nvml_calls.py [--machine NAME]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter

from typer.testing import CliRunner

from gpudiag.cli.app import app
from gpudiag.replay.fake_nvml import FakeNvml

INFOROM = "nvmlDeviceValidateInforom"
INFOROM_MS = 68.0
COMMANDS = [
    ["list"],
    ["list", "--no-processes"],
    ["list", "--query", "name,memory.used", "--format", "csv"],
    ["list", "--json"],
    ["list", "--details"],
    ["list", "--query", "clocks.sm,power.limit", "--format", "csv"],
    ["memory"],
    ["visible"],
    ["check", "--no-torch", "--quick"],
    ["snapshot"],
]


def count_calls(machine: str, args: list[str]) -> Counter[str]:
    seen: Counter[str] = Counter()
    real_enter = FakeNvml._enter

    def enter(self: FakeNvml, name: str) -> None:
        seen[name] += 1
        real_enter(self, name)

    FakeNvml._enter = enter  # type: ignore[method-assign]
    try:
        result = CliRunner().invoke(app, ["--color", "never", "--replay", machine, *args], env={"COLUMNS": "200"})
    finally:
        FakeNvml._enter = real_enter  # type: ignore[method-assign]
    if result.exit_code not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {result.exit_code}: {result.stderr}")
    return seen


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--machine", default="h100x8-healthy")
    args = parser.parse_args()
    os.environ.pop("GPUDIAG_REPLAY", None)
    print(f"NVML calls per command on {args.machine} (fake NVML)")
    print(f"{'command':<52} {'calls':>6} {INFOROM:>26} {'InfoROM ms on H100':>19}")
    for command in COMMANDS:
        calls = count_calls(args.machine, command)
        total, inforom = sum(calls.values()), calls[INFOROM]
        print(f"{' '.join(command):<52} {total:>6} {inforom:>26} {inforom * INFOROM_MS:>19.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
