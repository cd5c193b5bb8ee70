"""`gpudiag visible`: which physical GPUs a CUDA program will see, as which cuda:N.

The options become a gpudiag.visibility.request.Request here; cli.visible_run does the rest (the
plain front runs `--json` through it without typer or rich).
"""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR


@handle_errors
def command(
    ctx: typer.Context,
    value: Annotated[
        str | None,
        typer.Option("--value", help=f"Evaluate this {VISIBLE_VAR} instead of the current one (e.g. 2,3)."),
    ] = None,
    unset: Annotated[bool, typer.Option("--unset", help=f"Evaluate with {VISIBLE_VAR} unset.")] = False,
    order: Annotated[
        str | None, typer.Option("--order", help=f"Evaluate this {ORDER_VAR}: FASTEST_FIRST or PCI_BUS_ID.")
    ] = None,
    select: Annotated[
        str | None,
        typer.Option(
            "--select", help="Print the export line that selects these GPUs (NVML indices, UUIDs or bus ids)."
        ),
    ] = None,
    probe: Annotated[
        bool, typer.Option("--probe", help="Also ask the real CUDA runtime (through torch, in a child process).")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable output (gpudiag.visible/1).")] = False,
) -> None:
    """Show which GPUs CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER make visible, as which cuda:N."""
    from gpudiag.cli import visible_run
    from gpudiag.visibility.request import Request

    visible_run.run(settings(ctx), request_of(Request, locals()))
