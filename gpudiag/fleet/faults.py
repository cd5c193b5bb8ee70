"""Drain reasons an operator can act on, and the remedies a fleet report names.

A reason names the most severe failure, the GPU it is about and what to do:
``health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)``, behind the prefix of
whoever wrote it (``gpudiag:`` for `gpudiag drain`, ``gpudiag prolog:``, ``gpudiag health-check:``).
It is *steady*: two runs over the same fault give the same reason, so a node is not re-drained
(which would reset the time `sinfo -R` shows) each time a count or a temperature moves. Only
node-scope failures make a drain reason; a job-scope one makes the job's (same format).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

PREFIX = "gpudiag:"  # `gpudiag drain`, from a fleet report
PROLOG_PREFIX = "gpudiag prolog:"  # deploy/slurm/slurm-prolog.sh
HEALTH_CHECK_PREFIX = "gpudiag health-check:"  # deploy/slurm/slurm-healthcheck.sh
SOURCES = (PREFIX, PROLOG_PREFIX, HEALTH_CHECK_PREFIX)  # a reason starting with one of these is gpudiag's
# scontrol 22.05 took a 5,000-character reason; 200 keeps `sinfo -R` and `scontrol show node` readable.
MAX_REASON = 200
MAX_BODY = MAX_REASON - len(HEALTH_CHECK_PREFIX) - 1  # what follows the longest prefix

# Most severe first: what decides the node's fate comes first in a reason.
SEVERITY = ("rma", "reseat", "reboot", "reset", "cooling", "fix_config", "stop_processes", "fix_job")
ACTION_WORDS = {
    "rma": "RMA",
    "reseat": "reseat",
    "reboot": "reboot",
    "reset": "reset",
    "cooling": "check cooling",
    "fix_config": "fix config",
    "stop_processes": "stop processes",
    "fix_job": "fix job",
}

# Each check's declaration says whether its finding is steady (names, modes, versions, paths: quoted)
# or volatile (error counts, temperatures, PIDs, measured rates: stated without them, in its words);
# these are the failures a node file carries that no check declares.
_OTHER_FACTS = {"bench-transfer": "transfer benchmark failed"}
_OTHER_KINDS = frozenset({"bench-transfer"})


class Fault(Protocol):
    """One failed result: a `check` result, or a failure read from a node file (nodefiles.Failure)."""

    @property
    def check(self) -> str: ...
    @property
    def target(self) -> str: ...  # "GPU 3", "" for the node
    @property
    def finding(self) -> str: ...
    @property
    def scope(self) -> str: ...  # "node" or "job"
    @property
    def action(self) -> str: ...  # "reset", ... ("" unknown)
    @property
    def uuid(self) -> str: ...  # the GPU's UUID ("" unknown)


@dataclass(frozen=True)
class Failed:
    """A :class:`Fault` built from a check result (`check --mode`)."""

    check: str
    target: str
    finding: str
    scope: str
    action: str
    uuid: str = ""


def is_ours(reason: str) -> bool:
    """Whether a Slurm reason was written by gpudiag (by any of its integrations)."""
    return reason.startswith(SOURCES)


def escape(text: str) -> str:
    """Text from outside (node files, Slurm reasons) made safe for a terminal, a shell comment
    and a Slurm reason: every character that does not print is written as an escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def node_faults(faults: Iterable[Fault]) -> list[Fault]:
    """The failures that may drain a node (a missing scope is taken as the node's: never falsely green)."""
    return [f for f in faults if f.scope != "job"]


def reason(faults: Iterable[Fault], prefix: str = PREFIX) -> str:
    """``gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)``."""
    return f"{prefix} {body(faults, MAX_REASON - len(prefix) - 1)}"


