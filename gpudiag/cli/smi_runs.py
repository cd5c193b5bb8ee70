"""What `gpudiag topo`, `nvlink` and `mig` do once their options are a Request (cli.smi_requests):
their Typer commands and the plain front (cli.plain_front) both run these, so `--json` prints the
same bytes either way. No typer or rich here: the text outputs import click's echo when they print."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from gpudiag.cli import plain, smi_views
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.cli.plain import Settings
    from gpudiag.cli.smi_requests import Mig, Nvlink, Topo


def _json(data: object) -> None:
    plain.write(json.dumps(data, indent=2) + "\n")


def topo(s: Settings, r: Topo) -> None:
    """GPU topology: the link matrix with CPU and NUMA affinity, a P2P status matrix, or their JSON."""
    from gpudiag.cli.smi_requests import topo_capability
    from gpudiag.model import FactGroup
    from gpudiag.probe.topology import affinities
    from gpudiag.render import topo_view

    p2p = topo_capability(r)
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
    if r.json_output:
        _json(topo_view.to_json(nodes))
    else:
        import typer

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


def nvlink(s: Settings, r: Nvlink) -> None:
    """NVLink status, error counters or throughput per link, or their JSON."""
    from gpudiag.cli.smi_requests import nvlink_listing, selection
    from gpudiag.probe.topology import nvlinks
    from gpudiag.render import nvlink_view

    listing = nvlink_listing(r)
    opened = smi_views.open_views(s, selection(r))
    try:
        found = nvlinks(opened.source, [opened.position(g) for g in opened.gpus])
    finally:
        opened.close()
    entries = [(gpu, found[opened.position(gpu)]) for gpu in opened.gpus]
    if r.json_output:
        _json(nvlink_view.to_json(entries))
    else:
        lines: list[str] = []
        for gpu, links in entries:
            if listing.kind is not None:
                lines += nvlink_view.throughput(gpu, links, listing.kind)
            elif listing.what == "errors":
                lines += nvlink_view.errors(gpu, links)
            else:
                lines += nvlink_view.status(gpu, links)
        # The tabs are nvidia-smi's layout; names and reasons are escaped in the view (render.printable).
        plain.write("".join(line + "\n" for line in lines))
    smi_views.finish(opened)


def mig(s: Settings, r: Mig) -> None:
    """MIG's profiles, GPU instances or compute instances, or their JSON."""
    from gpudiag.cli.smi_requests import mig_listing, selection
    from gpudiag.model import FactGroup
    from gpudiag.render import mig_view, smi_errors

    listing = mig_listing(r)
    opened = smi_views.open_views(s, selection(r), frozenset({FactGroup.MIG, FactGroup.MIG_LAYOUT}))
    opened.close()
    machine = opened.machine
    gpus = tuple(g for g in machine.gpus if g.index in {c.index for c in opened.gpus})
    if r.json_output:
        _json(mig_view.to_json(list(gpus)))
        smi_views.finish(opened)
        return
    enabled = [g for g in gpus if g.mig_mode_current.value is True]
    if not enabled:
        smi_views.fail(smi_errors.NO_MIG, ExitCode.NOT_FOUND)
    of_instances = listing != "-lgip"
    what = "GPU instances" if of_instances else "GPU instance profiles"
    for gpu in enabled:
        layout = gpu.mig_instances if of_instances else gpu.mig_profiles
        if layout.value is None:
            why = layout.detail or (layout.reason.label if layout.reason else "")
            smi_views.fail(f"Failed to display {what} of GPU {gpu.index}: {why}", ExitCode.NVML_ERROR)
    if listing == "-lci":
        found = [(g, g.mig_instances.get(())) for g in enabled]
        if not any(gi.compute_instances for _, instances in found for gi in instances):
            smi_views.fail("No compute instances found: Not Found", ExitCode.NOT_FOUND)
        text = mig_view.compute_instances(found)
    elif listing == "-lgi":
        listed = [(g, g.mig_instances.get(()), g.mig_profiles.get(())) for g in enabled]
        if not any(instances for _, instances, _ in listed):
            smi_views.fail("No GPU instances found: Not Found", ExitCode.NOT_FOUND)
        text = mig_view.gpu_instances(listed)
    else:
        text = mig_view.profiles([(g, g.mig_profiles.get(())) for g in enabled])
    plain.write(text)  # every cell is NVML's number or name, escaped (render.printable)
    smi_views.finish(opened)
