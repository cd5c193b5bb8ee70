"""`gpudiag memory [--watch]`: per-GPU and per-process memory, with PyTorch's breakdown.

The options are checked in gpudiag.memory.request; a watch runs in gpudiag.cli.memory_watch.
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from gpudiag.cli import memory_once
from gpudiag.cli.common import echo, handle_errors, make_console, request_of, settings
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.cli.common import Settings
    from gpudiag.memory.request import Request


class Clock(msgspec.Struct):
    """Time as the watch sees it; tests swap in one that steps the fake machine."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time


CLOCK = Clock()


def _offline(s: "Settings", r: "Request") -> None:
    """`--postmortem` and `--plot` read files, not the machine."""
    from gpudiag.memory.request import check_offline

    check_offline(r)
    if r.postmortem is not None:
        from gpudiag.memory import postmortem
        from gpudiag.render import postmortem_view

        doc = postmortem.load(r.postmortem)
        make_console(s).print(postmortem_view.render(doc, r.postmortem))
        if r.torch_snapshot is not None:
            if not postmortem.write_torch_snapshot(doc, r.torch_snapshot):
                raise GpudiagError(
                    f"{r.postmortem} has no PyTorch snapshot: the program did not call "
                    "torch.cuda.memory._record_memory_history() before the OOM",
                    ExitCode.FAILED,
                )
            echo(
                f"gpudiag: wrote {r.torch_snapshot} (open it at https://pytorch.org/memory_viz)",
                err=True,
                one_line=True,
            )
        return
    assert r.plot is not None
    from gpudiag.memory import log

    target = r.output or r.plot.with_suffix(".svg")
    series = log.read(r.plot)
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
    from gpudiag.memory.request import Request, prepare

    s = settings(ctx)
    r = request_of(Request, locals())
    if r.offline:
        _offline(s, r)
        return
    prepared = prepare(r)
    options = prepared.watch
    if options is None:
        memory_once.sample(s, r, prepared.gpus, CLOCK.wall)
        return
    from gpudiag.cli.memory_watch import SinkOptions, follow
    from gpudiag.memory.view import GROUPS
    from gpudiag.sources import open_source

    with open_source(s.replay, facts=GROUPS) as source:
        first, wanted, recording = memory_once.first_read(s, prepared.gpus, source)
        sinks = SinkOptions(json_lines=json_output, log=log, prometheus=prometheus, bind=bind)
        outcome = follow(
            source.read, first, wanted, s.replay is not None, options, make_console(s), sinks, CLOCK, recording
        )
    if outcome.message:
        echo(f"gpudiag: {outcome.message}", err=True, one_line=True)
    raise typer.Exit(int(outcome.code))
