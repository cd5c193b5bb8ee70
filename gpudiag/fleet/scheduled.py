"""`check --mode prolog|health-check`: what Slurm's Prolog and HealthCheckProgram (or NHC) need.

An exit status and one line on stderr (slurmd logs it), no torch unless `--python` asks for it,
and a hard deadline: a hung driver must not hang the scheduler. HealthCheckProgram is killed
after 60 s and NHC gives each command 5 s by default, so health-check gives up after 4 s; a
Prolog delays the job, so prolog gives up after 20 s. `--deadline` changes either.
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
from gpudiag.fleet.faults import remedy

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult, Facts

MAX_LINE = 250


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


def line(facts: Facts, results: Sequence[CheckResult], notes: Sequence[str], code: int, strict: bool) -> str:
    """``gpudiag: READY (40 passed, 3 skipped)``, ``gpudiag: NOT READY: health.ecc,health.row_remap; GPU reset needed``,
    ``gpudiag: UNKNOWN: could not run: ...`` or ``gpudiag: UNKNOWN: nothing checked: ...``."""
    if code == ExitCode.OK:
        passed = sum(1 for r in results if r.status.value == "PASS")
        skipped = sum(1 for r in results if r.status.value == "SKIP")
        text = f"gpudiag: READY ({passed} passed, {skipped} skipped)"
    elif code == ExitCode.NOTHING_CHECKED:
        ids = dict.fromkeys(r.id for r in results)
        text = f"gpudiag: UNKNOWN: nothing checked: every selected check was skipped ({','.join(ids)})"
    elif code == ExitCode.FAILED:
        bad = ("FAIL", "WARN") if strict else ("FAIL",)
        failed = dict.fromkeys(r.id for r in results if r.status.value in bad)
        gpus = facts.machine.gpus
        rows = [g.remapped_rows.value for g in gpus]
        needs = remedy([g.recovery_action.value for g in gpus], [r.pending if r else None for r in rows])
        text = f"gpudiag: NOT READY: {','.join(failed)}" + (f"; {needs}" if needs else "")
    else:
        text = f"gpudiag: UNKNOWN: could not run: {'; '.join(notes) or f'exit {code}'}"
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"
