"""What each NVML C function costs on this machine's driver: the figures gpudiag.replay.call_costs holds.

Run on a GPU machine. Every C function pynvml reaches is timed (CPU of the calling thread and wall
time) while the exporter scrapes (native, then --compat dcgm), `list --json --details`'s read runs,
and nvmlDeviceValidateInforom is called on each GPU; then one line per function: calls, CPU and
wall ms per call, and a `H200`-style table to paste into call_costs.py (CPU per call, rounded).
``--replay NAME`` runs the same over the fake NVML (to try the script without a GPU: the figures
are then the fake's).

Usage: python benchmarks/nvml_call_costs.py [--scrapes N] [--replay NAME]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Any

from gpudiag.export.exporter import Exporter
from gpudiag.model import ALL_GROUPS
from gpudiag.sources import open_source


class _Timed:
    """A C function of the library, timed; pynvml's attribute writes (restype) reach the function."""

    def __init__(self, name: str, function: Any, stats: dict[str, list[float]]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_function", function)
        object.__setattr__(self, "_stats", stats)

    def __call__(self, *args: Any) -> Any:
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return self._function(*args)
        finally:
            entry = self._stats[self._name]
            entry[0] += 1
            entry[1] += time.thread_time() - cpu
            entry[2] += time.perf_counter() - wall

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._function, name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._function, name)


def _timed(lib: Any, stats: dict[str, list[float]]) -> None:
    """Time every C function ``lib`` (pynvml, or the fake's copy) looks up from now on."""
    lookup = lib._nvmlGetFunctionPointer
    lib._nvmlGetFunctionPointer_cache.clear()

    def timed_lookup(name: str) -> Any:
        return _Timed(name, lookup(name), stats)

    lib._nvmlGetFunctionPointer = timed_lookup


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=50)
    parser.add_argument("--replay", default=None, help="an example machine (the fake NVML's own figures)")
    args = parser.parse_args()
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for compat in ("native", "dcgm"):
        with open_source(args.replay) as source:
            _timed(source.lib, stats)
            exporter = Exporter(source, compat=compat, hostname="bench")
            for _ in range(args.scrapes):
                exporter.render_text()
                exporter.source.session.forget_slow()  # the rows read once a minute, timed every time
    with open_source(args.replay) as source:
        _timed(source.lib, stats)
        source.read(ALL_GROUPS)  # list --json --details, snapshot: the InfoROM and the details
    print(f"{'C function':58s} {'calls':>6s} {'CPU ms/call':>12s} {'wall ms/call':>13s}")
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
    for name, (calls, cpu, wall) in rows:
        print(f"{name:58s} {calls:6d} {cpu / calls * 1000:12.3f} {wall / calls * 1000:13.3f}")
    total_calls = sum(s[0] for _, s in rows)
    total_cpu = sum(s[1] for _, s in rows)
    print(f"\nmean CPU per call: {total_cpu / total_calls * 1000:.3f} ms over {total_calls} calls")
    print("for gpudiag/replay/call_costs.py (CPU seconds per call):")
    print("{")
    for name, (calls, cpu, _) in rows:
        print(f'    "{name}": {cpu / calls:.6f},')
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
