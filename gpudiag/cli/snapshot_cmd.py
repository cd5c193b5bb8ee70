"""`gpudiag snapshot`: the whole machine as JSON, to attach to a bug report or replay later."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, settings
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.probe.collect import collect
from gpudiag.testing.fixtures import dump


@handle_errors
def snapshot_command(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.", dir_okay=False)
    ] = None,
    description: Annotated[str, typer.Option("--description", "-d", help="A line saying what this machine is.")] = "",
) -> None:
    """Record this machine (NVML, processes, relevant environment, torch build) as a replayable JSON file.

    Replay it anywhere with `gpudiag --replay FILE list` (or check, memory, visible).
    """
    machine = collect(settings(ctx).replay)
    document = dump(machine, description)
    if output is None:
        typer.echo(document, nl=False)
        return
    try:
        output.write_text(document)
    except OSError as exc:
        raise GpudiagError(f"cannot write {output}: {exc.strerror or exc}", ExitCode.USAGE) from None
    typer.echo(f"wrote {output} ({len(machine.gpus)} GPU(s), NVML {machine.nvml.status.value})", err=True)
