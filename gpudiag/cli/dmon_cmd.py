"""`gpudiag dmon`: device figures every interval, as `nvidia-smi dmon` prints them."""

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
            "--select",
            "-s",
            help="Metric groups, as nvidia-smi dmon's letters: p power/temperature, u utilization, c clocks, "
            "v power/thermal violations, m memory (FB, BAR1, protected), e ECC errors and PCIe replays, "
            "t PCIe throughput.",
        ),
    ] = "puc",
    count: SampleCount = None,
    delay: Annotated[float, typer.Option("--delay", "-d", help="Seconds between samples.")] = 1.0,
    options: LineStamp = "",
    output_format: LineFormat = None,
    filename: AppendTo = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="JSON Lines, one document per sample (schema gpudiag.dmon/1).")
    ] = False,
) -> None:
    """Device monitor: power, temperatures, utilization, clocks, ... one line per GPU per interval (like
    nvidia-smi dmon). On a replay: the example's recorded series."""
    from gpudiag.cli import monitor_runs
    from gpudiag.cli.smi_requests import Dmon

    monitor_runs.dmon(settings(ctx), request_of(Dmon, locals()))
