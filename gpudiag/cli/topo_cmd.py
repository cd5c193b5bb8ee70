"""`gpudiag topo`: how the GPUs reach each other and the CPUs, as `nvidia-smi topo -m` / `-p2p` print it."""

from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, settings


@handle_errors
def command(
    ctx: typer.Context,
    matrix: Annotated[
        bool,
        typer.Option("--matrix", "-m", help="The GPU-to-GPU link matrix with CPU and NUMA affinity (the default)."),
    ] = False,
    p2p: Annotated[
        str | None,
        typer.Option(
            "--p2pstatus",
            "-p2p",
            help="The P2P status matrix of one capability: r read, w write, n NVLink, a atomics, p PCIe (prop).",
            metavar="r|w|n|a|p",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Every GPU's affinity, links and P2P statuses (schema gpudiag.topo/1).")
    ] = False,
) -> None:
    """GPU topology: NVLink / PCIe path between each pair of GPUs, CPU and NUMA affinity, P2P support
    (like nvidia-smi topo -m, topo -p2p)."""
    from gpudiag.cli import smi_runs
    from gpudiag.cli.smi_requests import Topo

    smi_runs.topo(settings(ctx), request_of(Topo, locals()))
