"""`gpudiag topo`: how the GPUs reach each other and the CPUs, as `nvidia-smi topo -m` / `-p2p` print it."""

import json
import os
import sys
from typing import Annotated

import typer

from gpudiag.cli.common import Settings, handle_errors, settings
from gpudiag.errors import UsageError


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
    from gpudiag.cli import smi_views
    from gpudiag.model import FactGroup
    from gpudiag.probe.topology import affinities
    from gpudiag.render import topo_view

    s = settings(ctx)
    if matrix and p2p is not None:
        raise UsageError("choose one of --matrix and --p2pstatus")
    if p2p is not None and p2p not in topo_view.P2P_CAPABILITIES:
        raise UsageError(f"--p2pstatus {p2p!r}: use r (read), w (write), n (NVLink), a (atomics) or p (PCIe)")
    opened = smi_views.open_views(s, None, frozenset({FactGroup.NUMA}))
    try:
        found = affinities(opened.source, opened.machine.gpus)
    finally:
        opened.close()
    nodes = [
        topo_view.Node(gpu.index, found[opened.position(gpu)], gpu.numa_node)
        for gpu in opened.gpus
        if opened.position(gpu) in found
    ]
    if json_output:
        typer.echo(json.dumps(topo_view.to_json(nodes), indent=2))
    else:
        underline = _underlined(s)
        text = topo_view.p2p_matrix(nodes, p2p, underline) if p2p else topo_view.matrix(nodes, underline)
        # Tab-separated as nvidia-smi's: each cell is gpudiag's own word or escaped where it is not
        # (render.printable); the underline is nvidia-smi's escape, written only where colour is on.
        typer.echo(text, nl=False, color=underline)  # click strips escapes from a pipe unless told
    smi_views.finish(opened)


def _underlined(s: Settings) -> bool:
    """nvidia-smi underlines the header row: here where colour is on (--color always; with auto, a
    terminal and no NO_COLOR), as every gpudiag colour is."""
    if s.color != "auto":
        return s.color == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
