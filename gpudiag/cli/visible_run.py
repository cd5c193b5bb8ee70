"""What `gpudiag visible` does once its options are a Request: the Typer command (cli.visible_cmd)
and the plain front (cli.plain_front) both run it. visibility.resolve computes the answer,
gpudiag.probe.visible asks CUDA itself (--probe); the text imports rich only when it is printed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudiag.cli import plain
from gpudiag.exitcodes import NVML_EXIT, ExitCode
from gpudiag.model import NvmlStatus
from gpudiag.render.printable import printable
from gpudiag.sources import collect
from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR

if TYPE_CHECKING:
    from gpudiag.cli.plain import Settings
    from gpudiag.selection import GpuSelection
    from gpudiag.visibility import ProbeReport, Resolution
    from gpudiag.visibility.request import Request, Setting


def _line(text: str) -> None:
    """One line on stdout, outside text in it (a bus id, a GPU name) printable, as cli.common.echo."""
    plain.write(printable(text) + "\n")


def _json(data: Any) -> None:
    import json  # only with --json: ~1.5 ms of start-up otherwise

    plain.write(json.dumps(data, indent=2) + "\n")


def _exit_if_lost(gpus: Any) -> None:
    """CUDA enumerates every GPU; a lost one may fail cuInit for all: its line, exit 15."""
    line = plain.lost_line(gpus)
    if line is not None:
        plain.say(line)
        raise SystemExit(int(ExitCode.GPU_LOST))


def run(s: Settings, r: Request) -> None:
    """Show which GPUs CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER make visible, as which cuda:N."""
    from gpudiag import visibility
    from gpudiag.visibility.request import GROUPS, prepare, setting

    prepared = prepare(r, s.replay)
    machine = collect(s.replay, facts=GROUPS)
    current = setting(r, prepared.order, machine.env_map, bool(s.replay))
    if machine.nvml.status is not NvmlStatus.OK:
        _without_nvml(s, machine, current, r)
    if prepared.select is not None:
        _select(machine, prepared.select, r.json_output)
        _exit_if_lost(machine.gpus)
        return

    resolution = visibility.resolve(machine, current.value, current.order)
    hints = visibility.code_hints(resolution)
    report = _probe(resolution, current) if r.probe else None
    if r.json_output:
        from gpudiag.render import visible_json

        _json(visible_json.to_json(resolution, current.origin, hints, report))
    else:
        from gpudiag.cli.common import make_console
        from gpudiag.render import visible_view

        console = make_console(s)
        console.print(
            visible_view.render(resolution, current.origin, hints, report, current.order_origin, console.width)
        )
    if report is not None and report.status == "disagrees":
        raise SystemExit(int(ExitCode.FAILED))
    if report is not None and report.status == "could_not_run":
        raise SystemExit(int(ExitCode.NO_CUDA_DEVICE))
    _exit_if_lost(machine.gpus)


def _without_nvml(s: Settings, machine: Any, current: Setting, r: Request) -> None:
    """No NVML: nvidia-smi's exit code for it; with --probe, what CUDA itself says first."""
    if not r.probe:
        plain.require_nvml(machine.nvml)
    code = NVML_EXIT[machine.nvml.status]
    unmapped = _probe(None, current)
    if r.json_output:
        from gpudiag.render import visible_json

        _json(
            {
                "schema": visible_json.SCHEMA,
                "error": machine.nvml.detail,
                "cuda_visible_devices": current.value,
                "cuda_device_order_value": current.order,
                "probe": visible_json.probe_json(unmapped),
            }
        )
    else:
        from gpudiag.cli.common import make_console
        from gpudiag.render import visible_view

        make_console(s).print(visible_view.render_unavailable(machine.nvml.detail, unmapped))
    plain.write(printable(f"gpudiag: {machine.nvml.detail}") + "\n", err=True)
    # --probe asks CUDA: when it could not answer either, that is exit 3 (as with a
    # CPU-only torch on a healthy node); NVML's code when only the mapping is missing.
    raise SystemExit(int(ExitCode.NO_CUDA_DEVICE if unmapped.status == "could_not_run" else code))


def _select(machine: Any, selection: GpuSelection, json_output: bool) -> None:
    """Export lines for these GPUs (or one MIG instance), checked by resolving them back."""
    from gpudiag import visibility

    targets = visibility.select_targets(machine, selection)
    lines = visibility.export_lines(machine, targets)
    value = ",".join((t.mig.uuid.get("?") if t.mig is not None else t.gpu.uuid.get("?")) for t in targets)
    check = visibility.resolve(machine, value, "PCI_BUS_ID")
    mapping = ", ".join(
        f"cuda:{d.ordinal} = GPU {d.gpu_index}" + (f" MIG {d.mig.index}" if d.mig is not None else "") + f" ({d.name})"
        for d in check.devices
    )
    if json_output:
        from gpudiag.render import visible_json

        chosen = {
            "nvml_indices": [t.gpu.index for t in targets],
            "mig_uuid": next((t.mig.uuid.value for t in targets if t.mig is not None), None),
            "exports": list(lines),
        }
        _json(visible_json.to_json(check, "--select", visibility.code_hints(check), None, select=chosen))
        return
    _line(lines[0])
    if len(lines) > 1:
        _line(f"# or, immune to ordering: {lines[1]}")
    _line(f"# then {mapping}")


def _probe(resolution: Resolution | None, current: Setting) -> ProbeReport:
    """What the CUDA runtime says with this setting, in a child; CUDA is never initialised here."""
    from gpudiag import visibility
    from gpudiag.probe.visible import ask

    result = ask({VISIBLE_VAR: current.value, ORDER_VAR: current.order})
    if not result.ok:
        return visibility.probe_failed(result.detail)
    return visibility.probe_report(resolution, result.data)
