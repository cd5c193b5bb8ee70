"""`gpudiag snapshot`: the whole machine as JSON, to attach to a bug report or replay later."""

from pathlib import Path
from typing import Annotated

import typer
from msgspec.structs import replace

from gpudiag.cli.common import echo, handle_errors, request_of, settings
from gpudiag.files import write_atomic
from gpudiag.model import ALL_GROUPS
from gpudiag.replay.fixtures import dump
from gpudiag.replay.snapshot_request import Request, prepare
from gpudiag.sources import collect


@handle_errors
def snapshot_command(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.", dir_okay=False)
    ] = None,
    description: Annotated[str, typer.Option("--description", "-d", help="A line saying what this machine is.")] = "",
    no_torch: Annotated[
        bool, typer.Option("--no-torch", help="Do not record torch's runtime view (it costs a torch import, ~2 s).")
    ] = False,
) -> None:
    """Record this machine (NVML, processes, relevant environment, torch build) as a replayable JSON file.

    Replay it anywhere with `gpudiag --replay FILE list` (or check, memory, visible).
    """
    replay = settings(ctx).replay
    snapshot = prepare(request_of(Request, locals()), replay)
    machine = collect(replay, facts=ALL_GROUPS)  # a snapshot records every fact, to replay any command
    if snapshot.torch:
        from gpudiag.probe.torch_runtime import probe

        machine = replace(machine, torch_runtime=probe())
    document = dump(machine, snapshot.description)
    if snapshot.output is None:
        typer.echo(document, nl=False)
        return
    output = snapshot.output
    write_atomic(output, document)  # whole or not at all; a full disk is exit 74
    echo(f"wrote {output} ({len(machine.gpus)} GPU(s), NVML {machine.nvml.status.value})", err=True, one_line=True)
