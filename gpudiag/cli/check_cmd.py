"""`gpudiag check`: can a job run here, and if not, why and what to do.

Exit codes (schedulers rely on them): 0 every check passed or was skipped (warnings allowed
unless --strict); 1 a check failed; 2 usage error; COULD_NOT_RUN when gpudiag could not run
a requested check (or any check) and nothing failed. Any other code (70 internal error,
130 interrupted) also means the verdict is unknown.
"""

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpudiag.cli.common import echo, handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.checks import Options

# "check could not run (all or part of it) and nothing failed". The table's CHECK_INCOMPLETE
# (5) is that code; the lead may rename it (e.g. CHECK_COULD_NOT_RUN) — this is the one use.
COULD_NOT_RUN = ExitCode.CHECK_INCOMPLETE


def _version_option(value: str | None, option: str, example: str) -> str | None:
    from gpudiag.numbers import parse_version, shorten

    if value is None:
        return None
    if parse_version(value) is None:
        raise UsageError(f"{option} {shorten(value)!r}: expected a version like {example}")
    return value.strip()


def _ids(values: list[str] | None, option: str) -> tuple[str, ...]:
    from gpudiag.checks.rules import CHECK_IDS, matches

    out = []
    for value in values or []:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                raise UsageError(f"{option} {value!r}: empty entry; give check ids or areas, e.g. health")
            if not any(matches(cid, item) for cid in CHECK_IDS):
                raise UsageError(f"{option} {item!r}: no such check or area; ids: {', '.join(CHECK_IDS)}")
            out.append(item)
    return tuple(out)


def _size(value: str | None, option: str) -> int | None:
    from gpudiag.units import parse_size

    if value is None:
        return None
    try:
        return parse_size(value)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}") from None


