"""Merge per-node output files into one fleet report: who is ready, what failed where, what differs.

Pure over :class:`~gpudiag.fleet.nodefiles.NodeFile` values; :func:`node_files` is the one
place that touches the file system (expanding directories).
"""

from __future__ import annotations

import enum
import functools
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import hostlists, outliers
from gpudiag.fleet.nodefiles import VERSION_FIELDS, Cause, Failure, Kind, NodeFile, worst_statuses

SCHEMA = "gpudiag.report/1"


class State(str, enum.Enum):
    READY = "ready"
    NOT_READY = "not ready"
    UNREADABLE = "unreadable"
    MISSING = "missing"


# A node with several files takes the worst of their states: a failure outranks a file that
# could not be read (something is known to be wrong), which outranks a ready file.
_RANK = {State.READY: 0, State.UNREADABLE: 1, State.NOT_READY: 2}


@dataclass(frozen=True, slots=True)
class Node:
    host: str
    state: State
    files: tuple[str, ...] = ()
    kinds: tuple[Kind, ...] = ()  # the outputs read for this node
    failures: tuple[Failure, ...] = ()
    problems: tuple[str, ...] = ()  # "FILE: why it could not be read"
    verdict: str | None = None  # `check`'s, when the node sent one
    versions: dict[str, str] = field(default_factory=dict)
    gpus: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    remedy: str = ""
    checks: tuple[tuple[str, str], ...] = ()  # (check id, worst status), kept for JUnit only
    unread: tuple[tuple[str, Cause, str], ...] = ()  # (file, cause, why) per unreadable file, as in ``problems``
    name_ok: bool = True  # False: no file named a valid node; ``host`` is a file's name, never a target
    worst: str = ""  # with several files that disagree: the file that gave the node its state
    figure_gpus: dict[str, int] = field(default_factory=dict)  # the GPU a deep figure is from
    verified: tuple[str, ...] = ()  # the check files whose node-scope checks passed (what may resume the node)

    @property
    def failed_checks(self) -> list[str]:
        return list(dict.fromkeys(f.check for f in self.failures))

    @property
    def drain(self) -> bool:
        """Whether a scheduler should drain the node: it failed a node-scope check. A node whose
        failures are all job-scope (the job's environment, torch, requirements) fails that job only."""
        return self.state is State.NOT_READY and any(f.scope == "node" for f in self.failures)


@dataclass(frozen=True, slots=True)
class FailureGroup:
    check: str
    hosts: tuple[str, ...]
    finding: str  # the most common finding, as an example
    remedy: str  # of the first node that needs one ("" for none)
    scope: str = "node"  # "node" when any of these failures is node-scope, else "job"


@dataclass(frozen=True, slots=True)
class ProblemGroup:
    """Unreadable nodes that share a cause."""

    cause: Cause
    hosts: tuple[str, ...]  # valid node names and (``name_ok`` False) file names as found
    example: str  # why one of their files could not be read
    file: str  # that file


@dataclass(frozen=True, slots=True)
class Skew:
    field: str
    values: tuple[tuple[str, tuple[str, ...]], ...]  # (value, hosts), most hosts first


@dataclass(frozen=True)
class Report:
    nodes: tuple[Node, ...]  # in hostlist order
    expected: str | None  # the --expect expression
    unexpected: tuple[str, ...]  # sent a file but not in --expect
    failures: tuple[FailureGroup, ...]
    skew: tuple[Skew, ...]
    outliers: tuple[outliers.Outlier, ...]
    stats: dict[str, tuple[float, float, int]]  # figure -> (median, scaled MAD, nodes)
    problems: tuple[ProblemGroup, ...] = ()  # unreadable nodes by cause, most nodes first

    def count(self, state: State) -> int:
        return sum(1 for n in self.nodes if n.state is state)

    def hosts(self, state: State) -> list[str]:
        """The (validly named) nodes in this state; nodes without a valid name are in :meth:`unnamed`."""
        return [n.host for n in self.nodes if n.state is state and n.name_ok]

    def unnamed(self) -> list[Node]:
        """Nodes whose files named no valid node (unreadable): listed by their file's name, never in a hostlist."""
        return [n for n in self.nodes if not n.name_ok]

    @property
    def to_drain(self) -> int:
        return sum(1 for n in self.nodes if n.drain)


def node_files(paths: Iterable[str]) -> list[str]:
    """Files named, and the ``*.json`` entries directly inside directories named (sub-directories left
    out; FIFOs, links and the like kept, to be named unreadable), sorted per directory."""
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            try:
                with os.scandir(path) as entries:
                    out += sorted(e.path for e in entries if e.name.endswith(".json") and not _is_dir(e))
            except OSError as exc:
                raise UsageError(f"{path!r}: cannot list: {exc.strerror or exc}") from None
        elif os.path.lexists(path):
            out.append(path)
        else:
            raise UsageError(f"{path!r}: no such file or directory")
    return out


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


