"""`gpudiag visible`: which physical GPUs a CUDA program will see, as which cuda:N."""

from __future__ import annotations

import json
import os
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import NvmlStatus
from gpudiag.probe.collect import collect
from gpudiag.visibility import ORDER_VAR, ORDERS, VISIBLE_VAR


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
    from gpudiag import visibility
    from gpudiag.render import visible_view
    from gpudiag.selection import select_gpus

    s = settings(ctx)
    if value is not None and unset:
        raise UsageError("choose one of --value and --unset")
    if order is not None and order.strip().upper() not in ORDERS:
        raise UsageError(f"--order {order!r}: use FASTEST_FIRST or PCI_BUS_ID")
    if probe and s.replay:
        raise UsageError("--probe asks this machine's CUDA runtime; it cannot probe a replayed machine")
    machine = collect(s.replay)
    if machine.nvml.status is not NvmlStatus.OK:
        raise GpudiagError(machine.nvml.detail, NVML_EXIT[machine.nvml.status])

    if select is not None:
        chosen = select_gpus(machine.gpus, select)
        by_index, by_uuid = visibility.export_line(machine, tuple(g.index for g in chosen))
        typer.echo(by_index)
        typer.echo(f"# or, immune to ordering: {by_uuid}")
        return

    env = machine.env_map
    if unset:
        current, origin = None, "--unset"
    elif value is not None:
        current, origin = value, "--value"
    else:
        current, origin = env.get(VISIBLE_VAR), "recorded environment" if s.replay else "environment"
    current_order = order if order is not None else env.get(ORDER_VAR)
    resolution = visibility.resolve(machine, current, current_order)
    hints = visibility.code_hints(resolution)

    probe_result = None
    code = ExitCode.OK
    if probe:
        probe_result, code = _probe(resolution, current, resolution.order)

    if json_output:
        typer.echo(json.dumps(visible_view.to_json(resolution, origin, hints, probe_result), indent=2))
    else:
        make_console(s).print(visible_view.render(resolution, origin, hints, probe_result))
    if code is not ExitCode.OK:
        raise typer.Exit(int(code))


def _probe(resolution: object, value: str | None, order: str) -> tuple[tuple[str, tuple[str, ...]], ExitCode]:
    """Run the CUDA runtime with this setting in a child; CUDA is never initialised here."""
    from gpudiag import visibility
    from gpudiag.probe.child import run_python

    assert isinstance(resolution, visibility.Resolution)
    env = dict(os.environ)
    env.pop(VISIBLE_VAR, None)
    if value is not None:
        env[VISIBLE_VAR] = value
    env[ORDER_VAR] = order
    result = run_python(visibility.PROBE_CODE, env=env, timeout=60)
    if not result.ok:
        return (f"could not run: {result.detail}", ()), ExitCode.NO_CUDA_DEVICE
    if "error" in result.data:
        return (f"could not run: {result.data['error']}", ()), ExitCode.NO_CUDA_DEVICE
    devices = result.data.get("devices", [])
    problems = visibility.compare(resolution, devices)
    if problems:
        return ("DISAGREES with the computed mapping", problems), ExitCode.FAILED
    return (f"agrees ({len(devices)} device(s), torch {result.data.get('torch')})", ()), ExitCode.OK
