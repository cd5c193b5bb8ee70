"""`gpudiag list --watch`: the list, refreshed every interval from one NVML session.

On a terminal the tables refresh in place (rich Live); piped, each sample is printed as a
block, as `nvidia-smi -l` does; CSV keeps one header and JSON becomes JSON Lines.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gpudiag import edge
from gpudiag.cli.common import exit_if_lost, make_console
from gpudiag.cli.list_modes import Request, View, check_nvml, selected
from gpudiag.model import Gpu, Machine
from gpudiag.pacing import repeat
from gpudiag.sources import open_source


def stamp(machine: Machine) -> str:
    """The sample's time as nvidia-smi -l prints it above each block (not recorded: said so)."""
    if machine.collected_at <= 0:
        return "Timestamp not recorded in this snapshot"
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(machine.collected_at))


if TYPE_CHECKING:
    from gpudiag.cli.common import Settings


# What NVML computes rather than reads, asked at most once per SLOW_EVERY_S however short the interval:
# the InfoROM's checksum (nvmlDeviceValidateInforom, ~70 ms on the H200: gpudiag.replay.call_costs).
SLOW_KEYS = frozenset({"inforom_valid"})
SLOW_EVERY_S = 60.0


def watch_list(s: Settings, view: View, request: Request) -> None:
    console = make_console(s)
    live: Any = None
    last: tuple[Gpu, ...] = ()
    with open_source(s.replay) as source:  # handles are fetched once, reused by every sample
        source.session.slow_keys, source.session.slow_every_s = SLOW_KEYS, SLOW_EVERY_S

        def step(n: int) -> None:
            nonlocal live, last
            machine = source.read(view.facts, view.only)  # a replay's samples: the moment its snapshot was taken
            check_nvml(machine, view)
            gpus = selected(machine, view.selection, request.no_processes)
            last = gpus
            if view.plain:
                block = view.text(machine, gpus, first=n == 0, lines=True)
                if view.kind == "details" and n:
                    block = "\n" + block
                view.echo(block)
            elif console.is_terminal:
                if live is None:
                    from rich.live import Live

                    live = Live(console=console, auto_refresh=False, transient=False, redirect_stderr=False)
                    live.start()
                    edge.cursor_hidden(True)
                live.update(view.renderable(machine, gpus, console), refresh=True)
            else:
                if n:
                    console.print()
                console.print(stamp(machine))
                console.print(view.renderable(machine, gpus, console))

        try:
            repeat(step, request.interval, request.count, time.monotonic, time.sleep)  # a signal goes through: 128+N
        finally:
            if live is not None:
                live.stop()  # the cursor comes back
                edge.cursor_hidden(False)
    exit_if_lost(last)  # the last sample decides, as for one sample
