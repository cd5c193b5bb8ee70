"""CPU cost of one `memory --watch` refresh on an 8-GPU / 64-process machine, rendering included.

One refresh = read every GPU through the NVML source (here the fake NVML replaying the
example machine, handles kept as in a real watch), read tracker entries, build the view,
render it with rich for a 160x50 terminal, as the live view does (rows that do not fit
the screen are summarised, not rendered). Target: ≤ 2 % of one core at 1 Hz, i.e. ≤ 20 ms of CPU per refresh.
Usage: python benchmarks/bench_memory_watch.py [--refreshes N]
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import sys
import time

from rich.console import Console

from gpudiag import memory, track
from gpudiag.probe.collect import open_source
from gpudiag.render import memory_view

TARGET_PERCENT = 2.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--refreshes", type=int, default=200)
    args = parser.parse_args()
    console = Console(file=io.StringIO(), width=160, height=50, force_terminal=True)  # a 160x50 terminal
    state = memory.WatchState()
    costs = []
    with open_source("h100x8-training-64procs") as source:
        for _ in range(args.refreshes):
            start = time.process_time()
            view = state.update(memory.build(source.read(), track.read_entries()))
            console.print(memory_view.render(view, state, console.height))
            console.file = io.StringIO()
            costs.append(time.process_time() - start)
    per_refresh = statistics.median(costs[5:])  # after warm-up
    percent = per_refresh / 1.0 * 100  # at 1 Hz
    print(f"machine: {platform.machine()} python {platform.python_version()}")
    print(
        f"CPU per refresh (8 GPUs, 64 processes, rendered): median {per_refresh * 1000:.1f} ms "
        f"(p90 {sorted(costs)[int(len(costs) * 0.9)] * 1000:.1f} ms)"
    )
    print(
        f"at 1 Hz: {percent:.2f}% of one core (target <= {TARGET_PERCENT}%): "
        f"{'OK' if percent <= TARGET_PERCENT else 'OVER TARGET'}"
    )
    return 0 if percent <= TARGET_PERCENT else 1


if __name__ == "__main__":
    sys.exit(main())
