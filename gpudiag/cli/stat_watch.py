"""What `gpudiag stat` prints, once or refreshed: gpustat's block of lines (in place on a terminal, one
block after another when piped) or its JSON (JSON Lines with --watch); on a replay with a recorded
series, --watch plays it sample by sample."""

from __future__ import annotations

import json
import time
from typing import Any

import typer
from msgspec.structs import replace

from gpudiag.cli.common import Settings, echo, make_console
from gpudiag.cli.smi_views import Opened
from gpudiag.model import Machine
from gpudiag.readings import groups_of
from gpudiag.render import stat_view

# What a line shows (render.stat_view): temperature, utilization, power, memory, the processes and
# their owners; the groups read are theirs.
READS = ("memory", "utilization", "temperature_c", "power_draw_w", "power_limit_w", "processes")
GROUPS = groups_of(READS)


class _Printer:
    """One sample out: JSON, a block of lines, or the terminal's live block (its cursor restored at close)."""

    def __init__(self, s: Settings, opened: Opened, options: dict[str, bool], json_output: bool, watch: bool) -> None:
        self._chosen = {g.index for g in (*opened.gpus, *opened.unusable)}
        self._options, self._json, self._watch = options, json_output, watch
        self._console = make_console(s)
        self._live: Any = None

    def show(self, machine: Machine, n: int) -> None:
        gpus = tuple(g for g in machine.gpus if g.index in self._chosen)
        if self._json:
            document = stat_view.to_json(machine, gpus)
            typer.echo(json.dumps(document, separators=(",", ":")) if self._watch else json.dumps(document, indent=2))
            return
        text = stat_view.block(machine, gpus, **self._options)
        if self._watch and self._console.is_terminal:
            from rich.text import Text

            self._live_block().update(Text(text.rstrip("\n")), refresh=True)
            return
        echo(("\n" if n else "") + text, nl=False)

    def _live_block(self) -> Any:
        if self._live is None:
            from rich.live import Live

            from gpudiag import edge

            self._live = Live(console=self._console, auto_refresh=False, transient=False, redirect_stderr=False)
            self._live.start()
            edge.cursor_hidden(True)
        return self._live

    def close(self) -> None:
        if self._live is not None:
            from gpudiag import edge

            self._live.stop()
            edge.cursor_hidden(False)


def run(
    s: Settings,
    opened: Opened,
    options: dict[str, bool],
    json_output: bool,
    watch: bool,
    interval: float,
    count: int | None,
) -> None:
    """Print the opened machine once, or every ``interval`` seconds (``count`` times, or the replay's
    recorded samples, whichever is fewer); each sample shows the moment it was taken."""
    printer = _Printer(s, opened, options, json_output, watch)
    source = opened.source
    try:
        if not watch:
            printer.show(replace(opened.machine, collected_at=source.sample_time()), 0)
            return
        from gpudiag.pacing import repeat

        recorded = source.play()
        total = count if not recorded else min(count or recorded, recorded)

        def step(n: int) -> None:
            if recorded and n:
                source.seek(n)
            printer.show(replace(source.read(GROUPS), collected_at=source.sample_time()), n)

        repeat(step, interval, total, time.monotonic, time.sleep)
    finally:
        printer.close()
