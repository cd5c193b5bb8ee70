"""`gpudiag memory [--watch]`: per-GPU and per-process memory, with PyTorch's breakdown."""

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from gpudiag.cli.common import echo, exit_if_lost, handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import NVML_EXIT


class Clock(msgspec.Struct):
    """Time as the watch sees it; tests swap in one that steps the fake machine."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time


CLOCK = Clock()


# nvtop counts its delay in tenths of a second and nvitop refuses less than 0.25 s; NVML itself
# refreshes utilization every 1/6 s to 1 s. Faster sampling only burns the CPU it measures.
MIN_INTERVAL_S = 0.1


def _seconds(value: float | None, option: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise UsageError(f"{option} {value}: must be a positive number of seconds")
    return value


def _interval(value: float) -> float:
    _seconds(value, "--interval")
    if value < MIN_INTERVAL_S:
        raise UsageError(f"--interval {value:g}: use at least {MIN_INTERVAL_S:g} seconds between samples")
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
        bool, typer.Option("--json", help="JSON (gpudiag.memory/2); with --watch, JSON Lines (one sample a line).")
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
    from gpudiag.memory_watch import SinkOptions, follow, tracked_entries
    from gpudiag.model import NvmlStatus
    from gpudiag.probe.collect import open_source
    from gpudiag.render import memory_view
    from gpudiag.selection import select_gpus
    from gpudiag.watch import WatchOptions

    s = settings(ctx)
    _interval(interval)
    _seconds(timeout, "--timeout")
    if count is not None and count < 1:
        raise UsageError("--count must be 1 or more")
    if ids is not None:  # the same rule as `list --id`: '' or '0,,1' is a usage error
        from gpudiag.selection import parse_ids

        parse_ids(ids)
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

    with open_source(s.replay, facts=memory.GROUPS) as source:
        first = source.read()
        if first.nvml.status is not NvmlStatus.OK:
            raise GpudiagError(first.nvml.detail, NVML_EXIT[first.nvml.status])
        wanted = {g.index for g in select_gpus(first.gpus, ids)} if ids is not None else None
        replayed = s.replay is not None
        if looping:
            sinks = SinkOptions(json_lines=json_output, log=log, prometheus=prometheus, bind=bind)
            outcome = follow(source.read, first, wanted, replayed, options, make_console(s), sinks, CLOCK)
        else:
            view = memory.build(first, tracked_entries(replayed), wanted)
    if looping:
        if outcome.message:
            echo(f"gpudiag: {outcome.message}", err=True, one_line=True)
        raise typer.Exit(int(outcome.code))
    if textfile is not None:
        from gpudiag.fleet.textfile import write_memory

        write_memory(textfile, view, live=not replayed)
    elif json_output:
        stamp = 0.0 if replayed else CLOCK.wall()  # a replay's one-shot is deterministic, as in `list`
        import json  # only with --json: ~1.5 ms of start-up otherwise

        from gpudiag.fleet.identity import slurm_node

        typer.echo(json.dumps(memory_view.to_json(view, stamp, slurm_node=slurm_node()), indent=2))
    else:
        make_console(s).print(memory_view.render(view))
    exit_if_lost(r.gpu for r in view.gpus)
