"""`gpudiag visible`: which physical GPUs a CUDA program will see, as which cuda:N.

The options are checked in gpudiag.visibility.request; visibility.resolve computes the answer,
gpudiag.probe.visible asks CUDA itself (--probe); this module renders them.
"""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import echo, exit_if_lost, handle_errors, make_console, require_nvml, settings
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import NvmlStatus
from gpudiag.sources import collect
from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR

if TYPE_CHECKING:
    from gpudiag.cli.common import Settings
    from gpudiag.visibility import ProbeReport, Resolution
    from gpudiag.visibility.request import Setting


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
    from gpudiag.visibility.request import GROUPS, checked_order, setting

    s = settings(ctx)
    order_option = checked_order(value, unset, order, select, probe, s.replay)
    machine = collect(s.replay, facts=GROUPS)
    current = setting(value, unset, order_option, machine.env_map, bool(s.replay))
    if machine.nvml.status is not NvmlStatus.OK:
        _without_nvml(s, machine, current, probe, json_output)
    if select is not None:
        _select(machine, select, json_output)
        exit_if_lost(machine.gpus)  # CUDA enumerates every GPU; a lost one may fail cuInit for all
        return

    resolution = visibility.resolve(machine, current.value, current.order)
    hints = visibility.code_hints(resolution)
    report = _probe(resolution, current) if probe else None
    if json_output:
        import json  # only with --json: ~1.5 ms of start-up otherwise

        typer.echo(json.dumps(visible_view.to_json(resolution, current.origin, hints, report), indent=2))
    else:
        console = make_console(s)
        console.print(
            visible_view.render(resolution, current.origin, hints, report, current.order_origin, console.width)
        )
    if report is not None and report.status == "disagrees":
        raise typer.Exit(int(ExitCode.FAILED))
    if report is not None and report.status == "could_not_run":
        raise typer.Exit(int(ExitCode.NO_CUDA_DEVICE))
    exit_if_lost(machine.gpus)


def _without_nvml(s: "Settings", machine: Any, current: "Setting", probe: bool, json_output: bool) -> None:
    """No NVML: nvidia-smi's exit code for it; with --probe, what CUDA itself says first."""
    if not probe:
        require_nvml(machine.nvml)
    from gpudiag.render import visible_view

    code = NVML_EXIT[machine.nvml.status]
    unmapped = _probe(None, current)
    if json_output:
        import json  # only with --json: ~1.5 ms of start-up otherwise

        typer.echo(
            json.dumps(
                {
                    "schema": visible_view.SCHEMA,
                    "error": machine.nvml.detail,
                    "cuda_visible_devices": current.value,
                    "cuda_device_order_value": current.order,
                    "probe": visible_view.probe_json(unmapped),
                },
                indent=2,
            )
        )
    else:
        make_console(s).print(visible_view.render_unavailable(machine.nvml.detail, unmapped))
    echo(f"gpudiag: {machine.nvml.detail}", err=True, one_line=True)
    # --probe asks CUDA: when it could not answer either, that is exit 3 (as with a
    # CPU-only torch on a healthy node); NVML's code when only the mapping is missing.
    raise typer.Exit(int(ExitCode.NO_CUDA_DEVICE if unmapped.status == "could_not_run" else code))


def _select(machine: Any, ids: str, json_output: bool) -> None:
    """Export lines for these GPUs (or one MIG instance), checked by resolving them back."""
    from gpudiag import visibility
    from gpudiag.render import visible_view

    targets = visibility.select_targets(machine, ids)
    lines = visibility.export_lines(machine, targets)
    value = ",".join((t.mig.uuid.get("?") if t.mig is not None else t.gpu.uuid.get("?")) for t in targets)
    check = visibility.resolve(machine, value, "PCI_BUS_ID")
    mapping = ", ".join(
        f"cuda:{d.ordinal} = GPU {d.gpu_index}" + (f" MIG {d.mig.index}" if d.mig is not None else "") + f" ({d.name})"
        for d in check.devices
    )
    if json_output:
        chosen = {
            "nvml_indices": [t.gpu.index for t in targets],
            "mig_uuid": next((t.mig.uuid.value for t in targets if t.mig is not None), None),
            "exports": list(lines),
        }
        data = visible_view.to_json(check, "--select", visibility.code_hints(check), None, select=chosen)
        import json  # only with --json: ~1.5 ms of start-up otherwise

        typer.echo(json.dumps(data, indent=2))
        return
    echo(lines[0], one_line=True)
    if len(lines) > 1:
        echo(f"# or, immune to ordering: {lines[1]}", one_line=True)
    echo(f"# then {mapping}", one_line=True)


def _probe(resolution: "Resolution | None", current: "Setting") -> "ProbeReport":
    """What the CUDA runtime says with this setting, in a child; CUDA is never initialised here."""
    from gpudiag import visibility
    from gpudiag.probe.visible import ask

    result = ask({VISIBLE_VAR: current.value, ORDER_VAR: current.order})
    if not result.ok:
        return visibility.probe_failed(result.detail)
    return visibility.probe_report(resolution, result.data)
