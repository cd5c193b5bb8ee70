"""`gpudiag memory [--watch]`: per-GPU and per-process memory, with PyTorch's breakdown."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from gpudiag.cli.common import echo, exit_if_lost, handle_errors, make_console, require_nvml, seconds, settings, size
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode


class Clock(msgspec.Struct):
    """Time as the watch sees it; tests swap in one that steps the fake machine."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time


CLOCK = Clock()


# nvtop counts its delay in tenths of a second and nvitop refuses less than 0.25 s; NVML itself
# refreshes utilization every 1/6 s to 1 s. Faster sampling only burns the CPU it measures.
MIN_INTERVAL_S = 0.1


def _duration(value: str | None, option: str) -> float | None:
    from gpudiag.units import parse_duration

    if value is None:
        return None
    try:
        return parse_duration(value)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}") from None


def _offline(
    ctx: typer.Context, postmortem: Path | None, torch_snapshot: Path | None, plot: Path | None, output: Path | None
) -> None:
    """`--postmortem` and `--plot` read files, not the machine."""
    if (postmortem is None) == (plot is None):
        raise UsageError(
            "--postmortem FILE or --plot LOG (one of them; --torch-snapshot goes with the first, "
            "--output with the second)"
        )
    if postmortem is not None:
        if output is not None:
            raise UsageError("--output goes with --plot")
        from gpudiag.memory import postmortem as memory_postmortem
        from gpudiag.render import postmortem_view

        doc = memory_postmortem.load(postmortem)
        make_console(settings(ctx)).print(postmortem_view.render(doc, postmortem))
        if torch_snapshot is not None:
            if not memory_postmortem.write_torch_snapshot(doc, torch_snapshot):
                raise GpudiagError(
                    f"{postmortem} has no PyTorch snapshot: the program did not call "
                    "torch.cuda.memory._record_memory_history() before the OOM",
                    ExitCode.FAILED,
                )
            echo(
                f"gpudiag: wrote {torch_snapshot} (open it at https://pytorch.org/memory_viz)", err=True, one_line=True
            )
        return
    assert plot is not None
    if torch_snapshot is not None:
        raise UsageError("--torch-snapshot goes with --postmortem")
    from gpudiag.memory import log as memory_log

    target = output or plot.with_suffix(".svg")
    series = memory_log.read(plot)
    from gpudiag.render import memory_plot

    memory_plot.write(series, target)
    echo(f"gpudiag: wrote {target}", err=True, one_line=True)


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
    alert_oom_within: Annotated[
        str | None,
        typer.Option(
            "--alert-oom-within",
            help="Exit 1 when a GPU or process is forecast to run out of memory within DURATION (e.g. 10m).",
        ),
    ] = None,
    postmortem: Annotated[
        Path | None,
        typer.Option("--postmortem", help="Explain an OOM post-mortem written by gpudiag.track.", dir_okay=False),
    ] = None,
    torch_snapshot: Annotated[
        Path | None,
        typer.Option(
            "--torch-snapshot",
            help="With --postmortem: write PyTorch's memory snapshot from it as a pickle (pytorch.org/memory_viz).",
            dir_okay=False,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw a --log file (.csv or .jsonl) as a picture of the run.", dir_okay=False),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="With --plot: the picture's file (.svg, .html, .png; default LOG.svg).",
            dir_okay=False,
        ),
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
    if postmortem is not None or plot is not None or torch_snapshot is not None or output is not None:
        _offline(ctx, postmortem, torch_snapshot, plot, output)
        return
    from gpudiag.memory.loop import WatchOptions
    from gpudiag.memory.tracked import one_sample, recording_for
    from gpudiag.memory.view import GROUPS
    from gpudiag.memory.watch import SinkOptions, follow
    from gpudiag.probe.collect import open_source
    from gpudiag.render import memory_view
    from gpudiag.selection import select_gpus

    s = settings(ctx)
    seconds(interval, "--interval", at_least=MIN_INTERVAL_S)
    seconds(timeout, "--timeout")
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
        until_free=size(until_free, "--until-free"),
        timeout=timeout,
        alert_free_below=size(alert_free_below, "--alert-free-below"),
        alert_oom_within=_duration(alert_oom_within, "--alert-oom-within"),
    )
    looping = watch or any(
        v is not None for v in (count, until_free, alert_free_below, alert_oom_within, log, prometheus)
    )
    if textfile is not None and looping:
        raise UsageError("--textfile writes one sample (for cron, Prolog, Epilog); serve a watch with --prometheus")

    with open_source(s.replay, facts=GROUPS) as source:
        first = source.read()
        require_nvml(first.nvml)
        wanted = {g.index for g in select_gpus(first.gpus, ids)} if ids is not None else None
        replayed = s.replay is not None
        recording = recording_for(s.replay)
        if looping:
            sinks = SinkOptions(json_lines=json_output, log=log, prometheus=prometheus, bind=bind)
            console = make_console(s)
            outcome = follow(source.read, first, wanted, replayed, options, console, sinks, CLOCK, recording)
        else:
            view = one_sample(first, wanted, replayed, recording)
    if looping:
        if outcome.message:
            echo(f"gpudiag: {outcome.message}", err=True, one_line=True)
        raise typer.Exit(int(outcome.code))
    if textfile is not None:
        from gpudiag.export.textfile import write_memory

        write_memory(textfile, view, live=not replayed)
    elif json_output:
        stamp = 0.0 if replayed else CLOCK.wall()  # a replay's one-shot is deterministic, as in `list`
        import json  # only with --json: ~1.5 ms of start-up otherwise

        from gpudiag.fleet.identity import slurm_node

        typer.echo(json.dumps(memory_view.to_json(view, stamp, slurm_node=slurm_node()), indent=2))
    else:
        make_console(s).print(memory_view.render(view))
    exit_if_lost(r.gpu for r in view.gpus)
