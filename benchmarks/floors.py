"""The least a command built on gpudiag's libraries can cost: a reference for bench_startup.py.

Not gpudiag code: each mode does what the matching gpudiag command cannot avoid with typer,
rich and msgspec kept, on made-up data, so the gap between the two is what gpudiag adds.

- ``json``: import typer, rich, pynvml, psutil and msgspec (the model's Structs); build a
  Typer app with gpudiag's global options and one command with ``list``'s ten options; parse
  ``--replay NAME list --json``; encode a small document. The floor of ``list --json``.
- ``table``: ``json`` plus ``rich.console`` and ``rich.table``, then print an 8-row, 13-column
  rich table shaped like ``list``'s GPU table, at 160 columns. The floor of ``list``.
- ``checklist``: ``table``, but a 118-row checklist (status, id, target, a finding that may
  wrap) and an 8-row versions table, as ``check`` prints for the 8-GPU example. Its floor.

Usage: python benchmarks/floors.py json|table|checklist
"""

import sys
from typing import Annotated

import msgspec
import psutil  # noqa: F401  (part of the floor: gpudiag imports it)
import pynvml  # noqa: F401
import rich  # noqa: F401
import typer

MODE = sys.argv[1] if len(sys.argv) > 1 else "json"
COLUMNS = [
    "GPU",
    "Name",
    "Bus-Id",
    "Persist",
    "Fan",
    "Temp",
    "Perf",
    "Pwr:Usage/Cap",
    "Memory-Usage",
    "GPU-Util",
    "Compute-M.",
    "MIG-M.",
    "ECC",
]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def root(
    replay: Annotated[str | None, typer.Option("--replay", help="snapshot")] = None,
    color: Annotated[str, typer.Option("--color", help="colour")] = "auto",
    debug: Annotated[bool, typer.Option("--debug", help="tracebacks")] = False,
    version: Annotated[bool, typer.Option("--version", help="version")] = False,
) -> None:
    pass


@app.command("list")
def list_command(
    json_output: Annotated[bool, typer.Option("--json", help="JSON")] = False,
    ids: Annotated[str | None, typer.Option("--id", "-i", help="GPUs")] = None,
    no_processes: Annotated[bool, typer.Option("--no-processes", help="no processes")] = False,
    details: Annotated[bool, typer.Option("--details", "-q", help="details")] = False,
    query: Annotated[str | None, typer.Option("--query", help="fields")] = None,
    query_apps: Annotated[str | None, typer.Option("--query-apps", help="fields")] = None,
    output_format: Annotated[str | None, typer.Option("--format", help="format")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="watch")] = False,
    interval: Annotated[float, typer.Option("--interval", help="seconds")] = 1.0,
    count: Annotated[int | None, typer.Option("--count", help="refreshes")] = None,
) -> None:
    if MODE == "json":
        doc = {"schema": "floor/1", "gpus": [{"index": i, "name": "GPU", "memory": {"used": i}} for i in range(8)]}
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode())
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    if MODE == "checklist":
        checks = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
        for column in ("status", "id", "target"):
            checks.add_column(column, no_wrap=True)
        checks.add_column("finding", ratio=1)
        for i in range(118):
            checks.add_row("PASS", f"health.check_{i % 20}", f"GPU {i % 8}", f"finding number {i} of the checklist")
        versions = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        versions.add_column("Versions", no_wrap=True)
        versions.add_column("")
        for i in range(8):
            versions.add_row(f"component {i}", f"{i}.{i}.{i}")
        console.print(checks)
        console.print(versions)
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in COLUMNS:
        table.add_column(name, no_wrap=True, overflow="ellipsis")
    for i in range(8):
        table.add_row(str(i), "NVIDIA H100 80GB HBM3", f"00000000:{i:02X}:00.0", "On", "N/A", "31C", "P0",
                      "70W / 700W", "0MiB / 81559MiB", "0%", "Default", "Disabled", "0")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    app(["--replay", "h100x8-healthy", "list", "--json"], prog_name="floor")
