"""`gpudiag bench-transfer`: host<->device, device-to-device and peer copy bandwidth, judged
against what the link and the memory can do.

Thin: options -> the run (gpudiag.bench.request: every usage error; the plan, gpudiag.bench.plan);
torch's build and NVML say whether CUDA can work (torch is never imported here); the benchmark runs
in a child process while this one reads the PCIe link under load and shows the progress
(gpudiag.bench.runner.measure); then judged rows (gpudiag.bench.report) -> a renderer and an exit code.
"""

import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import Settings, echo, handle_errors, make_console, request_of, settings
from gpudiag.exitcodes import ExitCode
from gpudiag.model import FactGroup

if TYPE_CHECKING:
    from gpudiag.bench.request import Prepared
    from gpudiag.bench.runner import Outcome
    from gpudiag.model import Machine


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
    from gpudiag.bench.preflight import nvml_reason, torch_reason
    from gpudiag.bench.request import Request, prepare
    from gpudiag.bench.runner import measure, no_device
    from gpudiag.probe.torch_static import torch_build

    s = settings(ctx)
    run = prepare(request_of(Request, locals()), s.replay)
    reason = torch_reason(torch_build())
    if reason:
        raise no_device(reason)

    from gpudiag.render.bench_progress import BenchProgress
    from gpudiag.sources import open_source

    # Placement needs the NUMA node, the verdict the PCIe link; nothing else is shown or judged.
    with open_source(facts=frozenset({FactGroup.PCIE, FactGroup.NUMA})) as source:
        machine = source.read()
        reason = nvml_reason(machine)
        if reason:
            raise no_device(reason)
        with BenchProgress(make_console(s, stderr=True)) as progress:
            outcome = measure(run.plan, source, machine.gpus, progress.tasks, progress.start)
    _report(s, outcome, machine, run)


def _report(s: Settings, outcome: "Outcome", machine: "Machine", run: "Prepared") -> None:
    from gpudiag.bench import report
    from gpudiag.bench.request import Output
    from gpudiag.render import bench_view

    launch_blocking = os.environ.get("CUDA_LAUNCH_BLOCKING", "") == "1"
    judged = report.judge_run(outcome, machine.gpus, run.explicit_peer, launch_blocking)
    rows, gpus, found, notes, plan = judged.rows, judged.gpus, judged.findings, judged.notes, run.plan
    unit = bench_view.BINARY if run.binary else bench_view.DECIMAL
    if run.output is Output.JSON:
        from gpudiag.fleet.identity import slurm_node

        data: Any = {
            **bench_view.to_json(rows, outcome, gpus, found, notes, plan),
            "host": machine.host.hostname,
            "slurm_node": slurm_node(),
        }
        typer.echo(json.dumps(data, indent=2))
    elif run.output is Output.CSV:
        echo(bench_view.to_csv(rows, unit), nl=False)
    else:
        make_console(s).print(bench_view.render(rows, outcome, gpus, found, notes, plan, unit))
    if report.failed(found):
        raise typer.Exit(int(ExitCode.FAILED))
