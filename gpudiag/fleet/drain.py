"""Drain the nodes a fleet report found not ready, the way NHC does it.

Rules: a node is drained with ``Reason="gpudiag: <check ids>[; GPU reset needed]"``; a node that
already has a reason set by someone else (an admin, Slurm, NHC) is left alone, so that nobody's
note is overwritten; ``resume`` undrains only ready nodes whose reason gpudiag wrote. Missing and
unreadable nodes are not drained: gpudiag does not know what is wrong with them.
"""

from __future__ import annotations

import enum
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet.faults import REMEDY_CHECKS
from gpudiag.fleet.report import SCHEMA, Report, State

PREFIX = "gpudiag:"  # every reason gpudiag writes starts with this; the Prolog example's too
MAX_REASON = 200  # keep `sinfo -R` readable
SCONTROL_TIMEOUT = 15.0

_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON = re.compile(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*@[^\]]*\])?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Target:
    """What the report says about one node."""

    node: str
    ready: bool
    checks: tuple[str, ...]  # failed check ids
    remedy: str = ""  # "GPU reset needed", ...


@dataclass(frozen=True)
class Current:
    """What Slurm says about the node now."""

    state: str  # e.g. IDLE+DRAIN
    reason: str  # "" when none

    @property
    def drained(self) -> bool:
        return any(flag in self.state.upper() for flag in ("DRAIN", "DOWN", "FAIL"))

    @property
    def ours(self) -> bool:
        return self.reason.startswith(PREFIX)


class Verb(str, enum.Enum):
    DRAIN = "drain"
    RESUME = "resume"
    KEEP = "keep"  # nothing to do, with the reason why


@dataclass(frozen=True)
class Action:
    node: str
    verb: Verb
    reason: str  # the drain reason, or why nothing is done

    def command(self) -> list[str]:
        if self.verb is Verb.DRAIN:
            return ["scontrol", "update", f"NodeName={self.node}", "State=DRAIN", f"Reason={self.reason}"]
        if self.verb is Verb.RESUME:
            return ["scontrol", "update", f"NodeName={self.node}", "State=RESUME"]
        return []

    def shell(self) -> str:
        """The command as NHC prints it: ``... Reason="gpudiag: ..."``."""
        *head, last = self.command()
        if self.verb is Verb.DRAIN:
            text = self.reason
            quoted = f'"{text}"' if not any(c in text for c in '"$`\\!') else shlex.quote(text)
            last = f"Reason={quoted}"
        return " ".join([*(shlex.quote(a) for a in head), last])


def reason(target: Target) -> str:
    """``gpudiag: health.ecc,health.row_remap; GPU reset needed`` (at most MAX_REASON characters)."""
    text = f"{PREFIX} {','.join(target.checks) or 'not ready'}"
    if target.remedy and any(c in REMEDY_CHECKS for c in target.checks):
        text += f"; {target.remedy}"
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def plan(targets: Iterable[Target], current: dict[str, Current | None], resume: bool) -> list[Action]:
    """The action per node. ``current[node]`` is None when Slurm does not know the node."""
    actions = []
    for t in targets:
        now = current.get(t.node)
        if now is None:
            if not t.ready:
                actions.append(Action(t.node, Verb.KEEP, "Slurm does not know this node"))
            continue
        if not t.ready:
            wanted = reason(t)
            if now.reason and not now.ours:
                actions.append(Action(t.node, Verb.KEEP, f"not drained: reason set by someone else: {now.reason}"))
            elif now.drained and now.reason == wanted:
                actions.append(Action(t.node, Verb.KEEP, f"already drained: {wanted}"))
            else:
                actions.append(Action(t.node, Verb.DRAIN, wanted))
        elif resume and now.drained and now.ours:
            actions.append(Action(t.node, Verb.RESUME, f"ready again (was: {now.reason})"))
        elif resume and now.drained and now.reason:
            actions.append(Action(t.node, Verb.KEEP, f"ready, left drained: reason set by someone else: {now.reason}"))
    return actions


