"""`gpudiag nvlink`: each GPU's NVLinks, as `nvidia-smi nvlink -s / -e / -gt` print them."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.cli.view_options import GpuIds


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
    from gpudiag.cli import smi_runs
    from gpudiag.cli.smi_requests import Nvlink

    smi_runs.nvlink(settings(ctx), request_of(Nvlink, locals()))
