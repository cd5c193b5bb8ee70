"""`gpudiag drain`: drain (or with --resume, undrain) the nodes a fleet report judged (see gpudiag.fleet.drain)."""

from typing import Annotated

import typer

from gpudiag.cli.common import echo, handle_errors, request_of
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
        bool,
        typer.Option(
            "--resume", help="Also undrain nodes gpudiag drained that are ready in files newer than the drain."
        ),
    ] = False,
) -> None:
    """Print (or, with --execute, run) `scontrol update NodeName=… State=DRAIN Reason=…` per node a check failed.

    One node per command; a reason someone else set is never overwritten. Unreadable and missing
    nodes, names that are not one Slurm node name, and nodes Slurm does not know are named and
    left alone. When Slurm's view cannot be read (no scontrol, `scontrol show node` failing), no
    command is printed to run: each is a comment. Exit codes: 0 done (or printed), 1 a node needs a
    look (one of those), Slurm's view could not be read, or an scontrol command failed; 2 usage error.
    """
    from gpudiag.fleet import drain
    from gpudiag.fleet.request import DrainRequest, prepare_drain

    run = prepare_drain(request_of(DrainRequest, locals()))
    current: dict[str, drain.Current] | None
    try:
        found = drain.Scontrol()
        current = found.nodes()
        scontrol: drain.Scontrol | None = found
    except GpudiagError as exc:
        if run.execute:
            raise
        echo(
            f"# {exc.message}: Slurm's states and reasons not read, so nothing here is fit to run: "
            "each command is a comment",
            err=True,
            one_line=True,
        )
        scontrol, current = None, None
    steps = drain.plan(run.targets, current, run.resume)
    failed = current is None
    for line, ok, error in drain.carry_out(steps, scontrol if run.execute else None, blind=current is None):
        echo(line, err=error, one_line=True)
        failed = failed or not ok
    echo(drain.summary(run.targets, steps, run.execute), err=True, one_line=True)
    raise typer.Exit(int(ExitCode.FAILED if failed else ExitCode.OK))
