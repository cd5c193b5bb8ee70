"""Drain the nodes a fleet report found not ready, and resume the ones it found ready again.

Rules (docs/slurm.md):
- one node per command: a name that is not exactly one Slurm node name
  (:func:`~gpudiag.fleet.hostlists.is_node_name`) is never passed to scontrol;
- only node-scope failures drain; a node whose failures are all job-scope stays in service;
- the reason is :func:`gpudiag.fleet.faults.reason` (steady between runs); a reason someone
  else set is never overwritten, gpudiag's own (any of ``faults.SOURCES``) is updated;
- ``resume`` undrains only nodes gpudiag drained that are ready in files written after the drain
  (a READY file older than the drain says nothing about the fault that drained it);
- unreadable and missing nodes, names that are not node names and nodes Slurm does not know are
  never acted on, and each is named: they need a look.

Slurm's view of every node is read in one `scontrol show node` call. The dry run prints exactly
the argv that ``--execute`` runs, shell-quoted.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import shlex
import shutil
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import msgspec

from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import faults
from gpudiag.fleet.hostlists import is_node_name
from gpudiag.fleet.report import SCHEMA, Report

SCONTROL_TIMEOUT = 30.0  # one `show node` for the whole cluster, or one update
READY = "ready"
NOT_READY = "not_ready"

# `Reason=text [user@2026-11-23T07:19:25]`: Slurm appends who set the reason and when (local time).
_REASON_SET = re.compile(r"^(.*?)\s*\[[^\]]*@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*$")


@dataclass(frozen=True)
class Target:
    """What the report says about one node."""

    node: str
    state: str  # "ready", "not_ready", "unreadable", "missing" (report --json's words)
    failures: tuple[faults.Fault, ...] = ()
    files: tuple[str, ...] = ()
    problem: str = ""  # why the node could not be judged, or its verdict when no failure is listed
    # Its check files whose node-scope checks passed, none failing: the only evidence that resumes it
    # (None: a report from before gpudiag recorded them).
    verified: tuple[str, ...] | None = ()


@dataclass(frozen=True)
class Current:
    """What Slurm says about the node now."""

    state: str  # e.g. IDLE+DRAIN
    reason: str  # "" when none
    since: float | None = None  # when the reason was set (unix time), when Slurm said

    @property
    def drained(self) -> bool:
        return any(flag in self.state.upper() for flag in ("DRAIN", "DOWN", "FAIL"))


class Verb(str, enum.Enum):
    DRAIN = "drain"
    RESUME = "resume"
    KEEP = "keep"  # nothing to do, with the reason why
    SKIP = "skip"  # not acted on, and that needs a look: the command exits 1


@dataclass(frozen=True)
class Step:
    node: str
    verb: Verb
    note: str  # the drain reason, or why nothing is done

    def argv(self) -> list[str]:
        """The scontrol command, one node, its name as data (checked by :func:`plan`)."""
        if self.verb is Verb.DRAIN:
            return ["scontrol", "update", f"NodeName={self.node}", "State=DRAIN", f"Reason={self.note}"]
        if self.verb is Verb.RESUME:
            return ["scontrol", "update", f"NodeName={self.node}", "State=RESUME"]
        return []

    def line(self, blind: bool = False) -> str:
        """What the dry run prints: the argv shell-quoted, or a comment (a shell runs both). ``blind``:
        Slurm's view was not read, so no command is fit to run: each is printed as a comment."""
        if self.verb in (Verb.DRAIN, Verb.RESUME):
            command = shlex.join(self.argv())
            return f"# {self.node}: not run, Slurm's view unread: {command}" if blind else command
        return f"# {faults.escape(self.node)}: {faults.escape(self.note)}"


def plan(targets: Iterable[Target], current: dict[str, Current] | None, resume: bool) -> list[Step]:
    """The step per node. ``current`` is Slurm's view (None: not read, so every not-ready node is
    listed as if it had no reason); a node missing from it is one Slurm does not know."""
    steps = []
    for t in targets:
        if not is_node_name(t.node):
            steps.append(Step(t.node, Verb.SKIP, "not one Slurm node name: never passed to scontrol"))
        elif t.state == NOT_READY:
            steps.append(_not_ready(t, current))
        elif t.state != READY:
            steps.append(Step(t.node, Verb.SKIP, f"{t.state}, not judged, not drained: {t.problem or 'no file'}"))
        elif resume and current is not None and (now := current.get(t.node)) is not None and now.drained:
            steps.append(_ready_and_drained(t, now))
    return steps


