"""`gpudiag pmon`: each process's share of each GPU every interval, as `nvidia-smi pmon` prints it."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, settings
from gpudiag.cli.view_options import AppendTo, GpuIds, LineFormat, LineStamp, SampleCount
from gpudiag.errors import UsageError
from gpudiag.model import Gpu

MAX_DELAY = 10.0  # nvidia-smi pmon's: NVML keeps a process's samples for a few seconds only


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
    from gpudiag import monitor
    from gpudiag.cli import monitor_loop
    from gpudiag.cli.smi_views import open_views
    from gpudiag.probe.monitor import PROCESS_LOAD, RowReader
    from gpudiag.render import pmon_view

    s = settings(ctx)
    columns = monitor.select_pmon(select)
    monitor_loop.check_options(count, delay)
    if delay > MAX_DELAY:
        raise UsageError(f"--delay {delay:g}: at most {MAX_DELAY:g} seconds (NVML keeps a process's samples briefly)")
    layout = monitor_loop.line_layout(options, output_format, json_output)

    opened = open_views(s, ids)
    out = monitor_loop.Output(filename)
    gone: list[Gpu] = []
    said: set[int] = set()
    try:
        reader = RowReader(opened.source, ("processes", PROCESS_LOAD))

        def step(n: int, at: float, clock: float) -> None:
            lines = [] if json_output or n else pmon_view.header_lines(columns, layout)
            rows: list[monitor.ProcessRow] = []
            sampled: list[int] = []
            for gpu in opened.gpus:
                if gpu.index in said:
                    continue
                now = reader.read(opened.position(gpu))
                if now is None:
                    gone.append(monitor_loop.lost(gpu, said))
                    continue
                sampled.append(gpu.index)
                rows += monitor.process_rows(gpu.index, columns, now["processes"], now[PROCESS_LOAD])
            if json_output:
                lines.append(pmon_view.json_line(n, at, columns, sampled, rows))
            else:
                lines += [pmon_view.line(row, at, layout) for row in rows]
            out.write(lines)

        monitor_loop.run(opened, step, delay, count)
    finally:
        out.close()
        opened.close()
    monitor_loop.exit_code(opened, gone)
