"""`memory --watch`: follow a machine source, sending each sample to its sinks.

Sinks: the live rich view on a terminal, a text block per sample into a pipe or file (as
`nvidia-smi -l` does), JSON Lines with ``--json``, and beside any of those a log file
(.csv or .jsonl) and Prometheus metrics. The command parses options and calls :func:`follow`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag import edge
from gpudiag.files import AppendLog
from gpudiag.memory.build import build
from gpudiag.memory.loop import Outcome, WatchOptions, run
from gpudiag.memory.state import WatchState
from gpudiag.memory.tracked import ask_for_segments, one_sample, tracked_entries
from gpudiag.memory.view import MemoryView
from gpudiag.model import Machine

if TYPE_CHECKING:
    from gpudiag.replay.recording import Recording


class SinkOptions(msgspec.Struct, frozen=True):
    json_lines: bool  # --json: one JSON object per sample instead of text
    log: Path | None = None  # .csv or .jsonl, appended to
    prometheus: int | None = None  # port
    bind: str = "127.0.0.1"


def follow(
    read: Callable[[], Machine],
    first: Machine,
    wanted: set[int] | None,
    replayed: bool,
    options: WatchOptions,
    console: Any,
    sinks: SinkOptions,
    clock: Any,
    recording: Recording | None = None,
) -> Outcome:
    """Sample ``read`` (``first`` is the first sample) until a stop condition, into the sinks.

    ``clock`` has ``now`` (monotonic), ``sleep`` and ``wall``. A signal (Ctrl-C, SIGTERM, SIGHUP)
    goes through, after the sinks are closed: the terminal restored, the log complete to its last line.
    A recorded replay takes one frame per sample and the recording's time, and ends with its last frame.
    """
    pending = [first]
    stamps: list[float] = []

    def sample() -> MemoryView:
        machine = pending.pop() if pending else read()
        if recording is None:
            tracked = tracked_entries(replayed)
            if not replayed:
                ask_for_segments(tracked, clock.wall())
            return build(machine, tracked, wanted)
        if stamps:
            recording.advance()
        stamps.append(recording.wall())
        return one_sample(machine, wanted, replayed, recording)

    wall = (lambda: stamps[-1]) if recording is not None else clock.wall
    ended = (lambda: recording.finished) if recording is not None else None
    outputs = Sinks(console, sinks)
    try:
        return run(sample, outputs.show, options, clock.now, clock.sleep, wall, ended)
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
        self._csv_width: int | None = None  # columns of an older log's header, when appending to one
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

        if self._csv and not self._log.empty:  # a log begun by an older gpudiag keeps its columns
            with contextlib.suppress(OSError, UnicodeDecodeError), log.open(encoding="utf-8") as f:
                first = f.readline().strip().split(",")
                if tuple(first) == self._view.CSV_HEADER_V1:
                    self._csv_width = len(first)

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
        writer.writerows(row[: self._csv_width] for row in self._view.csv_rows(view, state.last_at))
        return text.getvalue()

    def show(self, view: MemoryView, state: WatchState) -> None:
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