def _not_ready(t: Target, current: dict[str, Current] | None) -> Step:
    failed = faults.node_faults(t.failures)
    if t.failures and not failed:
        checks = ",".join(dict.fromkeys(f.check for f in t.failures))
        return Step(t.node, Verb.KEEP, f"left in service: job-scope failures only ({checks})")
    # Not ready without a failure listed (a --strict warning, a verdict without checks): drain anyway.
    generic = f"{faults.PREFIX} not ready: verdict {faults.escape(t.problem or '?')}, no failed check listed"
    wanted = faults.reason(failed) if failed else generic[: faults.MAX_REASON]
    if current is None:
        return Step(t.node, Verb.DRAIN, wanted)
    now = current.get(t.node)
    if now is None:
        return Step(t.node, Verb.SKIP, "not drained: Slurm does not know this node")
    if now.reason and not faults.is_ours(now.reason):
        if now.drained:
            return Step(t.node, Verb.KEEP, f"not drained: reason set by someone else: {now.reason}")
        return Step(t.node, Verb.SKIP, f"not drained, {now.state} with someone else's reason: {now.reason}")
    if now.drained and now.reason == wanted:
        return Step(t.node, Verb.KEEP, f"already drained: {wanted}")
    return Step(t.node, Verb.DRAIN, wanted)


def _ready_and_drained(t: Target, now: Current) -> Step:
    if not faults.is_ours(now.reason):
        if now.reason:
            return Step(t.node, Verb.KEEP, f"ready, left drained: reason set by someone else: {now.reason}")
        return Step(t.node, Verb.KEEP, f"ready, left {now.state}: no reason says gpudiag drained it")
    if not t.verified:
        why = (
            "the report does not list the files that checked it (written by an older gpudiag): run report again"
            if t.verified is None
            else "no check of the node itself ran and passed (every check skipped, only the job's checks, "
            "or a snapshot): run the check again"
        )
        return Step(t.node, Verb.KEEP, f"ready, left drained: {why}")
    found = _newest(t.verified)
    if found is None or now.since is None:
        return Step(t.node, Verb.KEEP, "ready, left drained: cannot tell whether its files are newer than the drain")
    seen, raw = found
    if seen < now.since + 1:  # Slurm's time has whole seconds: newer means a second later at least
        return Step(
            t.node, Verb.KEEP, f"ready, left drained: its newest file ({_when(seen)}) is older than the drain "
            f"({_when(now.since)}): run the check again"
        )  # fmt: skip
    if (fault := drained_for(now.reason)) is not None and not _passed(raw, *fault):
        check, target = fault
        return Step(
            t.node, Verb.KEEP, f"ready, left drained: {check}{' on ' + target if target else ''}, which drained it, "
            "did not run and pass in its newest check file: run the check again"
        )  # fmt: skip
    return Step(t.node, Verb.RESUME, f"ready again (was: {now.reason})")


def drained_for(reason: str) -> tuple[str, str] | None:
    """The check (and its target, ``GPU0``; "" for the node) a gpudiag reason names, or None when it
    names no check (``gpudiag: not ready: verdict …``, a benchmark)."""
    from gpudiag.checks.rules import BY_ID

    body = next((reason[len(s) :] for s in faults.SOURCES if reason.startswith(s)), "")
    words = body.partition(": ")[0].split()
    if not words or words[0] not in BY_ID:
        return None
    target = words[1] if len(words) > 1 and not words[1].startswith(("GPU-", "MIG-")) else ""
    return words[0], target


class _Result(msgspec.Struct):
    id: str
    status: str
    target: str | None = None


class _Results(msgspec.Struct):
    checks: list[_Result] = []


