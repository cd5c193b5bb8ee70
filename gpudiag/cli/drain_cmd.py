"""`gpudiag drain`: drain (or with --resume, undrain) the nodes a fleet report judged (see gpudiag.fleet.drain)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from gpudiag.cli.common import handle_errors
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.fleet.drain import Current, Scontrol, Target


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
    from gpudiag.fleet import drain, nodefiles, report

    if len(paths) == 1 and not os.path.isdir(paths[0]):
        try:
            with open(paths[0], "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise UsageError(f"{paths[0]}: {exc.strerror or exc}") from None
        targets = drain.from_report_json(raw, paths[0]) if drain.is_report(raw) else None
    else:
        targets = None
    if targets is None:
        targets = drain.from_report(report.build(nodefiles.read(f) for f in report.node_files(paths)))

    scontrol, current = _current(targets, execute)
    actions = drain.plan(targets, current, resume)

    failed = 0
    for action in actions:
        if action.verb is drain.Verb.KEEP:
            typer.echo(f"# {action.node}: {action.reason}")
            continue
        if not execute:
            typer.echo(action.shell())
            continue
        assert scontrol is not None
        error = scontrol.update(action)
        if error:
            failed += 1
            typer.echo(f"gpudiag: {action.verb.value} {action.node} failed: {error}", err=True)
        else:
            typer.echo(f"{action.verb.value} {action.node}: {action.reason}")
    if not any(a.verb is not drain.Verb.KEEP for a in actions):
        typer.echo("# nothing to drain or resume", err=True)
    raise typer.Exit(int(ExitCode.FAILED if failed else ExitCode.OK))


def _current(targets: list[Target], execute: bool) -> tuple[Scontrol | None, dict[str, Current | None]]:
    """Slurm's state and reason per node; a dry run without a reachable Slurm lists every failed node."""
    from gpudiag.fleet.drain import Current, Scontrol

    try:
        scontrol = Scontrol()
        return scontrol, {t.node: scontrol.show(t.node) for t in targets}
    except GpudiagError as exc:
        if execute:
            raise
        typer.echo(f"# {exc.message}; current states and reasons not read", err=True)
        return None, {t.node: Current("UNKNOWN", "") for t in targets}
