"""`gpudiag list`: GPUs and their processes, as nvidia-smi users expect them."""

from typing import Annotated, Any

import typer
from msgspec.structs import replace

from gpudiag.cli.common import echo, exit_if_lost, handle_errors, make_console, require_nvml, settings
from gpudiag.errors import UsageError
from gpudiag.model import ALL_GROUPS, FactGroup, Gpu, Machine, NvmlStatus, Reading
from gpudiag.probe.collect import collect
from gpudiag.selection import parse_ids, select_gpus
from gpudiag.serialize import to_data
from gpudiag.units import seconds


@handle_errors
def list_command(
    ctx: typer.Context,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Machine-readable output (schema gpudiag.machine/1); JSON Lines with --watch."),
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
    details: Annotated[
        bool,
        typer.Option(
            "--details",
            "-q",
            help="Everything about each GPU, grouped like `nvidia-smi -q`: clocks, power, ECC by location, "
            "NVLink, topology, per-process load. With --json: in the document.",
        ),
    ] = False,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            "--query-gpu",
            help="nvidia-smi --query-gpu fields as CSV, e.g. name,memory.used,clocks.sm (all 214 names of driver 580).",
        ),
    ] = None,
    query_apps: Annotated[
        str | None,
        typer.Option(
            "--query-compute-apps",
            help="nvidia-smi --query-compute-apps fields as CSV, e.g. pid,process_name,used_memory.",
        ),
    ] = None,
    output_format: Annotated[
        str | None, typer.Option("--format", help="With --query / --query-compute-apps: csv[,noheader][,nounits].")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C (like nvidia-smi -l, gpustat --watch).")
    ] = False,
    interval: Annotated[float, typer.Option("--interval", help="With --watch: seconds between samples.")] = 2.0,
    count: Annotated[
        int | None, typer.Option("--count", help="With --watch: take this many samples, then exit.")
    ] = None,
) -> None:
    """Show the GPUs, their state and the processes on them (like nvidia-smi)."""
    s = settings(ctx)
    # --details adds to --json (the details in the document); the other outputs exclude each other.
    modes = (
        ("--json", json_output),
        ("--query", query),
        ("--query-compute-apps", query_apps),
        ("--details", details and not json_output),
    )
    chosen = [name for name, on in modes if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    if output_format is not None and query is None and query_apps is None:
        raise UsageError("--format goes with --query or --query-compute-apps")
    if (interval != 2.0 or count is not None) and not watch:
        raise UsageError("--interval and --count go with --watch")
    seconds(interval, "--interval")
    if count is not None and count < 1:
        raise UsageError("--count must be at least 1")
    if ids is not None:
        parse_ids(ids)  # a bad --id is a usage error before anything is read
    view = _view(query, query_apps, output_format, details, json_output, no_processes)

    if not watch:
        machine = collect(s.replay, facts=view.facts)
        _check_nvml(machine, json_output)
        gpus = _selected(machine, ids, no_processes)
        if view.plain:
            view.echo(view.text(machine, gpus, first=True))
        else:
            view.show(machine, gpus, s)
        exit_if_lost(gpus)
        return
    from gpudiag.cli.list_watch import watch_list

    watch_list(s, view, ids, no_processes, interval, count)


class View:
    """What one sample prints (plain text: CSV, JSON, details; or rich tables) and the facts it reads."""

    def __init__(
        self,
        kind: str,
        facts: frozenset[FactGroup],
        columns: Any = None,
        fmt: Any = None,
        show_processes: bool = True,
    ) -> None:
        self.kind = kind  # "table" | "json" | "csv" | "apps" | "details"
        self.facts = facts
        self.columns = columns
        self.fmt = fmt
        self.show_processes = show_processes

    @property
    def plain(self) -> bool:
        return self.kind != "table"

    def text(self, machine: Machine, gpus: tuple[Gpu, ...], first: bool, lines: bool = False) -> str:
        from gpudiag.render import csv_query

        if self.kind == "json":
            import json  # only with --json: ~1.5 ms of start-up otherwise

            data = to_data(replace(machine, gpus=gpus))
            return json.dumps(data, separators=(",", ":")) + "\n" if lines else json.dumps(data, indent=2) + "\n"
        if self.kind == "csv":
            fmt = self.fmt if first else replace(self.fmt, header=False)
            return csv_query.render_csv(machine, gpus, self.columns, fmt)
        if self.kind == "apps":
            fmt = self.fmt if first else replace(self.fmt, header=False)
            return csv_query.render_apps_csv(machine, gpus, self.columns, fmt)
        from gpudiag.render.details_view import render

        return render(machine, gpus)

    def echo(self, text: str) -> None:
        """CSV and details carry outside text: through the guard; JSON is ASCII by construction."""
        if self.kind == "json":
            typer.echo(text, nl=False)
        else:
            echo(text, nl=False)

    def renderable(self, machine: Machine, gpus: tuple[Gpu, ...], console: Any) -> Any:
        from gpudiag.render.list_view import render

        return render(machine, gpus, console, show_processes=self.show_processes)

    def show(self, machine: Machine, gpus: tuple[Gpu, ...], s: Any) -> None:
        console = make_console(s)
        console.print(self.renderable(machine, gpus, console))


def _view(
    query: str | None,
    query_apps: str | None,
    output_format: str | None,
    details: bool,
    json_output: bool,
    no_processes: bool,
) -> View:
    if query is not None or query_apps is not None:
        from gpudiag.render import csv_query

        fmt = csv_query.parse_format(output_format or "csv")
        if query is not None:
            columns = csv_query.parse_query(query)
            return View("csv", csv_query.groups(columns), columns, fmt)
        apps = csv_query.parse_apps_query(query_apps or "")
        wanted = frozenset({FactGroup.PROCESSES, *(f.group for _, f in apps if f.group is not None)})
        return View("apps", wanted, apps, fmt)
    if (
        json_output
    ):  # every fact; the details (~130 NVML calls per GPU, more with NVLink) and GPM's window with --details
        return View(
            "json", ALL_GROUPS if details else ALL_GROUPS - {FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PROFILING}
        )
    if details:  # -q: not GPM, which it does not show and whose one-shot read waits 0.1 s
        return View("details", ALL_GROUPS - {FactGroup.PROFILING})
    from gpudiag.render.list_view import GROUPS

    return View("table", GROUPS - {FactGroup.PROCESSES} if no_processes else GROUPS, show_processes=not no_processes)


def _check_nvml(machine: Machine, json_output: bool) -> None:
    if machine.nvml.status is not NvmlStatus.OK and json_output:  # the document says why, too
        import json  # only with --json: ~1.5 ms of start-up otherwise

        typer.echo(json.dumps(to_data(machine), indent=2))
    require_nvml(machine.nvml)


def _selected(machine: Machine, ids: str | None, no_processes: bool) -> tuple[Gpu, ...]:
    gpus = select_gpus(machine.gpus, ids)
    if no_processes:
        gpus = tuple(replace(g, processes=Reading.of(())) if g.processes.ok else g for g in gpus)
    return gpus
