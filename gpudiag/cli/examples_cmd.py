"""`gpudiag examples`: the example machines shipped for --replay."""

import typer

from gpudiag.cli.common import handle_errors, make_console, settings


@handle_errors
def examples_command(ctx: typer.Context) -> None:
    """List the example machines that `--replay NAME` can read (try any command without a GPU)."""
    from rich.table import Table

    from gpudiag.replay.fixtures import example_names, load

    table = Table(show_edge=False, box=None, pad_edge=False)
    table.add_column("NAME", style="bold", no_wrap=True)
    table.add_column("GPUS", justify="right")
    table.add_column("DESCRIPTION")
    for name in example_names():
        machine, description = load(name)
        table.add_row(name, str(len(machine.gpus)), description)
    make_console(settings(ctx)).print(table)
    typer.echo("\nTry: gpudiag --replay h100x8-healthy list", err=True)