def _options(
    expect_gpus: int | None,
    min_free: str | None,
    temp_margin: int,
    require_driver: str | None,
    require_cuda: str | None,
    require_capability: str | None,
    require_gpu: str | None,
    require_torch: str | None,
    allow_processes: bool,
    python: str | None,
) -> "Options":
    from gpudiag.checks import Options

    if expect_gpus is not None and expect_gpus < 0:
        raise UsageError(f"--expect-gpus {expect_gpus}: must be 0 or more")
    if not 0 <= temp_margin <= 50:
        raise UsageError(f"--temp-margin {temp_margin}: expected 0 to 50 (°C below the GPU's slowdown temperature)")
    if require_gpu is not None and not require_gpu.strip():
        raise UsageError("--require-gpu: expected part of a GPU name, e.g. H100")
    if require_torch is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(require_torch)
        except InvalidSpecifier:
            raise UsageError(f"--require-torch {require_torch!r}: expected a specifier like '>=2.3'") from None
    return Options(
        expect_gpus=expect_gpus,
        min_free_bytes=_size(min_free, "--min-free"),
        temp_margin_c=temp_margin,
        require_driver=_version_option(require_driver, "--require-driver", "550 or 550.54.15"),
        require_cuda=_version_option(require_cuda, "--require-cuda", "12.4"),
        require_capability=_version_option(require_capability, "--require-capability", "8.0"),
        require_gpu=require_gpu.strip() if require_gpu is not None else None,
        require_torch=require_torch,
        allow_processes=allow_processes,
        torch_expected=python is not None,
    )


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
) -> None:
    """Pre-job health and CUDA/driver/PyTorch compatibility checks, with exit codes for CI and schedulers.

    Exit codes: 0 ready (every check passed or was skipped), 1 a check failed (or warned, with
    --strict), 2 usage error, 5 a requested check could not run and nothing failed.
    """
    from gpudiag.checks import Status
    from gpudiag.checks import rules as check_rules
    from gpudiag.checks.gather import Plan, run

    s = settings(ctx)
    if npd and json_output:
        raise UsageError("--npd and --json are two different outputs; pick one")
    if npd and mode is not None:
        raise UsageError("--npd and --mode are two different outputs; pick one")
    scheduled_mode = None
    if mode is not None:
        from gpudiag.fleet import scheduled

        if json_output or junit is not None:
            raise UsageError("--mode gives an exit status and one line on stderr; leave out --json and --junit")
        scheduled_mode = scheduled.arm(*scheduled.parse(mode, deadline))
        ctx.call_on_close(scheduled_mode.cancel)  # also when the command raises (and in tests' own process)
        quick, no_torch = quick or python is None, no_torch or python is None
    elif deadline is not None:
        raise UsageError("--deadline goes with --mode prolog or --mode health-check")
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout}: must be a positive number of seconds")
    if python is not None:
        if s.replay:
            raise UsageError("--python asks a live environment's torch; a replay uses the torch recorded in it")
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise UsageError(f"--python {python!r}: not an executable file")
        if no_torch:
            raise UsageError("--python and --no-torch contradict each other")
    options = _options(
        expect_gpus,
        min_free,
        temp_margin,
        require_driver,
        require_cuda,
        require_capability,
        require_gpu,
        require_torch,
        allow_processes,
        python,
    )
    only_ids, skip_ids = _ids(only, "--only"), _ids(skip, "--skip")
    selected = {c.id for c in check_rules.CHECKS if check_rules.selected(c.id, only_ids, skip_ids)}
    if not selected:  # a run that checks nothing must not say READY
        skipping = f"--skip {','.join(skip_ids)}"
        raise UsageError(
            f"--only {','.join(only_ids)} with {skipping} selects no check"
            if only_ids
            else f"{skipping} skips every check"
        )
    functional_wanted = "func.gpu" in selected and not quick
    torch_wanted = (
        functional_wanted
        or any(cid.startswith("compat.") for cid in selected)
        or bool("req.cuda" in selected and options.require_cuda)
        or bool("req.torch" in selected and options.require_torch)
    )
    checked = run(
        Plan(
            replay=s.replay,
            torch_off="--no-torch: torch not started"
            if no_torch
            else ("" if torch_wanted else "not needed by the selected checks"),
            functional_off="--quick" if quick else ("" if functional_wanted else "not selected"),
            python=python,
            timeout=timeout,
            could_not_run=COULD_NOT_RUN,
        ),
        options,
        only_ids,
        skip_ids,
    )
    facts, results, notes = checked.facts, list(checked.results), list(checked.notes)
    if not results:  # e.g. `--only req` without any --require-… option
        raise UsageError(
            f"--only {','.join(only_ids)}: the selected checks have nothing to check "
            "(the req.* checks need their --require-… option)"
        )
    from gpudiag.render import check_view  # after the run: the torch child starts without waiting for rich

    statuses = {r.status for r in results}
    if Status.FAIL in statuses or (strict and Status.WARN in statuses):
        code = ExitCode.FAILED
    elif notes:
        code = COULD_NOT_RUN
    else:
        code = ExitCode.OK

    if textfile is not None:
        from gpudiag.fleet.textfile import write_check

        write_check(textfile, results, facts.machine, int(code))
    if npd:
        from gpudiag.fleet.textfile import npd_verdict

        line, npd_code = npd_verdict(results, strict, notes)
        echo(line, one_line=True)
        raise typer.Exit(npd_code)
    if scheduled_mode is not None:
        echo(scheduled.line(facts, results, notes, int(code), strict), err=True, one_line=True)
        raise typer.Exit(int(code))
    if junit is not None:
        try:
            junit.write_text(check_view.to_junit(facts, results, strict, notes))
        except OSError as exc:
            raise GpudiagError(f"cannot write {junit}: {exc.strerror or exc}", ExitCode.USAGE) from None
    if json_output:
        from gpudiag.fleet.identity import slurm_node

        data = check_view.to_json(facts, results, strict, int(code), notes, slurm_node())
        typer.echo(json.dumps(data, indent=2))
    else:
        make_console(s).print(check_view.render(facts, results, strict, notes))
    for note in notes:
        echo(f"gpudiag: could not run: {note}", err=True, one_line=True)
    raise typer.Exit(int(code))
