"""`gpudiag check`: can a job run here, and if not, why and what to do.

Exit codes (schedulers rely on them): 0 no check failed and at least one was not skipped
(warnings allowed unless --strict); 1 a check failed; 2 usage error; 5 gpudiag could not run a
requested check (or any check) and nothing failed; 7 every selected check was skipped. Any other
code (70 internal error, 128+N a signal) also means the verdict is unknown. The options become a
run in gpudiag.checks.request, the run happens in gpudiag.checks.gather; this module renders it.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpudiag.checks.deep.levels import BUDGET_HELP, FORCE_HELP, LEVEL_HELP
from gpudiag.cli.common import echo, handle_errors, make_console, request_of, settings
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.checks.gather import CheckRun
    from gpudiag.checks.request import Request
    from gpudiag.cli.common import Settings
    from gpudiag.render.deep_progress import TerminalProgress


def _progress(s: "Settings") -> "TerminalProgress":
    """The deep tests' progress on stderr when it is a terminal (it starts with the first test and
    ends with the last, whatever happens in between)."""
    from gpudiag.render.deep_progress import TerminalProgress

    return TerminalProgress(make_console(s, stderr=True))


@handle_errors
def command(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="Skip the functional test (context, memory pattern, matmul per GPU).")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable results (gpudiag.check/1).")] = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write JUnit XML here (one test case per result).", dir_okay=False),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only these check ids or areas, e.g. health (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Skip these check ids or areas (repeatable).")
    ] = None,
    expect_gpus: Annotated[
        int | None, typer.Option("--expect-gpus", help="Fail unless NVML sees this many GPUs.")
    ] = None,
    min_free: Annotated[
        str | None, typer.Option("--min-free", help="Fail a GPU with less free memory, e.g. 20GiB.")
    ] = None,
    temp_margin: Annotated[
        int, typer.Option("--temp-margin", help="Warn this many °C below a GPU's slowdown temperature.")
    ] = 5,
    allow_processes: Annotated[
        bool, typer.Option("--allow-processes", help="Running compute processes warn instead of failing.")
    ] = False,
    require_driver: Annotated[str | None, typer.Option("--require-driver", help="Minimum driver, e.g. 550.")] = None,
    require_cuda: Annotated[
        str | None, typer.Option("--require-cuda", help="Minimum CUDA of the driver and of torch's build, e.g. 12.4.")
    ] = None,
    require_capability: Annotated[
        str | None, typer.Option("--require-capability", help="Minimum compute capability, e.g. 8.0.")
    ] = None,
    require_gpu: Annotated[
        str | None, typer.Option("--require-gpu", help='Every GPU\'s name must contain this, e.g. "H100".')
    ] = None,
    require_torch: Annotated[
        str | None, typer.Option("--require-torch", help='torch version specifier, e.g. ">=2.3".')
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="Check the torch of this interpreter (e.g. your training venv's python)."),
    ] = None,
    no_torch: Annotated[bool, typer.Option("--no-torch", help="Do not start torch at all (its checks SKIP).")] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds torch may take to answer (import and CUDA start-up); the functional test has its own budget.",
        ),
    ] = 90.0,
    textfile: Annotated[
        Path | None,
        typer.Option(
            "--textfile",
            help="Also write the verdicts as DIR/gpudiag_check.prom for node_exporter's textfile collector.",
            file_okay=False,
        ),
    ] = None,
    npd: Annotated[
        bool,
        typer.Option(
            "--npd", help="node-problem-detector plugin: one line (<= 80 chars); exit 0 ok, 1 problem, 2 unknown."
        ),
    ] = False,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="prolog | health-check: for Slurm's Prolog / HealthCheckProgram (NHC): exit status and one "
            "line on stderr only, no torch unless --python, a hard deadline.",
        ),
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option("--deadline", help="With --mode: give up after this many seconds (prolog 20, health-check 4)."),
    ] = None,
    level: Annotated[int, typer.Option("--level", help=LEVEL_HELP)] = 1,
    budget: Annotated[float | None, typer.Option("--budget", help=BUDGET_HELP)] = None,
    force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
) -> None:
    """Pre-job health and CUDA/driver/PyTorch compatibility checks, with exit codes for CI and schedulers.

    Exit codes: 0 ready (no check failed, at least one was not skipped), 1 a check failed (or warned,
    with --strict), 2 usage error, 5 a requested check could not run and nothing failed, 7 every
    selected check was skipped (nothing verified), 8 (--level 2-4) other processes use the GPUs.
    """
    from gpudiag.checks import exit_code
    from gpudiag.checks.gather import run
    from gpudiag.checks.request import Request, prepare

    s = settings(ctx)
    request = request_of(Request, locals())
    prepared = prepare(request, s.replay)
    if prepared.schedule is not None:
        from gpudiag.fleet import scheduled

        # also when the command raises (and in tests' own process)
        ctx.call_on_close(scheduled.arm(*prepared.schedule).cancel)
    progress = _progress(s) if prepared.plan.deep is not None else None  # minutes of GPU tests: how far, on a terminal
    checked = run(prepared.plan, prepared.options, prepared.only, prepared.skip, progress)
    if not checked.results:  # e.g. `--only req` without any --require-… option
        raise UsageError(
            f"--only {','.join(prepared.only)}: the selected checks have nothing to check "
            "(the req.* checks need their --require-… option)"
        )
    code = exit_code(checked.results, checked.notes, strict)
    _report(s, request, checked, code)


def _report(s: "Settings", r: "Request", checked: "CheckRun", code: ExitCode) -> None:
    """The verdict where it was asked for: node_exporter's textfile beside, then one of NPD's line, the
    scheduler's line, or JUnit beside JSON or the table; what could not run on stderr; the exit code."""
    from gpudiag.render import check_view  # after the run: the torch child starts without waiting for rich

    facts, results, notes = checked.facts, list(checked.results), list(checked.notes)
    if r.textfile is not None:
        from gpudiag.export.textfile import write_check

        write_check(r.textfile, results, facts.machine, int(code))
    if r.npd:
        from gpudiag.export import pci
        from gpudiag.export.textfile import gpu_absent, npd_verdict

        # A replayed machine's PCI bus is not this host's: only a live run asks it.
        no_gpu = s.replay is None and gpu_absent(facts.machine, pci.nvidia_gpus())
        line, npd_code = npd_verdict(results, r.strict, notes, no_gpu)
        echo(line, one_line=True)
        raise typer.Exit(npd_code)
    if r.mode is not None:
        from gpudiag.fleet import scheduled

        echo(scheduled.line(facts, results, notes, int(code), r.strict), err=True, one_line=True)
        raise typer.Exit(int(code))
    if r.junit is not None:
        from gpudiag.files import write_atomic

        write_atomic(r.junit, check_view.to_junit(facts, results, r.strict, notes))
    if r.json_output:
        import json

        from gpudiag.fleet.identity import slurm_node

        data = check_view.to_json(facts, results, r.strict, int(code), notes, slurm_node())
        typer.echo(json.dumps(data, indent=2))
    else:
        make_console(s).print(check_view.render(facts, results, r.strict, notes))
    for note in notes:
        echo(f"gpudiag: could not run: {note}", err=True, one_line=True)
    if code == ExitCode.NOTHING_CHECKED:
        echo(f"gpudiag: {check_view.NOTHING_CHECKED}: {check_view.skipped(results)}", err=True, one_line=True)
    raise typer.Exit(int(code))
