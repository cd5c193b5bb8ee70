"""`gpudiag stat`: one line per GPU, as gpustat prints it, once or refreshed (`--watch`)."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.cli.view_options import GpuIds


@handle_errors
def command(
    ctx: typer.Context,
    ids: GpuIds = None,
    show_cmd: Annotated[bool, typer.Option("--show-cmd", "-c", help="Each process's command name.")] = False,
    show_pid: Annotated[bool, typer.Option("--show-pid", "-p", help="Each process's PID.")] = False,
    show_power: Annotated[bool, typer.Option("--show-power", "-P", help="Power draw and limit.")] = False,
    no_processes: Annotated[bool, typer.Option("--no-processes", help="Leave the processes out.")] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C (like gpustat --watch).")] = False,
    interval: Annotated[float, typer.Option("--interval", help="With --watch: seconds between samples.")] = 1.0,
    count: Annotated[
        int | None, typer.Option("--count", help="With --watch: take this many samples, then exit.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Machine-readable (schema gpudiag.stat/1); JSON Lines with --watch.")
    ] = False,
) -> None:
    """One line per GPU: temperature, utilization, memory and who uses it (like gpustat). On a replay,
    --watch plays the example's recorded series."""
    from gpudiag.cli import stat_watch
    from gpudiag.cli.smi_requests import Stat

    stat_watch.command(settings(ctx), request_of(Stat, locals()))
