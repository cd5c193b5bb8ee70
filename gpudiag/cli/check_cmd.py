"""`gpudiag check`: can a job run here, and if not, why and what to do.

Exit codes (schedulers rely on them): 0 no check failed and at least one was not skipped
(warnings allowed unless --strict); 1 a check failed; 2 usage error; COULD_NOT_RUN when gpudiag
could not run a requested check (or any check) and nothing failed; 7 every selected check was
skipped. Any other code (70 internal error, 128+N a signal) also means the verdict is unknown.
"""

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpudiag.checks.deep.levels import BUDGET_HELP, FORCE_HELP, LEVEL_HELP
from gpudiag.cli.common import echo, handle_errors, make_console, seconds, settings, size
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult, Options
    from gpudiag.cli.common import Settings
    from gpudiag.render.deep_progress import TerminalProgress

# "check could not run (all or part of it) and nothing failed". The table's CHECK_INCOMPLETE
# (5) is that code; the lead may rename it (e.g. CHECK_COULD_NOT_RUN) — this is the one use.
COULD_NOT_RUN = ExitCode.CHECK_INCOMPLETE


def _version_option(value: str | None, option: str, example: str) -> str | None:
    from gpudiag.parsing import parse_version, shorten

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
        min_free_bytes=size(min_free, "--min-free"),
        temp_margin_c=temp_margin,
        require_driver=_version_option(require_driver, "--require-driver", "550 or 550.54.15"),
        require_cuda=_version_option(require_cuda, "--require-cuda", "12.4"),
        require_capability=_version_option(require_capability, "--require-capability", "8.0"),
        require_gpu=require_gpu.strip() if require_gpu is not None else None,
        require_torch=require_torch,
        allow_processes=allow_processes,
        torch_expected=python is not None,
    )


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
    from gpudiag.checks import Status
    from gpudiag.checks import rules as check_rules
    from gpudiag.checks.deep.levels import usage as level_usage
    from gpudiag.checks.gather import Plan, run

    s = settings(ctx)
    level_usage(level, budget, force, quick, no_torch, mode, bool(s.replay))
    if npd and json_output:
        raise UsageError("--npd and --json are two different outputs; pick one")
    if npd and mode is not None:
        raise UsageError("--npd and --mode are two different outputs; pick one")
    scheduled_mode = None
    asked_quick, asked_no_torch = quick, no_torch
    health_check = False  # --mode health-check: outside any job, the node's own checks only
    if mode is not None:
        from gpudiag.fleet import scheduled

        if json_output or junit is not None:
            raise UsageError("--mode gives an exit status and one line on stderr; leave out --json and --junit")
        chosen, limit = scheduled.parse(mode, deadline)
        health_check = chosen is scheduled.Mode.HEALTH_CHECK
        scheduled_mode = scheduled.arm(chosen, limit)
        ctx.call_on_close(scheduled_mode.cancel)  # also when the command raises (and in tests' own process)
        quick, no_torch = quick or python is None, no_torch or python is None
    elif deadline is not None:
        raise UsageError("--deadline goes with --mode prolog or --mode health-check")
    seconds(timeout, "--timeout")
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
    if health_check:
        job_options = ["--min-free"] if min_free is not None else []  # the requirements are the site's here
        skip_ids += scheduled.node_checks_only(only_ids, job_options)
    selected = [
        c
        for c in check_rules.CHECKS
        if check_rules.at_level(c, level) and check_rules.selected(c.id, only_ids, skip_ids)
    ]
    if not selected and (needed := check_rules.deeper(only_ids, level)) is not None:
        raise UsageError(f"--only {','.join(only_ids)}: level-{needed} checks; add --level {needed}")
    if not selected:  # a run that checks nothing must not say READY
        skipping = f"--skip {','.join(skip_ids)}"
        raise UsageError(
            f"--only {','.join(only_ids)} with {skipping} selects no check"
            if only_ids
            else f"{skipping} skips every check"
        )
    if all(c.needs_gpu for c in selected) and (quick or no_torch):  # known before anything runs, as `--only req` is
        why = "--quick" if asked_quick else "--no-torch" if asked_no_torch else f"--mode {mode} without --python"
        raise UsageError(f"--only {','.join(only_ids)} selects only the functional test, which {why} leaves out")
    functional_wanted = not quick and any(c.needs_gpu and c.level == 1 for c in selected)
    deep = tuple(c.id for c in selected if c.level > 1)
    torch_wanted = check_rules.needs_torch(selected, options, gpu_work=functional_wanted or bool(deep))
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
            level=level,
            deep=deep,
            budget=budget,
            force=force,
        ),
        options,
        only_ids,
        skip_ids,
        _progress(s) if deep else None,  # minutes of GPU tests: how far they are, on a terminal
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
    elif statuses == {Status.SKIP}:  # a run that verified nothing must not say READY
        code = ExitCode.NOTHING_CHECKED
    else:
        code = ExitCode.OK

    if textfile is not None:
        from gpudiag.export.textfile import write_check

        write_check(textfile, results, facts.machine, int(code))
    if npd:
        from gpudiag.export import pci
        from gpudiag.export.textfile import gpu_absent, npd_verdict

        # A replayed machine's PCI bus is not this host's: only a live run asks it.
        no_gpu = s.replay is None and gpu_absent(facts.machine, pci.nvidia_gpus())
        line, npd_code = npd_verdict(results, strict, notes, no_gpu)
        echo(line, one_line=True)
        raise typer.Exit(npd_code)
    if scheduled_mode is not None:
        echo(scheduled.line(facts, results, notes, int(code), strict), err=True, one_line=True)
        raise typer.Exit(int(code))
    if junit is not None:
        from gpudiag.files import write_atomic

        write_atomic(junit, check_view.to_junit(facts, results, strict, notes))
    if json_output:
        from gpudiag.fleet.identity import slurm_node

        data = check_view.to_json(facts, results, strict, int(code), notes, slurm_node())
        typer.echo(json.dumps(data, indent=2))
    else:
        make_console(s).print(check_view.render(facts, results, strict, notes))
    for note in notes:
        echo(f"gpudiag: could not run: {note}", err=True, one_line=True)
    if code == ExitCode.NOTHING_CHECKED:
        echo(f"gpudiag: {check_view.NOTHING_CHECKED}: {_skipped(results)}", err=True, one_line=True)
    raise typer.Exit(int(code))


def _skipped(results: "list[CheckResult]") -> str:
    """``func.gpu (no CUDA device)``: each skipped check once, with why, for the one stderr line."""
    from gpudiag.parsing import shorten

    why = {r.id: r.finding for r in results}
    return "; ".join(f"{cid} ({shorten(finding, 80)})" for cid, finding in why.items())
