"""The registry: every declared check, in the order they are shown; selection and running.

A check is declared once, next to its rule, with :func:`gpudiag.checks.base.check` (id, area,
what it judges and when it fails, the readings it looks at, the statuses it can give, scope,
operator action, whether its finding is steady, whether it needs torch or the GPUs, whether the
exporter judges it); everything else (``--only``/``--skip``, the facts `check` reads, the torch
decision, the scheduler modes, the exporter, drain reasons, the docs' table) reads :data:`CHECKS`.
Ids are stable: scripts select them with ``--only``/``--skip`` and read them in JSON/JUnit. Each
rule takes (Facts, Options) and returns results; none touches the outside. Thresholds cite their
sources where they are defined.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterable
from typing import Any

import msgspec

# Importing the rule modules declares their checks.
from gpudiag.checks import (  # noqa: F401
    CheckResult,
    Facts,
    Options,
    Status,
    config,
    deep_rules,  # the deep diagnostics, check --level 2-4
    driver,
    health,
    requirements,
    software,
)
from gpudiag.checks.base import AREAS, DECLARED, Check, groups
from gpudiag.errors import DEBUG_ENV
from gpudiag.model import Reading, Reason

CHECKS: tuple[Check, ...] = tuple(sorted(DECLARED, key=lambda c: AREAS.index(c.area)))  # stable: declaration order
CHECK_IDS = tuple(c.id for c in CHECKS)
BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}
EXPORTER_CHECKS = tuple(c.id for c in CHECKS if c.exporter)
GROUPS = groups(CHECKS)  # the fact groups `check` reads: those its rules look at, no other


def matches(check_id: str, pattern: str) -> bool:
    """A pattern is a check id or a prefix ending at a dot: ``health`` selects ``health.ecc``."""
    return check_id == pattern or check_id.startswith(pattern.rstrip(".") + ".")


def selected(check_id: str, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> bool:
    """Whether ``--only``/``--skip`` patterns keep this check."""
    if only and not any(matches(check_id, p) for p in only):
        return False
    return not any(matches(check_id, p) for p in skip)


def at_level(check: Check, level: int) -> bool:
    """Whether `check --level` ``level`` runs this check (level 1: the checks `check` always ran)."""
    return check.level <= level


def deeper(patterns: tuple[str, ...], level: int) -> int | None:
    """The lowest level above ``level`` whose checks these ``--only`` patterns name, if they name
    none at ``level`` (``--only mem.test`` at level 1 needs level 2); None otherwise."""
    named = [c for c in CHECKS if any(matches(c.id, p) for p in patterns)]
    if not named or any(at_level(c, level) for c in named):
        return None
    return min(c.level for c in named)


def action(r: CheckResult) -> str | None:
    """What an operator does about a failure or warning (None when there is nothing to do): the
    result's own action, else its check's."""
    if r.status not in (Status.FAIL, Status.WARN):
        return None
    return (r.action or BY_ID[r.id].action).value


def needs_torch(checks: Iterable[Check], options: Options, gpu_work: bool) -> bool:
    """Whether any of these checks judges torch's runtime view (``gpu_work``: the GPU tests run)."""
    return any(c.needs_torch(options) and (gpu_work or not c.needs_gpu) for c in checks)


# chosen()'s answers, by selection: the registry they were chosen from, and the checks.
_CHOSEN: dict[tuple[Any, ...], tuple[tuple[Check, ...], tuple[Check, ...]]] = {}


def chosen(only: tuple[str, ...], skip: tuple[str, ...], level: int) -> tuple[Check, ...]:
    """The checks :func:`run` runs, in the registry's order: worked out once per selection and
    registry (the exporter judges its checks every scrape; matching ids against patterns cost more)."""
    kept = _CHOSEN.get((only, skip, level))
    if kept is None or kept[0] is not CHECKS:
        picked = tuple(c for c in CHECKS if at_level(c, level) and selected(c.id, only, skip))
        kept = _CHOSEN[(only, skip, level)] = (CHECKS, picked)
    return kept[1]


def run(
    facts: Facts,
    options: Options,
    only: tuple[str, ...] = (),
    skip: tuple[str, ...] = (),
    level: int = 1,
    failed: list[str] | None = None,
) -> list[CheckResult]:
    """Every selected check's results, in the registry's order (those of ``level`` and below). Each
    rule runs on its own (as node_exporter isolates its collectors): a rule that raises is that
    check's could-not-run result, with the error, and a line in ``failed``; the others still run."""
    results: list[CheckResult] = []
    for check in chosen(tuple(only), tuple(skip), level):
        try:
            judged = check.rule(facts, options)
        except Exception as exc:  # a bug in one rule costs that check, never the run
            results.append(could_not_run(check, exc))
            if failed is not None:
                failed.append(f"check {check.id}: {type(exc).__name__}: {exc}")
            continue
        results.extend(judged)
        if failed is not None:
            failed.extend(unread(check, facts, judged))
    return results


def unread(check: Check, facts: Facts, results: list[CheckResult]) -> list[str]:
    """A line per GPU the check skipped because a reading it looks at came back as an error (NVML's
    unknown error, an answer gpudiag could not decode): it could not judge that GPU, which is not a
    skip (``ECC not supported``) and must not let the run say READY (a GPU with uncorrected ECC errors
    whose counters came back garbled read READY)."""
    from gpudiag.readings import reading_at

    gpus = {gpu.label: gpu for gpu in facts.machine.gpus}
    out = []
    for r in results:
        gpu = gpus.get(r.target) if r.status is Status.SKIP else None
        if gpu is not None and any(_an_error(reading_at(gpu, key)) for key in check.reads):
            out.append(f"check {check.id} {r.target}: {r.finding}")
    return out


def _an_error(reading: Reading[Any]) -> bool:
    """Whether a reading, or one of a composite reading's parts, is an error."""
    if reading.reason is Reason.UNKNOWN_ERROR:
        return True
    value = reading.value
    return isinstance(value, msgspec.Struct) and any(
        isinstance(part := getattr(value, name), Reading) and part.reason is Reason.UNKNOWN_ERROR
        for name in value.__struct_fields__
    )


def could_not_run(check: Check, exc: BaseException) -> CheckResult:
    """The result of a check whose rule raised: nothing verified (SKIP), the error as its finding;
    the traceback on stderr under ``--debug``."""
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(exc, file=sys.stderr)
    error = f"{type(exc).__name__}: {exc}"[:300]
    return CheckResult(
        check.id, check.area, Status.SKIP, f"could not run: {error}", "a bug in gpudiag: report it with --debug output"
    )
