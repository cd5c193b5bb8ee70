"""`check --mode prolog|health-check`: what Slurm's Prolog and HealthCheckProgram (or NHC) need.

An exit status and one line on stderr (slurmd logs it), no torch unless `--python` asks for it,
and a hard deadline: a hung driver must not hang the scheduler. HealthCheckProgram is killed
after 60 s and NHC gives each command 5 s by default, so health-check gives up after 4 s; a
Prolog delays the job, so prolog gives up after 20 s. `--deadline` changes either.

Scope decides what a failure means. A node-scope failure (hardware, driver, the node's
configuration) is ``gpudiag: NOT READY: <reason>``: drain the node. A job-scope one (the job's
environment, its torch) is ``gpudiag: JOB NOT READY: <reason>``: fail that job and leave the node
in service. Here the requirements (``--require-…``) are the site's, not a job's: a user cannot
give the Prolog or the health check options, so a node that does not meet what the admin
requires judges the node (:func:`scope`) and is drained, rather than failing every job sent to
it. A health check runs outside any job, so it judges node-scope checks only, and refuses the
options that only job-scope checks read.
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag import edge
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import faults

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult, Facts, Scope
    from gpudiag.checks.base import Check

MAX_LINE = 250

NOT_READY = "gpudiag: NOT READY: "  # node-scope failures: drain the node
JOB_NOT_READY = "gpudiag: JOB NOT READY: "  # job-scope failures only: fail the job, not the node


class Mode(str, enum.Enum):
    PROLOG = "prolog"
    HEALTH_CHECK = "health-check"


DEADLINES = {Mode.PROLOG: 20.0, Mode.HEALTH_CHECK: 4.0}
DEADLINE_CODE = ExitCode.CHECK_INCOMPLETE  # no verdict: the same as "could not run"


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


def arm(mode: Mode, seconds: float) -> threading.Timer:
    """Exit with DEADLINE_CODE and one line after ``seconds``, even when the main thread is stuck in NVML."""

    def fire() -> None:
        edge.clean_up()  # a torch child (--python) must not outlive the deadline
        edge.say(f"UNKNOWN: no verdict within {seconds:g} s (--mode {mode.value}; driver hung?)")
        os._exit(int(DEADLINE_CODE))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def failures(facts: Facts, results: Sequence[CheckResult], strict: bool) -> list[faults.Failed]:
    """The failed results (warnings too with --strict), with their scope, action and GPU UUID."""
    from gpudiag.checks.rules import BY_ID, action

    bad = ("FAIL", "WARN") if strict else ("FAIL",)
    uuids = {g.label: g.uuid.value for g in facts.machine.gpus}
    return [
        faults.Failed(r.id, r.target, r.finding, scope(BY_ID[r.id]).value, action(r) or "", uuids.get(r.target) or "")
        for r in results
        if r.status.value in bad
    ]


def line(facts: Facts, results: Sequence[CheckResult], notes: Sequence[str], code: int, strict: bool) -> str:
    """``gpudiag: READY (40 passed, 3 skipped)``,
    ``gpudiag: NOT READY: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)``
    (node-scope failures: the text after the colon is the drain reason's),
    ``gpudiag: JOB NOT READY: env.visible_devices: CUDA_VISIBLE_DEVICES='-1' leaves no device; fix job``
    (job-scope failures only), ``gpudiag: UNKNOWN: could not run: ...`` or
    ``gpudiag: UNKNOWN: nothing checked: ...``."""
    if code == ExitCode.OK:
        passed = sum(1 for r in results if r.status.value == "PASS")
        skipped = sum(1 for r in results if r.status.value == "SKIP")
        text = f"gpudiag: READY ({passed} passed, {skipped} skipped)"
    elif code == ExitCode.NOTHING_CHECKED:
        ids = dict.fromkeys(r.id for r in results)
        text = f"gpudiag: UNKNOWN: nothing checked: every selected check was skipped ({','.join(ids)})"
    elif code == ExitCode.FAILED:
        failed = failures(facts, results, strict)
        node = faults.node_faults(failed)
        text = NOT_READY + faults.body(node) if node else JOB_NOT_READY + faults.body(failed)
    else:
        text = f"gpudiag: UNKNOWN: could not run: {faults.escape('; '.join(notes)) or f'exit {code}'}"
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"
