"""`gpudiag pmon`: each process's share of each GPU every interval, as `nvidia-smi pmon` prints it."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.cli.view_options import AppendTo, GpuIds, LineFormat, LineStamp, SampleCount


@handle_errors
def command(
    ctx: typer.Context,
    ids: GpuIds = None,
    select: Annotated[
        str,
        typer.Option(
            "--select", "-s", help="Metric groups, as nvidia-smi pmon's letters: u utilization, m memory used."
        ),
    ] = "u",
    count: SampleCount = None,
    delay: Annotated[float, typer.Option("--delay", "-d", help="Seconds between samples (at most 10).")] = 1.0,
    options: LineStamp = "",
    output_format: LineFormat = None,
    filename: AppendTo = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="JSON Lines, one document per sample (schema gpudiag.pmon/1).")
    ] = False,
) -> None:
    """Process monitor: each process's SM, memory, encoder and decoder share of its GPU, one line per
    process per interval (like nvidia-smi pmon). On a replay: the example's recorded series."""
    from gpudiag.cli import monitor_runs
    from gpudiag.cli.smi_requests import Pmon

    monitor_runs.pmon(settings(ctx), request_of(Pmon, locals()))
