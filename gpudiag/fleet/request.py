"""What `gpudiag report` and `gpudiag drain` were asked for: their options checked and parsed once
into what they mean (the node files named, the nodes ``--expect`` names, the outputs; the targets
to drain, read from the files named). Every usage error is raised here: for `report`, before a
node file is read.

The commands hand over their options as a :class:`ReportRequest` or :class:`DrainRequest`
(``cli.common.request_of``); :func:`prepare_report` and :func:`prepare_drain` parse them.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from gpudiag.errors import UsageError
from gpudiag.fleet import drain, report


class ReportRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag report`, as given (see the command for what each one means)."""

    paths: list[str]
    expect: str | None = None
    json_output: bool = False
    junit: Path | None = None
    junit_per_check: bool = False
    nodes: bool = False
    brief: bool = False


class JUnit(msgspec.Struct, frozen=True):
    path: Path
    per_check: bool  # a test case per node and check, not per node


class ReportRun(msgspec.Struct, frozen=True):
    files: list[str]  # every node file, directories expanded
    expected: report.Expected | None
    json_output: bool
    junit: JUnit | None
    nodes: bool  # a line per node too

    @property
    def keep_checks(self) -> bool:
        """Whether each node file's every check is kept (a JUnit case per check needs them)."""
        return self.junit is not None and self.junit.per_check


def prepare_report(r: ReportRequest) -> ReportRun:
    """The report ``r`` asks for, or the first usage error in it."""
    if r.nodes and r.brief:
        raise UsageError("--nodes adds a line per node and --brief leaves it out: give one of them")
    files = report.node_files(r.paths)
    if not files and r.expect is None:
        raise UsageError(f"no node files (*.json) in {', '.join(map(repr, r.paths))}")
    if r.junit_per_check and r.junit is None:
        raise UsageError("--junit-per-check says how --junit writes its file: give --junit FILE too")
    expected = report.expected_nodes(r.expect) if r.expect is not None else None
    junit = JUnit(r.junit, r.junit_per_check) if r.junit is not None else None
    return ReportRun(files, expected, r.json_output, junit, r.nodes)


class DrainRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag drain`, as given (see the command for what each one means)."""

    paths: list[str]
    execute: bool = False
    resume: bool = False


class DrainRun(msgspec.Struct, frozen=True):
    targets: list[drain.Target]  # from a `report --json`, or node files judged as `report` does
    execute: bool  # run the scontrol commands, not only print them
    resume: bool  # undrain what gpudiag drained and is ready again


def prepare_drain(r: DrainRequest) -> DrainRun:
    """The drain ``r`` asks for, or the first usage error in it (a file that is neither a report nor
    node files, a path that does not exist)."""
    return DrainRun(drain.load_targets(r.paths), r.execute, r.resume)
