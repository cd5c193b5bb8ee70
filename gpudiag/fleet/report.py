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
from gpudiag.fleet.nodefiles import VERSION_FIELDS, Failure, Kind, NodeFile

SCHEMA = "gpudiag.report/1"


class State(str, enum.Enum):
    READY = "ready"
    NOT_READY = "not ready"
    UNREADABLE = "unreadable"
    MISSING = "missing"


@dataclass(frozen=True)
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
    figure_gpus: dict[str, int] = field(default_factory=dict)  # the GPU a deep figure is from

    @property
    def failed_checks(self) -> list[str]:
        return list(dict.fromkeys(f.check for f in self.failures))


@dataclass(frozen=True)
class FailureGroup:
    check: str
    hosts: tuple[str, ...]
    finding: str  # the most common finding, as an example
    remedy: str  # of the first node that needs one ("" for none)


@dataclass(frozen=True)
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

    def count(self, state: State) -> int:
        return sum(1 for n in self.nodes if n.state is state)

    def hosts(self, state: State) -> list[str]:
        return [n.host for n in self.nodes if n.state is state]


def node_files(paths: Iterable[str]) -> list[str]:
    """Files named, and the ``*.json`` files directly inside directories named, sorted per directory."""
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            with os.scandir(path) as entries:
                out += sorted(e.path for e in entries if e.name.endswith(".json") and not e.is_dir())
        elif os.path.exists(path):
            out.append(path)
        else:
            raise UsageError(f"{path}: no such file or directory")
    return out


@functools.lru_cache(maxsize=1024)  # a fleet has few distinct GPU sets; asked once per node
def gpu_summary(gpus: tuple[str, ...]) -> str:
    """``8× NVIDIA H100 80GB HBM3`` (models in order of first appearance)."""
    counts = Counter(gpus)
    return " + ".join(f"{n}× {name}" for name, n in counts.items()) or "no GPU"


def _merge(host: str, files: list[NodeFile]) -> Node:
    f = files[0]
    if len(files) == 1 and f.kind is not None:  # the usual case, kept cheap for 10,000 nodes
        failed = bool(f.failures) or (f.verdict is not None and f.verdict != "READY")
        return Node(
            host=host,
            state=State.NOT_READY if failed else State.READY,
            files=(f.path,),
            kinds=(f.kind,),
            failures=f.failures,
            verdict=f.verdict,
            versions=f.versions,
            gpus=f.gpus,
            metrics=f.metrics,
            remedy=f.remedy,
            checks=_worst_statuses(list(f.checks)) if f.checks else (),
            figure_gpus=f.figure_gpus,
        )
    readable = [f for f in files if f.kind is not None]
    failures = tuple(x for f in readable for x in f.failures)
    problems = tuple(f"{f.path}: {f.problem}" for f in files if f.kind is None)
    verdicts = [f.verdict for f in readable if f.kind is Kind.CHECK and f.verdict is not None]
    # The worst verdict a check file of this node gave.
    verdict = next((v for v in ("NOT READY", "UNKNOWN", "READY") if v in verdicts), verdicts[0] if verdicts else None)
    if failures or (verdict is not None and verdict != "READY"):
        state = State.NOT_READY
    elif problems:
        state = State.UNREADABLE
    else:
        state = State.READY
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
    checks = _worst_statuses([c for f in readable for c in f.checks])
    return Node(
        host=host,
        state=state,
        files=tuple(f.path for f in files),
        kinds=tuple(dict.fromkeys(f.kind for f in readable if f.kind is not None)),
        failures=failures,
        problems=problems,
        verdict=verdict,
        versions=versions,
        gpus=gpus,
        metrics=metrics,
        remedy=", ".join(dict.fromkeys(r for f in readable if (r := f.remedy))),
        checks=checks,
        figure_gpus=figure_gpus,
    )


_SEVERITY = {"FAIL": 3, "WARN": 2, "PASS": 1, "SKIP": 0}


def _worst_statuses(checks: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    worst: dict[str, str] = {}
    for cid, status in checks:
        if cid not in worst or _SEVERITY.get(status, 0) > _SEVERITY.get(worst[cid], 0):
            worst[cid] = status
    return tuple(worst.items())


def build(files: Iterable[NodeFile], expect: str | None = None) -> Report:
    """The fleet report of these node files; ``expect`` (a hostlist) names the nodes that should have sent one."""
    expected = hostlists.expand(expect) if expect is not None else None
    by_host: dict[str, list[NodeFile]] = defaultdict(list)
    for f in files:
        by_host[f.host].append(f)
    nodes = {host: _merge(host, group) for host, group in by_host.items()}
    unexpected: list[str] = []
    if expected is not None:
        expected_set = set(expected)
        unexpected = [h for h in nodes if h not in expected_set]
        for host in expected:
            if host not in nodes:
                nodes[host] = Node(host, State.MISSING)
    ordered = tuple(nodes[h] for h in sorted(nodes, key=hostlists.sort_key))

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
        failure_groups.append(FailureGroup(cid, tuple(n.host for n in members), findings.most_common(1)[0][0], remedy))

    measured = [n for n in ordered if n.metrics]
    found, stats = outliers.find(
        {n.host: n.metrics for n in measured},
        models={n.host: gpu_summary(n.gpus) for n in measured},  # per-model figures: like against like
        gpus={n.host: n.figure_gpus for n in measured if n.figure_gpus},
    )
    return Report(
        nodes=ordered,
        expected=expect,
        unexpected=tuple(sorted(unexpected, key=hostlists.sort_key)),
        failures=tuple(failure_groups),
        skew=_skew(ordered),
        outliers=tuple(found),
        stats=stats,
    )


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