def _passed(raw: bytes, check: str, target: str) -> bool:
    """Whether the check file ``raw`` ran ``check`` on ``target`` (or, where no result names it, on
    the whole node: `nvml.gpu_lost` fails on a GPU and passes for the node) and it passed (or
    warned): a file that did not run the check that drained a node says nothing about that fault
    (`check --only nvml.init` passes on a GPU with ECC errors)."""
    try:
        results = [r for r in msgspec.json.decode(raw, type=_Results).checks if r.id == check]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    mine = [r for r in results if faults.escape((r.target or "").replace(" ", "")) == target]
    if not mine:
        mine = [r for r in results if not r.target]
    return bool(mine) and all(r.status in ("PASS", "WARN") for r in mine)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


class _Stamp(msgspec.Struct):
    collected_at: float | None = None  # check --json and snapshot: when the node was read


def newest(files: Iterable[str]) -> float | None:
    """When the newest of a node's files was written: its own ``collected_at`` when it has one,
    else the file's modification time; None when a file cannot be read (then nothing is resumed)."""
    found = _newest(files)
    return None if found is None else found[0]


def _newest(files: Iterable[str]) -> tuple[float, bytes] | None:
    """When the newest of a node's files was written (see :func:`newest`), and its text."""
    from gpudiag.fleet.nodefiles import regular_text

    times = []
    for path in files:  # paths a report --json names: as node files are read (a FIFO there never blocks)
        if (read := regular_text(path)) is None:
            return None
        raw, stamp = read
        # Trailing text (Slurm's --output) or a document without the field: the file's time.
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            stamp = msgspec.json.decode(raw, type=_Stamp).collected_at or stamp
        times.append((stamp, raw))
    return max(times, key=lambda item: item[0], default=None)


def parse_nodes(text: str) -> dict[str, Current]:
    """Every node's state and reason from `scontrol show node` (Slurm's multi-line format)."""
    nodes: dict[str, Current] = {}
    name, state, reason, since = "", "", "", None
    for line in text.splitlines():
        if line.startswith("NodeName="):
            if name:
                nodes[name] = Current(state, reason, since)
            name, state, reason, since = line[9:].split(" ", 1)[0], "", "", None
            continue
        field = line.lstrip()
        if field.startswith("State="):
            state = field[6:].split(" ", 1)[0]
        elif field.startswith("Reason="):
            reason, since = _reason(field[7:])
    if name:
        nodes[name] = Current(state, reason, since)
    return nodes


def _reason(text: str) -> tuple[str, float | None]:
    found = _REASON_SET.match(text)
    reason, since = (found.group(1), found.group(2)) if found else (text.strip(), None)
    if reason in ("(null)", "none"):
        reason = ""
    try:
        return reason, time.mktime(time.strptime(since, "%Y-%m-%dT%H:%M:%S")) if since else None
    except (ValueError, OverflowError):
        return reason, None


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
                [self.program, *args],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=SCONTROL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GpudiagError(
                f"scontrol {' '.join(args[:2])} did not answer in {SCONTROL_TIMEOUT:.0f} s", ExitCode.FAILED
            ) from None
        except OSError as exc:
            raise GpudiagError(f"cannot run scontrol: {exc.strerror or exc}", ExitCode.FAILED) from None

    def nodes(self) -> dict[str, Current]:
        """Every node Slurm knows, in one call."""
        done = self._run(["show", "node", "--all"])
        if done.returncode != 0:
            error = faults.escape(_first_line(done.stderr or done.stdout))
            raise GpudiagError(f"scontrol show node: {error or f'exit {done.returncode}'}", ExitCode.FAILED)
        return parse_nodes(done.stdout)

    def update(self, step: Step) -> str:
        """Run the step's update; "" on success, else scontrol's message."""
        done = self._run(step.argv()[1:])
        if done.returncode == 0:
            return ""
        return faults.escape(_first_line(done.stderr or done.stdout)) or f"exit {done.returncode}"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def from_report(report: Report) -> list[Target]:
    return [
        Target(
            n.host, n.state.name.lower(), n.failures, n.files, "; ".join(n.problems) or (n.verdict or ""), n.verified
        )
        for n in report.nodes
    ]


