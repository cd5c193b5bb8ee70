"""`gpudiag report`: one fleet view from per-node JSON outputs (see gpudiag.fleet)."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, make_console, request_of, settings


@handle_errors
def command(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(help="Node output files, or directories of them (*.json).", metavar="FILES|DIR"),
    ],
    expect: Annotated[
        str | None,
        typer.Option("--expect", help="Nodes that should have sent a file, in Slurm hostlist syntax: node[001-128]."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable (gpudiag.report/1).")] = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write JUnit XML here (one test case per node).", dir_okay=False),
    ] = None,
    junit_per_check: Annotated[
        bool,
        typer.Option(
            "--junit-per-check", help="With --junit: a test case per node and check (large: 27 checks × nodes)."
        ),
    ] = False,
    nodes: Annotated[
        bool, typer.Option("--nodes", help="Also a line per node (the default groups nodes by verdict and reason).")
    ] = False,
    brief: Annotated[
        bool, typer.Option("--brief", help="No line per node: the default (kept for scripts that pass it).")
    ] = False,
) -> None:
    """Merge per-node outputs of check --json, snapshot, bench-transfer --json and memory --json.

    Every node is READY, NOT READY, UNREADABLE (its file is not exactly one valid gpudiag output;
    the reason is shown) or MISSING (named by --expect, no file). Exit codes: 0 every node ready,
    1 a node is not ready or missing, 2 usage error, 6 a node's file could not be read (and
    nothing failed).
    """
    from gpudiag.fleet import nodefiles, report
    from gpudiag.fleet.request import ReportRequest, prepare_report
    from gpudiag.render import report_view

    run = prepare_report(request_of(ReportRequest, locals()))
    fleet = report.build((nodefiles.read(f, run.keep_checks) for f in run.files), run.expected)
    if (xml := run.junit) is not None:
        from gpudiag.files import write_atomic

        write_atomic(xml.path, lambda out: report_view.write_junit(fleet, out, xml.per_check))
    if run.json_output:
        sys.stdout.flush()
        report_view.write_json(fleet, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        make_console(settings(ctx)).print(report_view.render(fleet, nodes=run.nodes), crop=False)
    raise typer.Exit(int(report.exit_code(fleet)))
