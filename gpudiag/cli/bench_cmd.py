"""`gpudiag bench-transfer`: host<->device, device-to-device and peer copy bandwidth, judged against the link."""

from __future__ import annotations

import importlib.util
import json
from typing import TYPE_CHECKING, Annotated

import typer

from gpudiag.cli.common import Settings, handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.bench.plan import Plan
    from gpudiag.model import Machine, TorchRuntime
    from gpudiag.probe.collect import MachineSource


def _no_device(message: str) -> GpudiagError:
    return GpudiagError(f"no usable CUDA device: {message}", ExitCode.NO_CUDA_DEVICE)


@handle_errors
def command(
    ctx: typer.Context,
    sizes: Annotated[str | None, typer.Option("--sizes", help="Copy sizes, e.g. 64MiB,1GiB (default 256MiB).")] = None,
    sweep: Annotated[bool, typer.Option("--sweep", help="Sizes from 4KiB to 1GiB, with a chart.")] = False,
    modes: Annotated[
        str | None, typer.Option("--modes", help="Modes (h2d, d2h, pinned, pageable, d2d, peer, peer_bidir, …).")
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="Only these CUDA devices (cuda ordinals, comma-separated).")
    ] = None,
    iters: Annotated[int, typer.Option("--iters", help="Copies per sample.")] = 16,
    samples: Annotated[int, typer.Option("--samples", help="Samples per figure (median, min, max).")] = 3,
    gib: Annotated[bool, typer.Option("--gib", help="Report GiB/s (2^30) instead of GB/s (10^9).")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable (gpudiag.bench-transfer/1).")] = False,
    csv_output: Annotated[bool, typer.Option("--csv", help="CSV rows.")] = False,
) -> None:
    """Measure copy bandwidth (H2D, D2H pageable/pinned, D2D, peer) and judge it against the PCIe/memory limit."""
    from gpudiag.bench.plan import make_plan

    s = settings(ctx)
    if json_output and csv_output:
        raise UsageError("choose one of --json and --csv")
    if s.replay:
        raise UsageError("bench-transfer measures this machine; it cannot run on a replay")
    ordinals = None
    if device is not None:
        try:
            ordinals = tuple(int(d) for d in device.split(",") if d.strip())
        except ValueError:
            raise UsageError(f"--device {device!r}: use CUDA ordinals such as 0 or 0,1") from None
        if not ordinals or min(ordinals) < 0:
            raise UsageError(f"--device {device!r}: use CUDA ordinals such as 0 or 0,1")
    plan = make_plan(modes, sizes, sweep, iters, samples, ordinals)

    # Say why not, without importing torch here: installed? a CUDA build? a driver? CUDA usable?
    if importlib.util.find_spec("torch") is None:
        raise _no_device("torch is not installed (pip install 'gpudiag[torch]')")
    from gpudiag.model import NvmlStatus
    from gpudiag.probe.collect import open_source
    from gpudiag.probe.torch_static import torch_build

    build = torch_build().value
    if build is not None and build.cuda is None:
        raise _no_device(f"torch {build.version} is a CPU-only build")
    with open_source() as source:
        machine = source.read()
        if machine.nvml.status is not NvmlStatus.OK:
            raise _no_device(machine.nvml.detail)
        from gpudiag.probe.torch_runtime import probe

        runtime = probe()
        if runtime.value is None:
            raise _no_device(runtime.detail)
        if not runtime.value.cuda_available:
            raise _no_device(f"torch {runtime.value.version} cannot use CUDA: {runtime.value.cuda_error}")
        if ordinals and max(ordinals) >= runtime.value.device_count:
            raise UsageError(f"--device {device}: only {runtime.value.device_count} CUDA device(s) are visible")
        _run(s, source, machine, runtime.value, plan, gib, sweep, json_output, csv_output)


def _run(
    s: Settings,
    source: MachineSource,
    machine: Machine,
    runtime: TorchRuntime,
    plan: Plan,
    gib: bool,
    sweep: bool,
    json_output: bool,
    csv_output: bool,
) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gpudiag.bench import engine, report
    from gpudiag.render import bench_view

    by_uuid = {(g.uuid.value or "").removeprefix("GPU-").lower(): g for g in machine.gpus}
    gpus = {i: by_uuid.get(d.uuid.lower()) for i, d in enumerate(runtime.devices)}
    numa = {i: (g.numa_node.value if g is not None else None) for i, g in gpus.items()}
    links: dict[int, tuple[int, int] | None] = {}

    def after_warmup(ordinal: int) -> None:
        # Right after the warm-up the GPU is busy: an idle link downshifts, a loaded one shows its real speed.
        gpu = gpus.get(ordinal)
        if gpu is None:
            links[ordinal] = None
            return
        now = source.read().gpu(gpu.index).pcie
        gen, width = now.gen_current.value, now.width_current.value
        links[ordinal] = (gen, width) if gen is not None and width is not None else None

    backend = engine.TorchBackend(numa)
    total = len(engine.tasks(plan, backend))
    err_console = make_console(s, stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task("measuring", total=total)

        def on_step(label: str) -> None:
            progress.update(task, description=label, advance=1)

        measurements = engine.run(plan, backend, on_step, after_warmup)
    rows = report.rows(measurements, gpus, links)
    notes = sorted(set(backend.placement.values()))
    if any(not r.measurement.verified for r in rows):
        notes.append("DATA MISMATCH: a copy did not read back what was written — the GPU or link is faulty")
    if json_output:
        info = {
            str(i): {"nvml_index": g.index if g else None, "name": g.name.value if g else None} for i, g in gpus.items()
        }
        typer.echo(json.dumps(bench_view.to_json(rows, notes, info), indent=2))
    elif csv_output:
        typer.echo(bench_view.to_csv(rows), nl=False)
    else:
        make_console(s).print(bench_view.render(rows, notes, gib, sweep))
    if any(not r.measurement.verified for r in rows):
        raise typer.Exit(int(ExitCode.FAILED))
