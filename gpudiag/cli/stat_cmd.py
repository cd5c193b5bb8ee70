"""`gpudiag stat`: one line per GPU, as gpustat prints it, once or refreshed (`--watch`)."""

import json
import time
from typing import Annotated, Any

import typer
from msgspec.structs import replace

from gpudiag.cli.common import echo, handle_errors, make_console, settings
from gpudiag.errors import UsageError
from gpudiag.model import FactGroup
from gpudiag.units import seconds

# What a line shows: temperature, utilization, power, memory, the processes and their owners.
GROUPS = frozenset({FactGroup.MEMORY, FactGroup.UTILIZATION, FactGroup.THERMAL, FactGroup.POWER, FactGroup.PROCESSES})


@handle_errors
def command(
    ctx: typer.Context,
    ids: Annotated[
        str | None,
        typer.Option("--id", "-i", help="Only these GPUs: NVML indices, UUIDs (or unique prefixes) or PCI bus ids."),
    ] = None,
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
    from gpudiag.cli import smi_views
    from gpudiag.render import stat_view

    s = settings(ctx)
    if (interval != 1.0 or count is not None) and not watch:
        raise UsageError("--interval and --count go with --watch")
    seconds(interval, "--interval")
    if count is not None and count < 1:
        raise UsageError("--count must be at least 1")
    options = {"show_cmd": show_cmd, "show_pid": show_pid, "show_power": show_power, "processes": not no_processes}
    opened = smi_views.open_views(s, ids, GROUPS)
    chosen = {g.index for g in (*opened.gpus, *opened.unusable)}
    console = make_console(s)
    live: Any = None

    def show(machine: Any, n: int) -> None:
        nonlocal live
        gpus = tuple(g for g in machine.gpus if g.index in chosen)
        if json_output:
            document = stat_view.to_json(machine, gpus)
            typer.echo(json.dumps(document, separators=(",", ":")) if watch else json.dumps(document, indent=2))
            return
        text = stat_view.block(machine, gpus, **options)
        if watch and console.is_terminal:
            from rich.live import Live
            from rich.text import Text

            from gpudiag import edge

            if live is None:
                live = Live(console=console, auto_refresh=False, transient=False, redirect_stderr=False)
                live.start()
                edge.cursor_hidden(True)
            live.update(Text(text.rstrip("\n")), refresh=True)
            return
        echo(("\n" if n else "") + text, nl=False)

    source = opened.source
    try:
        if not watch:
            show(replace(opened.machine, collected_at=source.sample_time()), 0)
        else:
            from gpudiag.pacing import repeat

            recorded = source.play()
            total = count if not recorded else min(count or recorded, recorded)

            def step(n: int) -> None:
                if recorded and n:
                    source.seek(n)
                show(replace(source.read(GROUPS), collected_at=source.sample_time()), n)

            repeat(step, interval, total, time.monotonic, time.sleep)
    finally:
        if live is not None:
            from gpudiag import edge

            live.stop()
            edge.cursor_hidden(False)
        opened.close()
    smi_views.finish(opened)
