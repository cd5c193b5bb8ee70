"""What each NVML C function costs on this machine's driver: the figures gpudiag.replay.call_costs holds.

Run on a GPU machine. Every C function pynvml reaches is timed (CPU of the calling thread and wall
time) while the exporter scrapes (native, then --compat dcgm), `list --json --details`'s read runs,
and nvmlDeviceValidateInforom is called on each GPU; then one line per function: calls, CPU and
wall ms per call, and a `H200`-style table to paste into call_costs.py (CPU per call, rounded).
``--replay NAME`` runs the same over the fake NVML (to try the script without a GPU: the figures
are then the fake's). Then, per GPU, what the exporter's batching assumes: the ECC totals as field
values 3-6 beside nvmlDeviceGetTotalEccErrors' answers (they must agree), and the CPU of a field-value
call of one field against one of all the exporter's (whether NVML charges per call or per field).

Usage: python benchmarks/nvml_call_costs.py [--scrapes N] [--replay NAME]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Any

from gpudiag.export.exporter import AS_FIELDS, GROUPS, Exporter
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
    """Time every C function ``lib`` (pynvml, or the fake's copy) looks up from now on. Live, every
    source shares the one pynvml module: the lookup is wrapped once, or a call would count twice."""
    lookup = getattr(lib, "_untimed_lookup", lib._nvmlGetFunctionPointer)
    lib._untimed_lookup = lookup
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
    with open_source(args.replay) as source:
        _batching(source.lib, args.scrapes)
    return 0


def _batching(lib: Any, repeats: int) -> None:
    """The ECC totals by field and by call, side by side; a field-value call's CPU by its field count."""
    from gpudiag.probe.read_plan import rows_of

    ids = [fid for _, fid in AS_FIELDS]
    rows = rows_of(frozenset(GROUPS["native"]))[0]
    every = [*ids, *((s.field, s.scope) for s in rows if s.field)]
    print("\nECC totals: field value (or its nvmlReturn) | nvmlDeviceGetTotalEccErrors (error type, counter type)")
    for index in range(lib.nvmlDeviceGetCount()):
        h = lib.nvmlDeviceGetHandleByIndex(index)
        fields = lib.nvmlDeviceGetFieldValues(h, [(fid, 0) for fid in ids])
        for (key, _), value, asked in zip(AS_FIELDS, fields, ((0, 0), (1, 0), (0, 1), (1, 1)), strict=True):
            try:
                by_call: Any = lib.nvmlDeviceGetTotalEccErrors(h, *asked)
            except lib.NVMLError as exc:
                by_call = f"error {exc}"
            by_field = value.value.ullVal if value.nvmlReturn == 0 else f"error {value.nvmlReturn}"
            print(f"  GPU {index} {key:34s} {by_field!s:>20s} | {by_call!s:>20s}")
        for asked_ids in (ids[:1], every):
            cpu = time.thread_time()
            for _ in range(repeats):
                lib.nvmlDeviceGetFieldValues(h, [(fid, 0) if isinstance(fid, int) else fid for fid in asked_ids])
            per_call = (time.thread_time() - cpu) / repeats * 1000
            print(f"  GPU {index} field-value call of {len(asked_ids):2d} fields: {per_call:.3f} ms CPU")


if __name__ == "__main__":
    sys.exit(main())
