"""`gpudiag drain`: drain (or with --resume, undrain) the nodes a fleet report judged (see gpudiag.fleet.drain)."""

from typing import Annotated

import typer

from gpudiag.cli.common import echo, handle_errors
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode


@handle_errors
def command(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="A `gpudiag report --json` output, or node files / directories as `report` takes them.",
            metavar="REPORT|FILES|DIR",
        ),
    ],
    execute: Annotated[
        bool, typer.Option("--execute", help="Run the scontrol commands (default: only print them).")
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Also undrain ready nodes that gpudiag drained (never others').")
    ] = False,
) -> None:
    """Print (or, with --execute, run) `scontrol update NodeName=… State=DRAIN Reason="gpudiag: …"` per failed node.

    A reason someone else set is never overwritten. Exit codes: 0 done (or printed), 1 an scontrol
    command failed, 2 usage error.
    """
    from gpudiag.fleet import drain

    targets = drain.load_targets(paths)
    try:
        found = drain.Scontrol()
        current = {t.node: found.show(t.node) for t in targets}
        scontrol: drain.Scontrol | None = found
    except GpudiagError as exc:
        if execute:
            raise
        echo(f"# {exc.message}; current states and reasons not read", err=True, one_line=True)
        scontrol, current = None, {t.node: drain.Current("UNKNOWN", "") for t in targets}
    actions = drain.plan(targets, current, resume)
    if not any(a.verb is not drain.Verb.KEEP for a in actions):
        typer.echo("# nothing to drain or resume", err=True)
    failed = False
    for line, ok in drain.carry_out(actions, scontrol if execute else None):
        echo(line, err=not ok, one_line=True)
        failed = failed or not ok
    raise typer.Exit(int(ExitCode.FAILED if failed else ExitCode.OK))
