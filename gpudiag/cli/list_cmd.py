"""`gpudiag list`: GPUs and their processes, as nvidia-smi users expect them."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated

import typer

from gpudiag.cli.common import exit_if_lost, handle_errors, make_console, settings
from gpudiag.errors import UsageError
from gpudiag.exitcodes import NVML_EXIT
from gpudiag.model import ALL_GROUPS, FactGroup, NvmlStatus, Reading
from gpudiag.probe.collect import collect
from gpudiag.selection import parse_ids, select_gpus
from gpudiag.serialize import to_data


@handle_errors
def list_command(
    ctx: typer.Context,
    json_output: Annotated[
        bool, typer.Option("--json", help="Machine-readable output (schema gpudiag.machine/1).")
    ] = False,
    ids: Annotated[
        str | None,
        typer.Option(
            "--id",
            "-i",
            help="Only these GPUs: NVML indices, UUIDs (or unique prefixes) or PCI bus ids, comma-separated.",
        ),
    ] = None,
    no_processes: Annotated[bool, typer.Option("--no-processes", help="Leave out the processes table.")] = False,
    query: Annotated[
        str | None,
        typer.Option(
            "--query", "--query-gpu", help="nvidia-smi-style CSV fields, e.g. name,memory.used,utilization.gpu."
        ),
    ] = None,
    output_format: Annotated[
        str | None, typer.Option("--format", help="With --query: csv[,noheader][,nounits].")
    ] = None,
) -> None:
    """Show the GPUs, their state and the processes on them (like nvidia-smi)."""
    s = settings(ctx)
    if output_format is not None and query is None:
        raise UsageError("--format goes with --query")
    if query is not None and json_output:
        raise UsageError("choose one of --json and --query")
    if ids is not None:
        parse_ids(ids)
    if query is not None:
        from gpudiag.render import csv_query

        names = csv_query.parse_query(query)
        fmt = csv_query.parse_format(output_format or "csv")

    # Read what this output shows: --json is a whole snapshot, --query its fields, the tables theirs.
    if json_output:
        wanted = ALL_GROUPS
    elif query is not None:
        wanted = csv_query.groups(names)
    else:
        from gpudiag.render.list_view import GROUPS

        wanted = GROUPS - {FactGroup.PROCESSES} if no_processes else GROUPS
    machine = collect(s.replay, facts=wanted)
    if machine.nvml.status is not NvmlStatus.OK:
        if json_output:
            typer.echo(json.dumps(to_data(machine), indent=2))
        raise typer.Exit(_fail_nvml(machine.nvml.detail, machine.nvml.status))
    gpus = select_gpus(machine.gpus, ids)
    if no_processes:
        gpus = tuple(replace(g, processes=Reading.of(())) if g.processes.ok else g for g in gpus)

    if json_output:
        typer.echo(json.dumps(to_data(replace(machine, gpus=gpus)), indent=2))
    elif query is not None:
        typer.echo(csv_query.render_csv(machine, gpus, names, fmt), nl=False)
    else:
        from gpudiag.render.list_view import render

        console = make_console(s)
        console.print(render(machine, gpus, console, show_processes=not no_processes))
    exit_if_lost(gpus)


def _fail_nvml(detail: str, status: NvmlStatus) -> int:
    typer.echo(f"gpudiag: {detail}", err=True)
    return int(NVML_EXIT[status])
