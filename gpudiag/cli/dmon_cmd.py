"""`gpudiag dmon`: device figures every interval, as `nvidia-smi dmon` prints them."""

from typing import Annotated, Any

import typer

from gpudiag.cli.common import handle_errors, settings
from gpudiag.cli.view_options import AppendTo, GpuIds, LineFormat, LineStamp, SampleCount
from gpudiag.model import Gpu, Reading


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
    from gpudiag import monitor
    from gpudiag.cli import monitor_loop
    from gpudiag.cli.smi_views import open_views
    from gpudiag.probe.monitor import RowReader
    from gpudiag.render import dmon_view

    s = settings(ctx)
    columns = monitor.select(select)
    monitor_loop.check_options(count, delay)
    layout = monitor_loop.line_layout(options, output_format, json_output)

    opened = open_views(s, ids)
    out = monitor_loop.Output(filename)
    gone: list[Gpu] = []
    said: set[int] = set()
    try:
        reader = RowReader(opened.source, monitor.row_keys(columns))
        before: dict[int, tuple[Any, float]] = {}

        def step(n: int, at: float, clock: float) -> None:
            lines = [] if json_output or n else dmon_view.header_lines(columns, layout)
            found: list[tuple[int, str, tuple[Reading[Any], ...]]] = []
            for gpu in opened.gpus:
                if gpu.index in said:
                    continue
                position = opened.position(gpu)
                now = reader.read(position)
                if now is None:
                    gone.append(monitor_loop.lost(gpu, said))
                    continue
                last = before.get(position)
                values = monitor.values(columns, now, last[0] if last else None, clock - last[1] if last else 0.0)
                before[position] = (now, clock)
                found.append((gpu.index, gpu.state.value, values))
                if not json_output:
                    lines.append(dmon_view.line(gpu.index, values, at, layout))
            if json_output:
                lines.append(dmon_view.json_line(n, at, columns, found))
            out.write(lines)

        monitor_loop.run(opened, step, delay, count)
    finally:
        out.close()
        opened.close()
    monitor_loop.exit_code(opened, gone)