@functools.lru_cache(maxsize=1024)  # a fleet has few distinct GPU sets; asked once per node
def gpu_summary(gpus: tuple[str, ...]) -> str:
    """``8× NVIDIA H100 80GB HBM3`` (models in order of first appearance)."""
    counts = Counter(gpus)
    return " + ".join(f"{n}× {name}" for name, n in counts.items()) or "no GPU"


def file_state(f: NodeFile) -> State:
    """What one file says about its node on its own."""
    if f.kind is None:
        return State.UNREADABLE
    return State.NOT_READY if f.failures or (f.verdict is not None and f.verdict != "READY") else State.READY


# What a node whose files are only snapshots and memory records gets: they judge nothing, and nothing
# verified is never READY (as `check`'s UNKNOWN: not ready for the job, no proof against the node).
UNCHECKED = Failure(
    "gpudiag.nothing_checked", "", "nothing was checked: a snapshot or a memory record only, no check file", "job"
)
_JUDGING = (Kind.CHECK, Kind.BENCH)  # the outputs that verify something (a check's verdict, a benchmark's)


def _merge(host: str, files: list[NodeFile]) -> Node:
    f = files[0]
    if len(files) == 1:  # the usual case, kept cheap for 50,000 nodes
        if f.kind is None:
            problem = f"{f.path}: {f.problem}"
            why = ((f.path, f.cause or Cause.CANNOT_READ, f.problem),)
            return Node(host, State.UNREADABLE, (f.path,), problems=(problem,), unread=why, name_ok=f.name_ok)
        judged = f.kind in _JUDGING
        return Node(
            host=host,
            state=file_state(f) if judged else State.NOT_READY,
            files=(f.path,),
            kinds=(f.kind,),
            failures=f.failures if judged else (*f.failures, UNCHECKED),
            verdict=f.verdict,
            versions=f.versions,
            gpus=f.gpus,
            metrics=f.metrics,
            remedy=f.remedy,
            checks=f.checks,
            figure_gpus=f.figure_gpus,
            verified=(f.path,) if f.node_verified else (),
        )
    readable = [f for f in files if f.kind is not None]
    failures = tuple(x for f in readable for x in f.failures)
    bad_files = [f for f in files if f.kind is None]
    verdicts = [f.verdict for f in readable if f.kind is Kind.CHECK and f.verdict is not None]
    # The worst verdict a check file of this node gave.
    verdict = next((v for v in ("NOT READY", "UNKNOWN", "READY") if v in verdicts), None)
    states = [file_state(f) for f in files]
    state = max(states, key=_RANK.__getitem__)
    worst = next(f.path for f, s in zip(files, states, strict=True) if s is state) if len(set(states)) > 1 else ""
    if state is State.READY and not any(f.kind in _JUDGING for f in readable):
        state, failures, worst = State.NOT_READY, (*failures, UNCHECKED), ""
    versions: dict[str, str] = {}
    metrics: dict[str, float] = {}
    figure_gpus: dict[str, int] = {}
    gpus: tuple[str, ...] = ()
    # GPU models: a check or snapshot sees every GPU; bench-transfer only those torch could use.
    for kind in (Kind.BENCH, Kind.MEMORY, Kind.SNAPSHOT, Kind.CHECK):
        for f in readable:
            if f.kind is kind:
                versions.update(f.versions)
                metrics.update(f.metrics)
                figure_gpus.update(f.figure_gpus)
                gpus = f.gpus or gpus
    return Node(
        host=host,
        state=state,
        files=tuple(f.path for f in files),
        kinds=tuple(dict.fromkeys(f.kind for f in readable if f.kind is not None)),
        failures=failures,
        problems=tuple(f"{f.path}: {f.problem}" for f in bad_files),
        verdict=verdict,
        versions=versions,
        gpus=gpus,
        metrics=metrics,
        remedy=", ".join(dict.fromkeys(r for f in readable if (r := f.remedy))),
        checks=worst_statuses(c for f in readable for c in f.checks),
        unread=tuple((f.path, f.cause or Cause.CANNOT_READ, f.problem) for f in bad_files),
        name_ok=all(f.name_ok for f in files),
        worst=worst,
        figure_gpus=figure_gpus,
        verified=tuple(f.path for f in readable if f.node_verified),
    )


@dataclass(frozen=True)
class Expected:
    """``--expect``: its hostlist as written (the report shows it) and the node names it expands to."""

    expression: str
    nodes: tuple[str, ...]


