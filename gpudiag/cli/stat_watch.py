"""What `gpudiag stat` prints, once or refreshed: gpustat's block of lines (in place on a terminal, one
block after another when piped) or its JSON (JSON Lines with --watch); on a replay with a recorded
series, --watch plays it sample by sample. The Typer command (cli.stat_cmd) and the plain front
(cli.plain_front) both run :func:`command`; rich is imported only where a block is printed."""

from __future__ import annotations

import json
import time
from typing import Any

from msgspec.structs import replace

from gpudiag.cli import plain, smi_views
from gpudiag.cli.plain import Settings
from gpudiag.cli.smi_requests import Pacing, Stat, StatLine, selection, stat_line, stat_pacing
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

    def __init__(self, s: Settings, opened: Opened, line: StatLine, json_output: bool, watch: bool) -> None:
        self._chosen = {g.index for g in (*opened.gpus, *opened.unusable)}
        self._line, self._json, self._watch = line, json_output, watch
        self._settings = s
        self._console: Any = None
        self._live: Any = None

    def show(self, machine: Machine, n: int) -> None:
        gpus = tuple(g for g in machine.gpus if g.index in self._chosen)
        if self._json:
            document = stat_view.to_json(machine, gpus)
            text = json.dumps(document, separators=(",", ":")) if self._watch else json.dumps(document, indent=2)
            plain.write(text + "\n")
            return
        text = stat_view.block(
            machine,
            gpus,
            show_cmd=self._line.show_cmd,
            show_pid=self._line.show_pid,
            show_power=self._line.show_power,
            processes=self._line.processes,
        )
        if self._watch and self._terminal():
            from rich.text import Text

            self._live_block().update(Text(text.rstrip("\n")), refresh=True)
            return
        plain.echo(("\n" if n else "") + text, nl=False)

    def _terminal(self) -> bool:
        if self._console is None:
            from gpudiag.cli.common import make_console

            self._console = make_console(self._settings)
        return bool(self._console.is_terminal)

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


def command(s: Settings, r: Stat) -> None:
    """`gpudiag stat` once its options are a Request: open, print, the lost GPUs' exit code."""
    pacing = stat_pacing(r)
    opened = smi_views.open_views(s, selection(r), GROUPS)
    try:
        run(s, opened, stat_line(r), r.json_output, pacing)
    finally:
        opened.close()
    smi_views.finish(opened)


def run(s: Settings, opened: Opened, line: StatLine, json_output: bool, pacing: Pacing | None) -> None:
    """Print the opened machine once (no ``pacing``), or every ``pacing.interval`` seconds (``count``
    times, or the replay's recorded samples, whichever is fewer); each sample shows its moment."""
    printer = _Printer(s, opened, line, json_output, pacing is not None)
    source = opened.source
    try:
        if pacing is None:
            printer.show(replace(opened.machine, collected_at=source.sample_time()), 0)
            return
        from gpudiag.pacing import repeat

        recorded = source.play()
        total = pacing.count if not recorded else min(pacing.count or recorded, recorded)

        def step(n: int) -> None:
            if recorded and n:
                source.seek(n)
            printer.show(replace(source.read(GROUPS), collected_at=source.sample_time()), n)

        repeat(step, pacing.interval, total, time.monotonic, time.sleep)
    finally:
        printer.close()
