"""`gpudiag memory [--watch]`: per-GPU and per-process memory, with PyTorch's breakdown."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import NVML_EXIT, ExitCode

if TYPE_CHECKING:
    from gpudiag.memory import MemoryView, WatchState
    from gpudiag.track import TrackedProcess


@dataclass
class Clock:
    """Time as the watch sees it; tests swap in one that steps the fake machine."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time


CLOCK = Clock()


def _seconds(value: float | None, option: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise UsageError(f"{option} {value}: must be a positive number of seconds")
    return value


def _size(value: str | None, option: str) -> int | None:
    from gpudiag.units import parse_size

    if value is None:
        return None
    try:
        return parse_size(value)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}") from None


@handle_errors
def command(
    ctx: typer.Context,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh live until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between samples.")] = 1.0,
    count: Annotated[int | None, typer.Option("--count", help="Take this many samples, then exit.")] = None,
    ids: Annotated[str | None, typer.Option("--id", "-i", help="Only these GPUs (index, UUID or bus id).")] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="JSON (gpudiag.memory/1); JSON Lines with --watch.")
    ] = False,
    log: Annotated[
        Path | None,
        typer.Option("--log", help="Watch, writing every sample to FILE (.csv or .jsonl).", dir_okay=False),
    ] = None,
    until_free: Annotated[
        str | None, typer.Option("--until-free", help="Wait until a GPU has this much free (e.g. 20GiB), exit 0.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="With --until-free: give up after SECONDS (exit 1).")
    ] = None,
    alert_free_below: Annotated[
        str | None, typer.Option("--alert-free-below", help="Exit 1 as soon as a GPU's free memory is below SIZE.")
    ] = None,
    prometheus: Annotated[
        int | None, typer.Option("--prometheus", help="Watch, serving the figures as Prometheus metrics on PORT.")
    ] = None,
    bind: Annotated[str, typer.Option("--bind", help="Address for --prometheus.")] = "127.0.0.1",
    textfile: Annotated[
        Path | None,
        typer.Option(
            "--textfile",
            help="Write one sample as DIR/gpudiag_memory.prom for node_exporter's textfile collector (atomically).",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """Per-GPU and per-process memory; `--watch` follows it live during training."""
    from gpudiag import memory
    from gpudiag.model import GpuState, NvmlStatus
    from gpudiag.probe.collect import open_source
    from gpudiag.render import memory_view
    from gpudiag.selection import select_gpus
    from gpudiag.watch import WatchOptions, run

    s = settings(ctx)
    _seconds(interval, "--interval")
    _seconds(timeout, "--timeout")
    if count is not None and count < 1:
        raise UsageError("--count must be 1 or more")
    if prometheus is not None and not 0 < prometheus < 65536:
        raise UsageError(f"--prometheus {prometheus}: not a TCP port")
    if log is not None and log.suffix.lower() not in (".csv", ".jsonl"):
        raise UsageError(f"--log {log}: use a .csv or .jsonl file name")
    if timeout is not None and until_free is None:
        raise UsageError("--timeout goes with --until-free")
    options = WatchOptions(
        interval=interval,
        count=count,
        until_free=_size(until_free, "--until-free"),
        timeout=timeout,
        alert_free_below=_size(alert_free_below, "--alert-free-below"),
    )
    looping = watch or any(v is not None for v in (count, until_free, alert_free_below, log, prometheus))
    if textfile is not None and looping:
        raise UsageError("--textfile writes one sample (for cron, Prolog, Epilog); serve a watch with --prometheus")

    with open_source(s.replay) as source:
        first = source.read()
        if first.nvml.status is not NvmlStatus.OK:
            raise GpudiagError(first.nvml.detail, NVML_EXIT[first.nvml.status])
        wanted = {g.index for g in select_gpus(first.gpus, ids)} if ids else None
        replayed = s.replay is not None

        if not looping:
            view = memory.build(first, _tracked(replayed), wanted)
            if textfile is not None:
                from gpudiag.fleet.textfile import write_memory

                write_memory(textfile, view, live=not replayed)
            elif json_output:
                stamp = 0.0 if replayed else CLOCK.wall()  # a replay's one-shot is deterministic, as in `list`
                typer.echo(json.dumps(memory_view.to_json(view, stamp), indent=2))
            else:
                make_console(s).print(memory_view.render(view))
            if any(r.gpu.state is GpuState.LOST for r in view.gpus):
                raise typer.Exit(int(ExitCode.GPU_LOST))
            return

        pending = [first]  # the first reading is the first sample

        def sample() -> MemoryView:
            machine = pending.pop() if pending else source.read()
            return memory.build(machine, _tracked(replayed), wanted)

        console = make_console(s)
        lines = json_output or not console.is_terminal
        outputs = Outputs(console, lines, log, prometheus, bind)
        try:
            with _sigterm_as_interrupt():  # `kill`, `timeout`: stop like Ctrl-C, terminal restored
                outcome = run(sample, outputs.show, options, CLOCK.now, CLOCK.sleep, CLOCK.wall)
        finally:
            outputs.close()
    if outcome.message:
        typer.echo(f"gpudiag: {outcome.message}", err=True)
    raise typer.Exit(int(outcome.code))


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _tracked(replayed: bool) -> dict[int, TrackedProcess]:
    """Tracker entries. A replayed machine's PIDs are not this host's: only entries recorded
    with it (in GPUDIAG_TRACK_DIR) apply, and the host is not asked whether those PIDs live."""
    from gpudiag import track

    if not replayed:
        return track.read_entries()
    if not os.environ.get(track.DIR_ENV):
        return {}
    return track.read_entries(live=False)


class Outputs:
    """Where samples go: a live rich view on a terminal, JSON Lines otherwise, plus log/metrics."""

    def __init__(self, console: Any, lines: bool, log: Path | None, prometheus: int | None, bind: str) -> None:
        from gpudiag.render import memory_view

        self._view = memory_view
        self._console = console
        self._live: Any = None
        self._log: IO[str] | None = None
        self._csv: Any = None
        self._metrics: Any = None
        self._lines = lines
        try:
            if log is not None:
                self._open_log(log)
            if prometheus is not None:
                from gpudiag.render.prometheus import MemoryMetrics

                self._metrics = MemoryMetrics.serve(prometheus, bind)
                typer.echo(f"gpudiag: serving metrics on http://{bind}:{self._metrics.port}/metrics", err=True)
            if not lines:
                from rich.live import Live

                # Not transient: the last frame stays on screen after Ctrl-C; the cursor comes back.
                self._live = Live(console=console, auto_refresh=False, transient=False, redirect_stderr=False)
                self._live.start()
        except BaseException:
            self.close()
            raise

    def _open_log(self, log: Path) -> None:
        try:
            self._log = log.open("a", newline="", encoding="utf-8")
            empty = log.stat().st_size == 0
        except OSError as exc:
            raise GpudiagError(f"cannot write {log}: {exc.strerror or exc}", ExitCode.USAGE) from None
        if log.suffix.lower() == ".csv":
            import csv

            self._csv = csv.writer(self._log)
            if empty:
                self._csv.writerow(self._view.CSV_HEADER)

    def show(self, view: MemoryView, state: WatchState, tick: float) -> None:
        stamp = state.last_at
        if self._live is not None:
            self._live.update(self._view.render(view, state, self._console.height), refresh=True)
        else:
            sys.stdout.write(json.dumps(self._view.to_json(view, stamp, state)) + "\n")
            sys.stdout.flush()
        if self._log is not None:
            try:
                if self._csv is not None:
                    self._csv.writerows(self._view.csv_rows(view, stamp))
                else:
                    self._log.write(json.dumps(self._view.to_json(view, stamp, state)) + "\n")
                self._log.flush()
            except OSError as exc:  # disk full, file system gone: stop, say why
                raise GpudiagError(f"cannot write the log: {exc.strerror or exc}", ExitCode.FAILED) from None
        if self._metrics is not None:
            self._metrics.update(view, state.peak_used)

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()
        if self._log is not None:
            log, self._log = self._log, None
            with contextlib.suppress(OSError):
                log.close()
        if self._metrics is not None:
            metrics, self._metrics = self._metrics, None
            metrics.shutdown()