def body(faults: Iterable[Fault], limit: int = MAX_BODY) -> str:
    """A reason without its prefix: the most severe failure, then how many more; "" for none.

    At most ``limit`` characters: the fact is shortened (with "…"), never the action."""
    unique: dict[tuple[str, str], Fault] = {}
    for f in faults:
        unique.setdefault((f.check, f.target), f)
    if not unique:
        return ""
    first = min(unique.values(), key=_severity)
    head = escape(first.check)
    if first.target:
        head += " " + escape(first.target.replace(" ", ""))
    if first.uuid:
        head += " " + escape(first.uuid[:12])  # GPU- and 8 hex digits: unique in any fleet, short
    word = ACTION_WORDS.get(first.action, "")
    tail = (f"; {word}" if word else "") + (f" (+{len(unique) - 1} more)" if len(unique) > 1 else "")
    fact = escape(steady_fact(first.check, first.action, first.finding))
    room = limit - len(head) - len(tail) - 2
    if len(fact) > room:
        fact = fact[: max(room - 1, 0)] + "…"
    return f"{head}: {fact}{tail}"[:limit]


def steady_fact(check: str, action: str, finding: str) -> str:
    """What is wrong, without figures that change between runs over the same fault: a volatile
    finding's declared words (a first clause without figures where it names the kind of failure:
    "memory pattern read back wrong", "wrong matmul results"), else the finding's first clause."""
    from gpudiag.checks.base import Volatile
    from gpudiag.checks.rules import BY_ID

    declared = BY_ID[check].finding if check in BY_ID else None
    if isinstance(declared, Volatile):
        fact, kinds = (
            dict((a.value, words) for a, words in declared.by_action).get(action, declared.fact),
            declared.kinds,
        )
    elif check in _OTHER_FACTS:
        fact, kinds = _OTHER_FACTS[check], check in _OTHER_KINDS
    else:
        return first_clause(finding)
    clause = first_clause(finding)
    return clause if kinds and not any(c.isdigit() for c in clause) else fact


_SHORTEST_CLAUSE = 12


def first_clause(finding: str) -> str:
    """A finding up to its first ': ' or '; ' outside parentheses (what follows explains or
    advises), unless that leaves a word or two (``set: CUDA_LAUNCH_BLOCKING=1``)."""
    depth = 0
    for i, c in enumerate(finding):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(depth - 1, 0)
        elif c in ":;" and depth == 0 and finding[i + 1 : i + 2] == " " and i >= _SHORTEST_CLAUSE:
            return finding[:i]
    return finding


def _severity(f: Fault) -> tuple[int, int, int, str]:
    """Most severe action first, then the registry's check order, then the GPU's index."""
    from gpudiag.checks.rules import CHECK_IDS

    rank = SEVERITY.index(f.action) if f.action in SEVERITY else len(SEVERITY)
    order = CHECK_IDS.index(f.check) if f.check in CHECK_IDS else len(CHECK_IDS)
    number = f.target.rsplit(" ", 1)[-1]
    return rank, order, int(number) if number.isdigit() else -1, f.target


# --- the remedy a fleet report shows beside a node ----------------------------------------------

# The checks whose failure the remedy is about.
REMEDY_CHECKS = ("health.recovery_action", "health.row_remap")

# NVML_GPU_RECOVERY_ACTION_*: 1 GPU reset, 2 node reboot, 3 drain peer-to-peer, 4 drain and reset.
_ACTIONS = {1: "GPU reset needed", 2: "node reboot needed", 3: "drain P2P", 4: "GPU reset needed"}


def remedy(recovery_actions: list[int | None], remap_pending: list[bool | None]) -> str:
    """What else a fix needs ("GPU reset needed", "node reboot needed"; "" for nothing), from NVML's
    recovery action and pending row remaps."""
    needs = {_ACTIONS.get(a, f"recovery action {a}") for a in recovery_actions if a}
    if any(remap_pending):
        needs.add("GPU reset needed")
    if "node reboot needed" in needs:  # a reboot resets every GPU too
        needs.discard("GPU reset needed")
    return ", ".join(sorted(needs))
