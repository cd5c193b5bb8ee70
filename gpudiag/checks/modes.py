"""`check --mode prolog|health-check` as options: the mode, its deadline, and what it judges.

HealthCheckProgram is killed after 60 s and NHC gives each command 5 s by default, so health-check
gives up after 4 s; a Prolog delays the job, so prolog gives up after 20 s. `--deadline` changes
either. Here the requirements (``--require-…``) are the site's, not a job's: a user cannot give
the Prolog or the health check options, so a node that does not meet what the admin requires
judges the node (:func:`scope`). A health check runs outside any job, so it judges node-scope
checks only, and refuses the options that only job-scope checks read. The line and the deadline's
end are the scheduler's side, :mod:`gpudiag.fleet.scheduled`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag.errors import UsageError

if TYPE_CHECKING:
    from gpudiag.checks import Scope
    from gpudiag.checks.base import Check


class Mode(str, enum.Enum):
    PROLOG = "prolog"
    HEALTH_CHECK = "health-check"


DEADLINES = {Mode.PROLOG: 20.0, Mode.HEALTH_CHECK: 4.0}


def parse(mode: str, deadline: float | None) -> tuple[Mode, float]:
    try:
        chosen = Mode(mode)
    except ValueError:
        raise UsageError(f"--mode {mode!r}: use prolog or health-check") from None
    seconds = DEADLINES[chosen] if deadline is None else deadline
    if not 0 < seconds <= 3600:
        raise UsageError(f"--deadline {deadline}: expected seconds, more than 0")
    return chosen, seconds


def scope(check: Check) -> Scope:
    """A check's scope in a scheduler's hook: as declared, but a requirement is the site's policy
    (only an admin gives the Prolog or the health check options), so it judges the node."""
    from gpudiag.checks import Scope
    from gpudiag.checks.base import REQUIRE

    return Scope.NODE if check.area == REQUIRE else check.scope


def node_checks_only(only: tuple[str, ...], job_options: Sequence[str]) -> tuple[str, ...]:
    """For a health check: the job-scope check ids to skip. Asking for a job-scope check (an option
    only it reads, or `--only` naming nothing else) is a usage error, not a check silently not run."""
    from gpudiag.checks import Scope
    from gpudiag.checks.rules import CHECKS, matches

    if job_options:
        raise UsageError(
            f"{job_options[0]} is judged by a job-scope check, which never fails a node; --mode health-check "
            "runs outside any job: give it to the Prolog (--mode prolog fails the job) or to the job itself"
        )
    job = tuple(c.id for c in CHECKS if scope(c) is Scope.JOB)
    for pattern in only:
        named = [c for c in CHECKS if matches(c.id, pattern)]
        if named and all(scope(c) is Scope.JOB for c in named):
            raise UsageError(
                f"--only {pattern}: job-scope checks (the job's environment or torch); "
                "--mode health-check runs the node's checks only"
            )
    return job
