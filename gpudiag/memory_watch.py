"""`memory --watch`: follow a machine source, sending each sample to its sinks.

Sinks: the live rich view on a terminal, a text block per sample into a pipe or file (as
`nvidia-smi -l` does), JSON Lines with ``--json``, and beside any of those a log file
(.csv or .jsonl) and Prometheus metrics. The command parses options and calls :func:`follow`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag import edge, memory
from gpudiag.files import AppendLog
from gpudiag.memory import MemoryView, WatchState
from gpudiag.model import Machine
from gpudiag.watch import Outcome, WatchOptions, run

if TYPE_CHECKING:
    from gpudiag.track import TrackedProcess

TRACK_DIR_ENV = "GPUDIAG_TRACK_DIR"  # gpudiag.track.DIR_ENV, spelled here so a replay need not import the tracker


class SinkOptions(msgspec.Struct, frozen=True):
    json_lines: bool  # --json: one JSON object per sample instead of text
    log: Path | None = None  # .csv or .jsonl, appended to
    prometheus: int | None = None  # port
    bind: str = "127.0.0.1"


def tracked_entries(replayed: bool) -> dict[int, TrackedProcess]:
    """Tracker entries. A replayed machine's PIDs are not this host's: only entries recorded
    with it (in GPUDIAG_TRACK_DIR) apply, and the host is not asked whether those PIDs live."""
    if replayed and not os.environ.get(TRACK_DIR_ENV):
        return {}
    from gpudiag import track

    return track.read_entries(live=not replayed)


def follow(
    read: Callable[[], Machine],
    first: Machine,
    wanted: set[int] | None,
    replayed: bool,
    options: WatchOptions,
    console: Any,
    sinks: SinkOptions,
    clock: Any,
) -> Outcome:
    """Sample ``read`` (``first`` is the first sample) until a stop condition, into the sinks.

    ``clock`` has ``now`` (monotonic), ``sleep`` and ``wall``. A signal (Ctrl-C, SIGTERM, SIGHUP)
    goes through, after the sinks are closed: the terminal restored, the log complete to its last line.
    """
    pending = [first]

    def sample() -> MemoryView:
        machine = pending.pop() if pending else read()
        return memory.build(machine, tracked_entries(replayed), wanted)

    outputs = Sinks(console, sinks)
    try:
        return run(sample, outputs.show, options, clock.now, clock.sleep, clock.wall)
    finally:
        outputs.close()


class Sinks:
    """Where samples go: a live view on a terminal, text blocks or JSON Lines otherwise, plus log/metrics."""

    def __init__(self, console: Any, options: SinkOptions) -> None:
        from gpudiag.render import memory_view

        self._view = memory_view
        self._console = console
        self._json = options.json_lines
        self._live: Any = None
        self._log: AppendLog | None = None
        self._csv = False
        self._metrics: Any = None
        try:
            if options.log is not None:
                self._open_log(options.log)
            if options.prometheus is not None:
                from gpudiag.render.prometheus import MemoryMetrics

                self._metrics = MemoryMetrics.serve(options.prometheus, options.bind)
                print(
                    f"gpudiag: serving metrics on http://{options.bind}:{self._metrics.port}/metrics",
                    file=sys.stderr,
                    flush=True,
                )
            if not self._json and console.is_terminal:
                from rich.live import Live

                # Not transient: the last frame stays on screen after Ctrl-C; the cursor comes back.
                self._live = Live(console=console, auto_refresh=False, transient=False, redirect_stderr=False)
                self._live.start()
                edge.cursor_hidden(True)
        except BaseException:
            self.close()
            raise

    def _open_log(self, log: Path) -> None:
        self._log = AppendLog(log)  # one sample a record: a full disk leaves the last whole sample
        self._csv = log.suffix.lower() == ".csv"

    def _log_record(self, view: MemoryView, state: WatchState) -> str:
        """One sample's lines for the log (the CSV header first into an empty file)."""
        if not self._csv:
            return json.dumps(self._view.to_json(view, state.last_at, state)) + "\n"
        import csv
        import io

        text = io.StringIO()
        writer = csv.writer(text)
        if self._log is not None and self._log.empty:
            writer.writerow(self._view.CSV_HEADER)
        writer.writerows(self._view.csv_rows(view, state.last_at))
        return text.getvalue()

    def show(self, view: MemoryView, state: WatchState, tick: float) -> None:
        stamp = state.last_at
        if self._live is not None:
            self._live.update(self._view.render(view, state, self._console.height), refresh=True)
        elif self._json:
            sys.stdout.write(json.dumps(self._view.to_json(view, stamp, state)) + "\n")
            sys.stdout.flush()
        else:
            # Into a pipe or file: the whole sample as a block, a blank line between samples.
            if state.samples > 1:
                self._console.print()
            self._console.print(self._view.render(view, state))
            self._console.file.flush()
        if self._log is not None:  # disk full, file system gone: GpudiagError, exit 74
            self._log.append(self._log_record(view, state))
        if self._metrics is not None:
            self._metrics.update(view, state.peak_used)

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()
            edge.cursor_hidden(False)
        if self._log is not None:
            log, self._log = self._log, None
            log.close()
        if self._metrics is not None:
            metrics, self._metrics = self._metrics, None
            metrics.shutdown()
