"""`gpudiag mig`: MIG's GPU instance profiles, GPU instances and compute instances, as `nvidia-smi mig
-lgip / -lgi / -lci` list them."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings
from gpudiag.cli.view_options import GpuIds


@handle_errors
def command(
    ctx: typer.Context,
    ids: GpuIds = None,
    lgip: Annotated[
        bool,
        typer.Option(
            "--list-gpu-instance-profiles",
            "-lgip",
            help="The GPU instance profiles, how many of each fit and how many more can be made (the default).",
        ),
    ] = False,
    lgi: Annotated[bool, typer.Option("--list-gpu-instances", "-lgi", help="The GPU instances.")] = False,
    lci: Annotated[bool, typer.Option("--list-compute-instances", "-lci", help="The compute instances.")] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Each GPU's profiles and instances (schema gpudiag.mig/1).")
    ] = False,
) -> None:
    """MIG profiles and instances (like nvidia-smi mig -lgip, -lgi, -lci)."""
    from gpudiag.cli import smi_runs
    from gpudiag.cli.smi_requests import Mig

    smi_runs.mig(settings(ctx), request_of(Mig, locals()))
