"""`gpudiag mig`: MIG's GPU instance profiles, GPU instances and compute instances, as `nvidia-smi mig
-lgip / -lgi / -lci` list them."""

import json
from typing import Annotated

import typer

from gpudiag.cli.common import fail, handle_errors, settings
from gpudiag.cli.view_options import GpuIds
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode


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
    from gpudiag.cli import smi_views
    from gpudiag.model import FactGroup
    from gpudiag.render import mig_view, smi_errors

    s = settings(ctx)
    chosen = [n for n, on in (("-lgip", lgip), ("-lgi", lgi), ("-lci", lci)) if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    opened = smi_views.open_views(s, ids, frozenset({FactGroup.MIG, FactGroup.MIG_LAYOUT}))
    opened.close()
    machine = opened.machine
    gpus = tuple(g for g in machine.gpus if g.index in {c.index for c in opened.gpus})
    if json_output:
        typer.echo(json.dumps(mig_view.to_json(list(gpus)), indent=2))
        smi_views.finish(opened)
        return
    enabled = [g for g in gpus if g.mig_mode_current.value is True]
    if not enabled:
        fail(smi_errors.NO_MIG, ExitCode.NOT_FOUND)
    what = "GPU instances" if lgi or lci else "GPU instance profiles"
    for gpu in enabled:
        layout = gpu.mig_instances if lgi or lci else gpu.mig_profiles
        if layout.value is None:
            why = layout.detail or (layout.reason.label if layout.reason else "")
            fail(f"Failed to display {what} of GPU {gpu.index}: {why}", ExitCode.NVML_ERROR)
    if lci:
        found = [(g, g.mig_instances.get(())) for g in enabled]
        if not any(gi.compute_instances for _, instances in found for gi in instances):
            fail("No compute instances found: Not Found", ExitCode.NOT_FOUND)
        text = mig_view.compute_instances(found)
    elif lgi:
        listed = [(g, g.mig_instances.get(()), g.mig_profiles.get(())) for g in enabled]
        if not any(instances for _, instances, _ in listed):
            fail("No GPU instances found: Not Found", ExitCode.NOT_FOUND)
        text = mig_view.gpu_instances(listed)
    else:
        text = mig_view.profiles([(g, g.mig_profiles.get(())) for g in enabled])
    typer.echo(text, nl=False)  # every cell is NVML's number or name, escaped (render.printable)
    smi_views.finish(opened)
