"""`gpudiag list`: GPUs and their processes, as nvidia-smi users expect them."""

from typing import Annotated

import typer

from gpudiag.api import read_machine
from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.cli.list_modes import Request, once, prepare

_LISTS = "csv[,noheader][,nounits]"
Json = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Machine-readable output: the machine (schema gpudiag.machine/1), or with --query*, -L: their rows "
        "(gpudiag.query/1, gpudiag.gpus/1); JSON Lines with --watch.",
    ),
]
Ids = Annotated[
    str | None,
    typer.Option(
        "--id", "-i", help="Only these GPUs: NVML indices, UUIDs (or unique prefixes) or PCI bus ids, comma-separated."
    ),
]
NoProcesses = Annotated[bool, typer.Option("--no-processes", help="Leave out the processes table.")]
Details = Annotated[
    bool,
    typer.Option(
        "--details",
        "-q",
        help="Everything about each GPU, in nvidia-smi -q's sections, labels and order; with --json: in the document.",
    ),
]
Display = Annotated[
    str | None,
    typer.Option(
        "--display",
        "-d",
        help="With -q: only these sections, comma-separated (MEMORY, UTILIZATION, ECC, TEMPERATURE, POWER, CLOCK, "
        "COMPUTE, PIDS, PERFORMANCE, SUPPORTED_CLOCKS, PAGE_RETIREMENT, ROW_REMAPPER, ... as nvidia-smi -d).",
    ),
]
Xml = Annotated[bool, typer.Option("--xml-format", "-x", help="With -q: XML in nvidia-smi -q -x's schema.")]
ListGpus = Annotated[bool, typer.Option("--list-gpus", "-L", help="One line per GPU and MIG device (nvidia-smi -L).")]
Query = Annotated[
    str | None,
    typer.Option(
        "--query",
        "--query-gpu",
        help="nvidia-smi --query-gpu fields as CSV, e.g. name,memory.used,clocks.sm (all 214 names of driver 580).",
    ),
]
Apps = Annotated[
    str | None,
    typer.Option("--query-compute-apps", help="A row per compute process, e.g. pid,process_name,used_memory."),
]
Retired = Annotated[
    str | None,
    typer.Option(
        "--query-retired-pages", help="A row per retired page, e.g. gpu_uuid,retired_pages.address,retired_pages.cause."
    ),
]
Remapped = Annotated[
    str | None,
    typer.Option(
        "--query-remapped-rows", help="A row per GPU, e.g. gpu_bus_id,remapped_rows.pending,remapped_rows.failure."
    ),
]
Clocks = Annotated[
    str | None, typer.Option("--query-supported-clocks", help="A row per supported clock pair, e.g. memory,graphics.")
]
Format = Annotated[str | None, typer.Option("--format", help=f"With --query*: {_LISTS}.")]
Filename = Annotated[
    str | None,
    typer.Option("--filename", "-f", help="Write the output to this file (whole or not at all), not stdout."),
]
Watch = Annotated[
    bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C (like nvidia-smi -l, gpustat --watch).")
]
Interval = Annotated[float, typer.Option("--interval", help="With --watch: seconds between samples.")]
Count = Annotated[int | None, typer.Option("--count", help="With --watch: take this many samples, then exit.")]


@handle_errors
def list_command(
    ctx: typer.Context,
    json_output: Json = False,
    ids: Ids = None,
    no_processes: NoProcesses = False,
    details: Details = False,
    display: Display = None,
    xml: Xml = False,
    list_gpus: ListGpus = False,
    query: Query = None,
    query_apps: Apps = None,
    query_retired: Retired = None,
    query_remapped: Remapped = None,
    query_clocks: Clocks = None,
    output_format: Format = None,
    filename: Filename = None,
    watch: Watch = False,
    interval: Interval = 2.0,
    count: Count = None,
) -> None:
    """Show the GPUs, their state and the processes on them (like nvidia-smi)."""
    s = settings(ctx)
    request = request_of(Request, locals())
    if not watch:
        once(s, request, read_machine)  # the public API's read: one path, the plain front's too
        return
    view = prepare(request)
    from gpudiag.cli.list_watch import watch_list

    watch_list(s, view, request)
