"""`gpudiag nvlink`: each GPU's NVLinks, as `nvidia-smi nvlink -s / -e / -gt` print them."""

import json
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, settings
from gpudiag.cli.view_options import GpuIds
from gpudiag.errors import UsageError


@handle_errors
def command(
    ctx: typer.Context,
    ids: GpuIds = None,
    status: Annotated[
        bool, typer.Option("--status", "-s", help="Each link's speed, or <inactive> (the default).")
    ] = False,
    errorcounters: Annotated[
        bool, typer.Option("--errorcounters", "-e", help="Each link's replay, recovery and CRC error counters.")
    ] = False,
    getthroughput: Annotated[
        str | None,
        typer.Option(
            "--getthroughput",
            "-gt",
            help="Each link's throughput counters since the driver loaded: d data (payload), r raw (all traffic).",
            metavar="d|r",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Every link's state, speed and counters (schema gpudiag.nvlink/1).")
    ] = False,
) -> None:
    """NVLink status, error counters and throughput per link (like nvidia-smi nvlink -s, -e, -gt)."""
    from gpudiag.cli import smi_views
    from gpudiag.probe.topology import nvlinks
    from gpudiag.render import nvlink_view

    s = settings(ctx)
    chosen = [
        name
        for name, on in (
            ("--status", status),
            ("--errorcounters", errorcounters),
            ("--getthroughput", getthroughput is not None),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    if getthroughput is not None and getthroughput not in nvlink_view.THROUGHPUT:
        raise UsageError(f"--getthroughput {getthroughput!r}: use d (data) or r (raw)")
    opened = smi_views.open_views(s, ids)
    try:
        found = nvlinks(opened.source, [opened.position(g) for g in opened.gpus])
    finally:
        opened.close()
    entries = [(gpu, found[opened.position(gpu)]) for gpu in opened.gpus]
    if json_output:
        typer.echo(json.dumps(nvlink_view.to_json(entries), indent=2))
    else:
        lines: list[str] = []
        for gpu, links in entries:
            if errorcounters:
                lines += nvlink_view.errors(gpu, links)
            elif getthroughput is not None:
                lines += nvlink_view.throughput(gpu, links, getthroughput)
            else:
                lines += nvlink_view.status(gpu, links)
        # The tabs are nvidia-smi's layout; names and reasons are escaped in the view (render.printable).
        typer.echo("".join(line + "\n" for line in lines), nl=False)
    smi_views.finish(opened)
