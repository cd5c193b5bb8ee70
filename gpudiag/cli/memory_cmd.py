"""`gpudiag memory [--watch]`: per-GPU and per-process memory, with PyTorch's breakdown."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from gpudiag.cli.common import handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import NVML_EXIT, ExitCode


def _positive(value: float, option: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} {value}: must be a positive number of seconds")
    return value


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
        Path | None, typer.Option("--log", help="Also write every sample to FILE (.csv or .jsonl).", dir_okay=False)
    ] = None,
    until_free: Annotated[
        str | None, typer.Option("--until-free", help="Wait until a GPU has this much free (e.g. 20GiB), exit 0.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="With --until-free: give up after SECONDS.")
    ] = None,
    alert_free_below: Annotated[
        str | None, typer.Option("--alert-free-below", help="Exit 1 as soon as a GPU's free memory is below SIZE.")
    ] = None,
    prometheus: Annotated[
        int | None, typer.Option("--prometheus", help="Serve the figures as Prometheus metrics on this port.")
    ] = None,
    bind: Annotated[str, typer.Option("--bind", help="Address for --prometheus.")] = "127.0.0.1",
) -> None:
    """Per-GPU and per-process memory; `--watch` follows it live during training."""
    from gpudiag import memory, track
    from gpudiag.model import NvmlStatus
    from gpudiag.probe.collect import open_source
    from gpudiag.render import memory_view
    from gpudiag.selection import select_gpus
    from gpudiag.units import parse_size
    from gpudiag.watch import WatchOptions, run

    s = settings(ctx)
    _positive(interval, "--interval")
    if timeout is not None:
        _positive(timeout, "--timeout")
    if count is not None and count < 1:
        raise UsageError("--count must be 1 or more")
    if prometheus is not None and not 0 < prometheus < 65536:
        raise UsageError(f"--prometheus {prometheus}: not a TCP port")
    if log is not None and log.suffix not in (".csv", ".jsonl"):
        raise UsageError(f"--log {log}: use a .csv or .jsonl file name")
    if timeout is not None and until_free is None:
        raise UsageError("--timeout goes with --until-free")
    looping = watch or count is not None or until_free is not None or alert_free_below is not None
    options = WatchOptions(
        interval=interval,
        count=count,
        until_free=parse_size(until_free) if until_free else None,
        timeout=timeout,
        alert_free_below=parse_size(alert_free_below) if alert_free_below else None,
    )

    with open_source(s.replay) as source:
        first = source.read()
        if first.nvml.status is not NvmlStatus.OK:
            raise GpudiagError(first.nvml.detail, NVML_EXIT[first.nvml.status])
        wanted = {g.index for g in select_gpus(first.gpus, ids)} if ids else None

        def sample() -> memory.MemoryView:
            return memory.build(source.read(), track.read_entries(), wanted)

        if not looping:
            view = memory.WatchState().update(memory.build(first, track.read_entries(), wanted))
            if json_output:
                typer.echo(json.dumps(memory_view.to_json(view, time.time()), indent=2))
            else:
                make_console(s).print(memory_view.render(view))
            return

        console = make_console(s)
        outputs = _Outputs(console, json_output or not console.is_terminal, log, prometheus, bind)
        try:
            outcome = run(sample, outputs.show, options, time.monotonic, time.sleep)
        finally:
            outputs.close()
    if outcome.message:
        typer.echo(f"gpudiag: {outcome.message}", err=True)
    raise typer.Exit(int(outcome.code))


class _Outputs:
    """Where samples go: a live rich view on a terminal, JSON Lines otherwise, plus log/metrics."""

    def __init__(self, console: Any, lines: bool, log: Path | None, prometheus: int | None, bind: str) -> None:
        from gpudiag.render import memory_view

        self._view = memory_view
        self._console = console
        self._lines = lines
        self._live: Any = None
        self._log: IO[str] | None = None
        self._csv: Any = None
        self._metrics: Any = None
        if log is not None:
            try:
                self._log = log.open("a", newline="")
            except OSError as exc:
                raise GpudiagError(f"cannot write {log}: {exc.strerror or exc}", ExitCode.USAGE) from None
            if log.suffix == ".csv":
                import csv

                self._csv = csv.writer(self._log)
                if log.stat().st_size == 0:
                    self._csv.writerow(memory_view.CSV_HEADER)
        if prometheus is not None:
            from gpudiag.render.prometheus import MemoryMetrics

            self._metrics = MemoryMetrics.serve(prometheus, bind)
        if not lines:
            from rich.live import Live

            self._live = Live(console=console, auto_refresh=False, transient=False, redirect_stderr=False)
            self._live.start()

    def show(self, view: Any, state: Any, tick: float) -> None:
        stamp = time.time()
        if self._live is not None:
            self._live.update(self._view.render(view, state, self._console.height), refresh=True)
        else:
            sys.stdout.write(json.dumps(self._view.to_json(view, stamp)) + "\n")
            sys.stdout.flush()
        if self._log is not None:
            if self._csv is not None:
                self._csv.writerows(self._view.csv_rows(view, stamp))
            else:
                self._log.write(json.dumps(self._view.to_json(view, stamp)) + "\n")
            self._log.flush()
        if self._metrics is not None:
            self._metrics.update(view)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
        if self._log is not None:
            self._log.close()
        if self._metrics is not None:
            self._metrics.shutdown()