def parse_show_node(text: str) -> Current | None:
    """State and reason from `scontrol show node NAME` (None when there is no such node)."""
    state = _STATE.search(text)
    if state is None:
        return None
    found = _REASON.search(text)
    reason_text = found.group(1).strip() if found else ""
    return Current(state.group(1), "" if reason_text in ("(null)", "none") else reason_text)


class Scontrol:
    """Runs `scontrol`; every failure is a one-line GpudiagError."""

    def __init__(self, program: str = "scontrol") -> None:
        path = shutil.which(program)
        if path is None:
            raise GpudiagError(f"{program} not found on PATH (is this a Slurm node or login node?)", ExitCode.FAILED)
        self.program = path

    def _run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [self.program, *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            raise GpudiagError(
                f"scontrol {' '.join(args[:2])} did not answer in {SCONTROL_TIMEOUT:.0f} s", ExitCode.FAILED
            ) from None
        except OSError as exc:
            raise GpudiagError(f"cannot run scontrol: {exc.strerror or exc}", ExitCode.FAILED) from None

    def show(self, node: str) -> Current | None:
        done = self._run(["show", "node", node])
        if done.returncode != 0:
            if "not found" in (done.stderr + done.stdout).lower() or "invalid node name" in done.stderr.lower():
                return None
            raise GpudiagError(f"scontrol show node {node}: {_first_line(done.stderr or done.stdout)}", ExitCode.FAILED)
        return parse_show_node(done.stdout)

    def update(self, action: Action) -> str:
        """Run the action's update; "" on success, else scontrol's message."""
        done = self._run(action.command()[1:])
        return "" if done.returncode == 0 else _first_line(done.stderr or done.stdout) or f"exit {done.returncode}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def from_report(report: Report) -> list[Target]:
    """Targets: every node that sent something readable; missing and unreadable ones are not judged."""
    return [
        Target(n.host, n.state is State.READY, tuple(n.failed_checks), n.remedy)
        for n in report.nodes
        if n.state in (State.READY, State.NOT_READY)
    ]


class _ReportFailure(msgspec.Struct):
    check: str


class _ReportNode(msgspec.Struct):
    node: str
    state: str
    failures: list[_ReportFailure]
    remedy: str | None = None


class _ReportFile(msgspec.Struct, tag_field="schema", tag=SCHEMA):
    nodes: list[_ReportNode]


def from_report_json(raw: bytes, where: str) -> list[Target]:
    """Targets from `gpudiag report --json` output; a file that is not one is a usage error."""
    try:
        doc = msgspec.json.decode(raw, type=_ReportFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UsageError(f"{where}: not a `gpudiag report --json` output ({SCHEMA}): {exc}") from None
    return [
        Target(n.node, n.state == "ready", tuple(dict.fromkeys(f.check for f in n.failures)), n.remedy or "")
        for n in doc.nodes
        if n.state in ("ready", "not_ready")
    ]


def is_report(raw: bytes) -> bool:
    """Whether a file is a report (else it is taken as a node output)."""
    head = raw[:4096]
    return b'"schema"' in head and SCHEMA.encode() in head


def load_targets(paths: list[str]) -> list[Target]:
    """From one `report --json` file, or from node files and directories as `report` reads them."""
    from gpudiag.fleet import nodefiles
    from gpudiag.fleet.report import build, node_files

    if len(paths) == 1 and not os.path.isdir(paths[0]):
        try:
            with open(paths[0], "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise UsageError(f"{paths[0]}: {exc.strerror or exc}") from None
        if is_report(raw):
            return from_report_json(raw, paths[0])
    return from_report(build(nodefiles.read(f) for f in node_files(paths)))


def carry_out(actions: Iterable[Action], scontrol: Scontrol | None) -> Iterator[tuple[str, bool]]:
    """(line, ok) per action: the command (dry run, ``scontrol`` None), or what running it did."""
    for action in actions:
        if action.verb is Verb.KEEP:
            yield f"# {action.node}: {action.reason}", True
        elif scontrol is None:
            yield action.shell(), True
        elif error := scontrol.update(action):
            yield f"gpudiag: {action.verb.value} {action.node} failed: {error}", False
        else:
            yield f"{action.verb.value} {action.node}: {action.reason}", True