def expected_nodes(expect: str) -> Expected:
    """The nodes ``--expect`` names; each must be one valid node name (a name is data, never syntax)."""
    expected = hostlists.expand(expect)
    for name in expected:
        if not hostlists.is_node_name(name):
            raise UsageError(
                f"--expect {expect!r}: {name!r} is not a node name (letters, digits, '.', '_', '-'; "
                "hostlist syntax only as node[001-128],login1)"
            )
    return Expected(expect, tuple(expected))


def build(files: Iterable[NodeFile], expected: Expected | None = None) -> Report:
    """The fleet report of these node files; ``expected``: the nodes that should have sent one."""
    by_host: dict[str, list[NodeFile]] = defaultdict(list)
    for f in files:
        by_host[f.host].append(f)
    nodes = {host: _merge(host, group) for host, group in by_host.items()}
    del by_host
    unexpected: list[str] = []
    if expected is not None:
        expected_set = set(expected.nodes)
        unexpected = [h for h, n in nodes.items() if h not in expected_set and n.name_ok]
        for host in expected.nodes:
            if host not in nodes:
                nodes[host] = Node(host, State.MISSING)
    ordered = tuple(nodes[h] for h in sorted(nodes, key=hostlists.sort_key))
    del nodes

    groups: dict[str, list[Node]] = defaultdict(list)
    for node in ordered:
        for cid in node.failed_checks:
            groups[cid].append(node)
    failure_groups = []
    for cid, members in sorted(groups.items(), key=lambda item: -len(item[1])):  # ties: in check order
        findings = Counter(
            f"{f.target}: {f.finding}" if f.target else f.finding for n in members for f in n.failures if f.check == cid
        )
        remedy = next((n.remedy for n in members if n.remedy), "")
        scope = "node" if any(f.scope == "node" for n in members for f in n.failures if f.check == cid) else "job"
        failure_groups.append(
            FailureGroup(cid, tuple(n.host for n in members), findings.most_common(1)[0][0], remedy, scope)
        )

    measured = [n for n in ordered if n.metrics]
    found, stats = outliers.find(
        {n.host: n.metrics for n in measured},
        models={n.host: gpu_summary(n.gpus) for n in measured},  # per-model figures: like against like
        gpus={n.host: n.figure_gpus for n in measured if n.figure_gpus},
    )
    return Report(
        nodes=ordered,
        expected=expected.expression if expected is not None else None,
        unexpected=tuple(sorted(unexpected, key=hostlists.sort_key)),
        failures=tuple(failure_groups),
        skew=_skew(ordered),
        outliers=tuple(found),
        stats=stats,
        problems=_problem_groups(ordered),
    )


def _problem_groups(nodes: tuple[Node, ...]) -> tuple[ProblemGroup, ...]:
    """Unreadable nodes grouped by why (a node with files unreadable for two reasons is in both)."""
    groups: dict[Cause, list[Node]] = defaultdict(list)
    examples: dict[Cause, tuple[str, str]] = {}
    for n in nodes:
        if n.state is State.UNREADABLE:
            for path, cause, why in n.unread:
                if not groups[cause] or groups[cause][-1] is not n:
                    groups[cause].append(n)
                examples.setdefault(cause, (why, path))
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))
    return tuple(ProblemGroup(cause, tuple(n.host for n in members), *examples[cause]) for cause, members in ranked)


def _skew(nodes: tuple[Node, ...]) -> tuple[Skew, ...]:
    """Fields whose value differs between nodes (a node that did not record one is left out)."""
    out = []
    fields = (*VERSION_FIELDS, "GPUs")
    values: dict[str, dict[str, list[str]]] = {name: defaultdict(list) for name in fields}
    gpu_values = values["GPUs"]
    for n in nodes:  # one pass over the nodes for every field
        for name, value in n.versions.items():
            if name in values:
                values[name][value].append(n.host)
        if n.kinds:
            gpu_values[gpu_summary(n.gpus)].append(n.host)
    for name in fields:
        if len(values[name]) > 1:
            ranked = sorted(values[name].items(), key=lambda item: (-len(item[1]), item[0]))
            out.append(Skew(name, tuple((v, tuple(h)) for v, h in ranked)))
    return tuple(out)


def exit_code(report: Report) -> ExitCode:
    """0 all ready; 1 a node is not ready or missing; REPORT_UNREADABLE when that is all that is wrong."""
    if report.count(State.NOT_READY) or report.count(State.MISSING):
        return ExitCode.FAILED
    if report.count(State.UNREADABLE):
        return ExitCode.REPORT_UNREADABLE
    return ExitCode.OK
