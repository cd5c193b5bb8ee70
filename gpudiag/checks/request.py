"""What `gpudiag check` was asked for: its options checked, alone, against each other and against the
checks' declarations, and the run they make. Every usage error is raised here, before anything runs.

The command hands over its options as a :class:`Request` (``cli.common.request_of``); :func:`prepare`
parses them once into what they mean and returns the :class:`Prepared` run (the gathering's Plan with
its Level and, for ``--level 2-4``, its DeepPlan; the rules' Options, ``--only``/``--skip``, the
scheduler's mode) or raises one :class:`~gpudiag.errors.UsageError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from gpudiag.checks import Options
from gpudiag.checks.deep import levels
from gpudiag.checks.gather import Plan
from gpudiag.errors import UsageError
from gpudiag.units import seconds, size

if TYPE_CHECKING:  # the scheduler's modes load with --mode only
    from gpudiag.fleet.scheduled import Mode


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag check`, as given (see the command for what each one means)."""

    quick: bool = False
    json_output: bool = False
    junit: Path | None = None
    strict: bool = False
    only: list[str] | None = None
    skip: list[str] | None = None
    expect_gpus: int | None = None
    min_free: str | None = None
    temp_margin: int = 5
    allow_processes: bool = False
    require_driver: str | None = None
    require_cuda: str | None = None
    require_capability: str | None = None
    require_gpu: str | None = None
    require_torch: str | None = None
    python: str | None = None
    no_torch: bool = False
    timeout: float = 90.0
    textfile: Path | None = None
    npd: bool = False
    mode: str | None = None
    deadline: float | None = None
    level: int = 1
    budget: float | None = None
    force: bool = False


class Prepared(msgspec.Struct, frozen=True):
    plan: Plan
    options: Options
    only: tuple[str, ...]
    skip: tuple[str, ...]
    schedule: tuple[Mode, float] | None  # --mode and its deadline, for the command to arm


def prepare(r: Request, replay: str | None) -> Prepared:
    """The run ``r`` asks for on this machine (or on ``replay``), or the first usage error in it."""
    from gpudiag.checks import rules

    level = levels.parse(r.level)
    levels.usage(level, r.budget, r.force, r.quick, r.no_torch, r.mode, bool(replay))
    if r.npd and r.json_output:
        raise UsageError("--npd and --json are two different outputs; pick one")
    if r.npd and r.mode is not None:
        raise UsageError("--npd and --mode are two different outputs; pick one")
    quick, no_torch, schedule = r.quick, r.no_torch, None
    health_check = False  # --mode health-check: outside any job, the node's own checks only
    if r.mode is not None:
        from gpudiag.fleet import scheduled

        if r.json_output or r.junit is not None:
            raise UsageError("--mode gives an exit status and one line on stderr; leave out --json and --junit")
        schedule = scheduled.parse(r.mode, r.deadline)
        health_check = schedule[0] is scheduled.Mode.HEALTH_CHECK
        quick, no_torch = quick or r.python is None, no_torch or r.python is None
    elif r.deadline is not None:
        raise UsageError("--deadline goes with --mode prolog or --mode health-check")
    seconds(r.timeout, "--timeout")
    if r.python is not None:
        _interpreter(r.python, replay, no_torch)
    options = _options(r)
    only, skip = _ids(r.only, "--only"), _ids(r.skip, "--skip")
    if health_check:
        from gpudiag.fleet.scheduled import node_checks_only

        job_options = ["--min-free"] if r.min_free is not None else []  # the requirements are the site's here
        skip += node_checks_only(only, job_options)
    selected = [c for c in rules.CHECKS if rules.at_level(c, level.number) and rules.selected(c.id, only, skip)]
    if not selected and (needed := rules.deeper(only, level.number)) is not None:
        raise UsageError(f"--only {','.join(only)}: level-{needed} checks; add --level {needed}")
    if not selected:  # a run that checks nothing must not say READY
        skipping = f"--skip {','.join(skip)}"
        raise UsageError(
            f"--only {','.join(only)} with {skipping} selects no check" if only else f"{skipping} skips every check"
        )
    if all(c.needs_gpu for c in selected) and (quick or no_torch):  # known before anything runs, as `--only req` is
        why = "--quick" if r.quick else "--no-torch" if r.no_torch else f"--mode {r.mode} without --python"
        raise UsageError(f"--only {','.join(only)} selects only the functional test, which {why} leaves out")
    functional_wanted = not quick and any(c.needs_gpu and c.level == 1 for c in selected)
    deep = tuple(c.id for c in selected if c.level > 1)
    torch_wanted = rules.needs_torch(selected, options, gpu_work=functional_wanted or bool(deep))
    plan = Plan(
        replay=replay,
        torch_off="--no-torch: torch not started"
        if no_torch
        else ("" if torch_wanted else "not needed by the selected checks"),
        functional_off="--quick" if quick else ("" if functional_wanted else "not selected"),
        python=r.python,
        timeout=r.timeout,
        level=level,
        deep=levels.DeepPlan(level, deep, r.budget if r.budget is not None else level.budget or 0.0, r.force)
        if deep
        else None,
    )
    return Prepared(plan, options, only, skip, schedule)


def _interpreter(python: str, replay: str | None, no_torch: bool) -> None:
    if replay:
        raise UsageError("--python asks a live environment's torch; a replay uses the torch recorded in it")
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise UsageError(f"--python {python!r}: not an executable file")
    if no_torch:
        raise UsageError("--python and --no-torch contradict each other")


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


def _options(r: Request) -> Options:
    if r.expect_gpus is not None and r.expect_gpus < 0:
        raise UsageError(f"--expect-gpus {r.expect_gpus}: must be 0 or more")
    if not 0 <= r.temp_margin <= 50:
        raise UsageError(f"--temp-margin {r.temp_margin}: expected 0 to 50 (°C below the GPU's slowdown temperature)")
    if r.require_gpu is not None and not r.require_gpu.strip():
        raise UsageError("--require-gpu: expected part of a GPU name, e.g. H100")
    if r.require_torch is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(r.require_torch)
        except InvalidSpecifier:
            raise UsageError(f"--require-torch {r.require_torch!r}: expected a specifier like '>=2.3'") from None
    return Options(
        expect_gpus=r.expect_gpus,
        min_free_bytes=size(r.min_free, "--min-free"),
        temp_margin_c=r.temp_margin,
        require_driver=_version_option(r.require_driver, "--require-driver", "550 or 550.54.15"),
        require_cuda=_version_option(r.require_cuda, "--require-cuda", "12.4"),
        require_capability=_version_option(r.require_capability, "--require-capability", "8.0"),
        require_gpu=r.require_gpu.strip() if r.require_gpu is not None else None,
        require_torch=r.require_torch,
        allow_processes=r.allow_processes,
        torch_expected=r.python is not None,
    )
