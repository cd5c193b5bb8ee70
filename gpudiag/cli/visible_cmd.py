"""`gpudiag visible`: which physical GPUs a CUDA program will see, as which cuda:N."""

import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import echo, exit_if_lost, handle_errors, make_console, require_nvml, settings
from gpudiag.errors import UsageError
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import FactGroup, NvmlStatus
from gpudiag.probe.collect import collect
from gpudiag.visibility import ORDER_VAR, ORDERS, VISIBLE_VAR

if TYPE_CHECKING:
    from gpudiag.visibility import ProbeReport, Resolution

# What the visibility rules and the view use: memory size, capability, compute mode, MIG instances.
GROUPS = frozenset({FactGroup.MEMORY, FactGroup.CAPABILITY, FactGroup.MODES, FactGroup.MIG})
PROBE_TIMEOUT_S = 120.0  # cuInit on many GPUs without persistence mode takes seconds per GPU


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

    s = settings(ctx)
    if value is not None and unset:
        raise UsageError("choose one of --value and --unset")
    order_option = None
    if order is not None:
        order_option = order.strip().upper()
        if order_option not in ORDERS:
            raise UsageError(f"--order {order!r}: use FASTEST_FIRST or PCI_BUS_ID")
    if probe and s.replay:
        raise UsageError("--probe asks this machine's CUDA runtime; it cannot probe a replayed machine")
    if probe and select is not None:
        raise UsageError("choose one of --probe and --select (probe the selection with --value)")

    machine = collect(s.replay, facts=GROUPS)
    env = machine.env_map
    recorded = "recorded environment" if s.replay else "environment"
    if unset:
        current, origin = None, "--unset"
    elif value is not None:
        current, origin = value, "--value"
    else:
        current, origin = env.get(VISIBLE_VAR), recorded
    current_order, order_origin = (
        (order_option, "--order") if order_option is not None else (env.get(ORDER_VAR), recorded)
    )

    if machine.nvml.status is not NvmlStatus.OK:
        if not probe:
            require_nvml(machine.nvml)
        code = NVML_EXIT[machine.nvml.status]
        unmapped = _probe(None, current, current_order)
        if json_output:
            import json  # only with --json: ~1.5 ms of start-up otherwise

            typer.echo(
                json.dumps(
                    {
                        "schema": visible_view.SCHEMA,
                        "error": machine.nvml.detail,
                        "cuda_visible_devices": current,
                        "cuda_device_order_value": current_order,
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

    if select is not None:
        _select(machine, select, json_output)
        exit_if_lost(machine.gpus)  # CUDA enumerates every GPU; a lost one may fail cuInit for all
        return

    resolution = visibility.resolve(machine, current, current_order)
    hints = visibility.code_hints(resolution)
    report = _probe(resolution, current, current_order) if probe else None
    if json_output:
        import json  # only with --json: ~1.5 ms of start-up otherwise

        typer.echo(json.dumps(visible_view.to_json(resolution, origin, hints, report), indent=2))
    else:
        console = make_console(s)
        console.print(visible_view.render(resolution, origin, hints, report, order_origin, console.width))
    if report is not None and report.status == "disagrees":
        raise typer.Exit(int(ExitCode.FAILED))
    if report is not None and report.status == "could_not_run":
        raise typer.Exit(int(ExitCode.NO_CUDA_DEVICE))
    exit_if_lost(machine.gpus)


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


def _probe(resolution: "Resolution | None", value: str | None, order: str | None) -> "ProbeReport":
    """Run the CUDA runtime with this setting in a child; CUDA is never initialised here."""
    from gpudiag import visibility
    from gpudiag.probe import child

    for name, text in ((VISIBLE_VAR, value), (ORDER_VAR, order)):
        if text is not None and "\0" in text:
            raise UsageError(f"{name} cannot contain a NUL character; the probe cannot pass it on")
    env = dict(os.environ)
    env.pop(VISIBLE_VAR, None)
    env.pop(ORDER_VAR, None)
    if value is not None:
        env[VISIBLE_VAR] = value
    if order is not None:
        env[ORDER_VAR] = order
    result = child.run_child([str(child.script("visible_probe"))], env=env, timeout=PROBE_TIMEOUT_S)
    if not result.ok:
        return visibility.probe_failed(result.detail)
    return visibility.probe_report(resolution, result.data)
