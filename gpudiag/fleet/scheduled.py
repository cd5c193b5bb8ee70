"""`check --mode prolog|health-check`: what Slurm's Prolog and HealthCheckProgram (or NHC) need.

An exit status and one line on stderr (slurmd logs it), no torch unless `--python` asks for it,
and a hard deadline: a hung driver must not hang the scheduler. HealthCheckProgram is killed
after 60 s and NHC gives each command 5 s by default, so health-check gives up after 4 s; a
Prolog delays the job, so prolog gives up after 20 s (the mode, its deadline and what a health
check judges are check's options: :mod:`gpudiag.checks.modes`).

Scope decides what a failure means. A node-scope failure (hardware, driver, the node's
configuration) is ``gpudiag: NOT READY: <reason>``: drain the node. A job-scope one (the job's
environment, its torch) is ``gpudiag: JOB NOT READY: <reason>``: fail that job and leave the node
in service. A requirement (``--require-…``) is the site's here, so it judges the node
(:func:`gpudiag.checks.modes.scope`) and is drained, rather than failing every job sent to it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudiag import edge
from gpudiag.checks.modes import Mode, scope
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import faults

if TYPE_CHECKING:
    from gpudiag.checks import CheckResult, Facts

MAX_LINE = 250

NOT_READY = "gpudiag: NOT READY: "  # node-scope failures: drain the node
JOB_NOT_READY = "gpudiag: JOB NOT READY: "  # job-scope failures only: fail the job, not the node
DEADLINE_CODE = ExitCode.CHECK_INCOMPLETE  # no verdict: the same as "could not run"


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
