"""`gpudiag bench-transfer`: host<->device, device-to-device and peer copy bandwidth, judged
against what the link and the memory can do.

Thin: options -> plan; torch's build and NVML say whether CUDA can work (torch is never
imported here); the benchmark runs in a child process while this one reads the PCIe link
under load and shows the progress; then judged rows -> a renderer and an exit code.
"""

import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import Settings, echo, handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import FactGroup

if TYPE_CHECKING:
    from gpudiag.bench.plan import Plan
    from gpudiag.bench.runner import Outcome
    from gpudiag.model import Gpu
    from gpudiag.probe.collect import MachineSource


def _no_device(message: str) -> GpudiagError:
    return GpudiagError(f"no usable CUDA device: {message}", ExitCode.NO_CUDA_DEVICE)


@handle_errors
def command(
    ctx: typer.Context,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="Copy sizes, e.g. 64MiB,1GiB (default: 256MiB, D2D at least 8x L2).")
    ] = None,
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Sizes from 4KiB to 1GiB, with a chart of where bandwidth saturates.")
    ] = False,
    modes: Annotated[
        str | None,
        typer.Option("--modes", help="Modes: h2d, d2h, pinned, pageable, async, d2d, peer, peer_bidir, h2d_pinned, …"),
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="Only these CUDA devices (torch's ordinals, e.g. 0 or 0,1).")
    ] = None,
    iters: Annotated[int, typer.Option("--iters", help="Copies per sample.")] = 16,
    samples: Annotated[int, typer.Option("--samples", help="Samples per figure: median, min, max.")] = 3,
    gib: Annotated[bool, typer.Option("--gib", help="Show GiB/s (2^30 B/s) instead of GB/s (10^9 B/s).")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable (gpudiag.bench-transfer/1).")] = False,
    csv_output: Annotated[bool, typer.Option("--csv", help="One CSV row per figure.")] = False,
) -> None:
    """Measure copy bandwidth (H2D, D2H pageable/pinned, D2D, peer) and judge it against the PCIe/memory limit."""
    from gpudiag.bench.plan import make_plan
    from gpudiag.bench.preflight import nvml_reason, torch_reason
    from gpudiag.probe.torch_static import torch_build

    s = settings(ctx)
    if json_output and csv_output:
        raise UsageError("choose one of --json and --csv")
    plan = make_plan(modes, sizes, sweep, iters, samples, device)
    if s.replay:
        raise UsageError("bench-transfer measures this machine; it cannot run on a replay")
    reason = torch_reason(torch_build())
    if reason:
        raise _no_device(reason)

    from gpudiag.probe.collect import open_source

    # Placement needs the NUMA node, the verdict the PCIe link; nothing else is shown or judged.
    with open_source(facts=frozenset({FactGroup.PCIE, FactGroup.NUMA})) as source:
        machine = source.read()
        reason = nvml_reason(machine)
        if reason:
            raise _no_device(reason)
        outcome = _measure(s, source, machine.gpus, plan)
    _report(s, outcome, machine.gpus, plan, gib, json_output, csv_output, modes is not None, machine.host.hostname)


def _measure(s: Settings, source: "MachineSource", gpus: "tuple[Gpu, ...]", plan: "Plan") -> "Outcome":
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpudiag.bench.link import Link
    from gpudiag.bench.placement import pci_numa_node
    from gpudiag.bench.plan import DeviceInfo, Task
    from gpudiag.bench.preflight import match_gpu, numa_maps
    from gpudiag.bench.runner import Collector, run_child

    def read_link(device: DeviceInfo) -> Link | None:
        # Right after the warm-up the GPU is busy: an idle link downshifts, a loaded one shows its speed.
        gpu = match_gpu(device.uuid, device.pci_bus_id, gpus)
        if gpu is None:
            return None
        pcie = source.read(frozenset({FactGroup.PCIE})).gpu(gpu.index).pcie
        gen, width = pcie.gen_current.value, pcie.width_current.value
        return Link(gen, width) if gen and width else None

    err_console = make_console(s, stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,  # nothing, not even a blank line, into logs and pipes
    ) as progress:
        bar = progress.add_task("starting torch and CUDA in a child process", total=None)

        def on_tasks(planned: list[Task]) -> None:
            progress.update(bar, total=len(planned), completed=0)

        def on_start(task: Task) -> None:
            progress.update(bar, description=task.label(), completed=task.index)

        by_uuid, by_pci = numa_maps(gpus, pci_numa_node)
        outcome = run_child(
            plan,
            Collector(read_link, on_tasks, on_start),
            gpu_count=len(gpus),
            numa_by_uuid=by_uuid,
            numa_by_pci=by_pci,
        )
    if outcome.no_cuda:
        raise _no_device(outcome.no_cuda)
    if outcome.usage:
        raise UsageError(outcome.usage)
    if not outcome.devices and outcome.failure:
        raise _no_device(f"torch could not start CUDA: {outcome.failure}")
    return outcome


def _report(
    s: Settings,
    outcome: "Outcome",
    machine_gpus: "tuple[Gpu, ...]",
    plan: "Plan",
    gib: bool,
    json_output: bool,
    csv_output: bool,
    explicit_modes: bool,
    host: str = "",
) -> None:
    from gpudiag.bench import report
    from gpudiag.bench.preflight import match_gpu
    from gpudiag.render import bench_view

    gpus = {d.ordinal: match_gpu(d.uuid, d.pci_bus_id, machine_gpus) for d in outcome.devices}
    rows = report.rows(outcome, gpus)
    found = report.findings(rows, outcome)
    launch_blocking = os.environ.get("CUDA_LAUNCH_BLOCKING", "") == "1"
    notes = report.notes(rows, outcome, launch_blocking, explicit_modes and any(m.is_peer for m in plan.modes))
    unit = bench_view.BINARY if gib else bench_view.DECIMAL
    if json_output:
        from gpudiag.fleet.identity import slurm_node

        data: Any = {
            **bench_view.to_json(rows, outcome, gpus, found, notes, plan),
            "host": host,
            "slurm_node": slurm_node(),
        }
        typer.echo(json.dumps(data, indent=2))
    elif csv_output:
        echo(bench_view.to_csv(rows, unit), nl=False)
    else:
        make_console(s).print(bench_view.render(rows, outcome, gpus, found, notes, plan, unit))
    if report.failed(found):
        raise typer.Exit(int(ExitCode.FAILED))