class _ReportFailure(msgspec.Struct):
    check: str
    target: str | None = None
    finding: str = ""
    scope: str | None = None  # absent before scopes were recorded: taken as the node's
    action: str | None = None
    uuid: str | None = None

    # A Fault's fields, with the defaults a missing key means.
    @property
    def fault(self) -> faults.Failed:
        return faults.Failed(
            self.check, self.target or "", self.finding, self.scope or "node", self.action or "", self.uuid or ""
        )


class _ReportNode(msgspec.Struct):
    node: str
    state: str
    failures: list[_ReportFailure] = []
    files: list[str] = []
    problems: list[str] = []
    verdict: str | None = None
    verified_files: list[str] | None = None


class _ReportFile(msgspec.Struct, tag_field="schema", tag=SCHEMA):
    nodes: list[_ReportNode]


def from_report_json(raw: bytes, where: str) -> list[Target]:
    """Targets from `gpudiag report --json` output; a file that is not one is a usage error."""
    try:
        doc = msgspec.json.decode(raw, type=_ReportFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UsageError(f"{where}: not a `gpudiag report --json` output ({SCHEMA}): {exc}") from None
    return [
        Target(
            n.node,
            n.state,
            tuple(f.fault for f in n.failures),
            tuple(n.files),
            "; ".join(n.problems) or (n.verdict or ""),
            None if n.verified_files is None else tuple(n.verified_files),
        )
        for n in doc.nodes
    ]


def is_report(raw: bytes) -> bool:
    """Whether a file is a report (else it is taken as a node output)."""
    head = raw[:4096]
    return b'"schema"' in head and SCHEMA.encode() in head


MAX_REPORT = 2**30  # a `report --json` of 50,000 nodes is tens of MiB


def _read_one(path: str) -> bytes:
    """A path named alone: a `report --json` from a file or a pipe (``<(gpudiag report --json …)``),
    at most MAX_REPORT bytes; a device is never read (/dev/zero has no end, a terminal waits)."""
    try:
        mode = os.stat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise UsageError(f"{path}: not a file nor a pipe: give a `gpudiag report --json` file or node files")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_REPORT + 1)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT:
        raise UsageError(f"{path}: larger than {MAX_REPORT // 2**20} MiB: not a `gpudiag report --json` output")
    return raw


def load_targets(paths: list[str]) -> list[Target]:
    """From one `report --json` file, or from node files and directories as `report` reads them."""
    from gpudiag.fleet import nodefiles
    from gpudiag.fleet.report import build, node_files

    if len(paths) == 1 and not os.path.isdir(paths[0]):
        raw = _read_one(paths[0])
        if is_report(raw):
            return from_report_json(raw, paths[0])
    return from_report(build(nodefiles.read(f) for f in node_files(paths)))


def carry_out(
    steps: Iterable[Step], scontrol: Scontrol | None, blind: bool = False
) -> Iterator[tuple[str, bool, bool]]:
    """(line, ok, error) per step: the command (dry run, ``scontrol`` None; a comment when ``blind``:
    Slurm's view was not read) or what running it did; a SKIP is not ok (it needs a look); an update
    that failed is an error (for stderr)."""
    for step in steps:
        if step.verb in (Verb.KEEP, Verb.SKIP):
            yield step.line(), step.verb is Verb.KEEP, False
        elif scontrol is None:
            yield step.line(blind), not blind, False
        elif error := scontrol.update(step):
            yield f"gpudiag: {step.verb.value} {step.node} failed: {error}", False, True
        else:
            yield f"{step.verb.value} {step.node}: {faults.escape(step.note)}", True, False


def summary(targets: list[Target], steps: list[Step], executed: bool) -> str:
    """``# 128 node(s): 2 to drain, 1 to resume, 3 left as they are, 1 to look at``."""
    count = {verb: sum(1 for s in steps if s.verb is verb) for verb in Verb}
    done = ("drained", "resumed") if executed else ("to drain", "to resume")
    parts = [f"{count[Verb.DRAIN]} {done[0]}", f"{count[Verb.RESUME]} {done[1]}"]
    parts.append(f"{count[Verb.KEEP]} left as they are")
    if count[Verb.SKIP]:
        parts.append(f"{count[Verb.SKIP]} to look at (not acted on)")
    return f"# {len(targets)} node(s): {', '.join(parts)}"
