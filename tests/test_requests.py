"""A command's options reach the layers below one way: as its Request, field by field by the
option's name (cli.common.request_of), then checked and parsed once into what they mean."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import typer.main

from gpudiag.bench.request import Request as BenchRequest
from gpudiag.checks.deep import levels
from gpudiag.checks.request import Request as CheckRequest
from gpudiag.checks.request import prepare
from gpudiag.cli.app import build_app
from gpudiag.cli.list_modes import Request as ListRequest
from gpudiag.errors import UsageError
from gpudiag.export.request import Request as ExporterRequest
from gpudiag.fleet.request import DrainRequest, ReportRequest
from gpudiag.memory.request import Request as MemoryRequest
from gpudiag.replay.snapshot_request import Request as SnapshotRequest
from gpudiag.top.request import Request as TopRequest
from tests.conftest import Cli

REQUESTS: dict[str, type] = {
    "check": CheckRequest,
    "list": ListRequest,
    "memory": MemoryRequest,
    "bench-transfer": BenchRequest,
    "report": ReportRequest,
    "drain": DrainRequest,
    "snapshot": SnapshotRequest,
    "top": TopRequest,
    "exporter": ExporterRequest,
}


@pytest.mark.parametrize(("name", "kind"), REQUESTS.items(), ids=list(REQUESTS))
def test_a_request_has_a_field_for_every_option_of_its_command(name: str, kind: type) -> None:
    group = typer.main.get_command(build_app(only=name))
    params = {p.name for p in group.commands[name].params if p.name != "ctx"}  # type: ignore[attr-defined]
    assert set(kind.__struct_fields__) == params


# (command line, the request module whose parser must raise it, the parser, the one line on stderr)
USAGE_ERRORS = [
    (["bench-transfer", "--json", "--csv"], "gpudiag.bench.request", "prepare", "choose one of --json and --csv"),
    (["bench-transfer", "--modes", "h2x"], "gpudiag.bench.request", "prepare", "--modes: unknown mode 'h2x'"),
    (["bench-transfer", "--iters", "0"], "gpudiag.bench.request", "prepare", "--iters must be 1 or more"),
    (["bench-transfer", "--sizes", "2B"], "gpudiag.bench.request", "prepare", "--sizes '2B': too small to copy"),
    (["bench-transfer", "--device", "x"], "gpudiag.bench.request", "prepare", "--device 'x': use CUDA ordinals"),
    (["--replay", "h100x8-healthy", "bench-transfer"], "gpudiag.bench.request", "prepare", "cannot run on a replay"),
    (["report", "{nodes}", "--nodes", "--brief"], "gpudiag.fleet.request", "prepare_report", "--nodes adds a line"),
    (["report", "{missing}"], "gpudiag.fleet.request", "prepare_report", "no such file or directory"),
    (["report", "{empty}"], "gpudiag.fleet.request", "prepare_report", "no node files (*.json) in"),
    (["report", "{nodes}", "--junit-per-check"], "gpudiag.fleet.request", "prepare_report", "give --junit FILE too"),
    (["report", "{nodes}", "--expect", "a b"], "gpudiag.fleet.request", "prepare_report", "is not a node name"),
    (["drain", "{missing}"], "gpudiag.fleet.request", "prepare_drain", "No such file or directory"),
    (["drain", "/dev/null"], "gpudiag.fleet.request", "prepare_drain", "not a file nor a pipe"),
    (["top", "--interval", "0.01"], "gpudiag.top.request", "prepare", "--interval"),
    (["--replay", "h100x8-healthy", "top"], "gpudiag.top.request", "prepare", "needs a terminal"),
    (["exporter", "--compat", "x"], "gpudiag.export.request", "prepare", "--compat 'x': use native or dcgm"),
    (["exporter", "--port", "70000"], "gpudiag.export.request", "prepare", "--port 70000: not a TCP port"),
    (["exporter", "--max-process-series", "-1"], "gpudiag.export.request", "prepare", "must be 0 or more"),
    (
        ["exporter", "--no-kubelet", "--kubelet-socket", "{missing}"],
        "gpudiag.export.request",
        "prepare",
        "--kubelet-socket and --no-kubelet contradict each other",
    ),
]


@pytest.mark.parametrize(
    ("argv", "module", "parser", "message"), USAGE_ERRORS, ids=[" ".join(case[0]) for case in USAGE_ERRORS]
)
def test_a_usage_error_comes_from_the_request_layer(
    argv: list[str], module: str, parser: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's one line and exit 2 are the UsageError its request's parser raised: no command
    module checks an option itself."""
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "n1.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    paths = {"nodes": tmp_path / "nodes", "empty": tmp_path / "empty", "missing": tmp_path / "missing"}
    owner = importlib.import_module(module)
    real = getattr(owner, parser)
    raised: list[UsageError] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        except UsageError as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(owner, parser, recording)
    code, _, err = Cli()(*(a.format(**paths) for a in argv))
    assert code == 2 and len(raised) == 1 and message in raised[0].message
    assert err == f"gpudiag: {raised[0].message}\n"


def test_the_level_is_parsed_once_into_what_it_runs() -> None:
    prepared = prepare(CheckRequest(level=3), replay=None)
    assert prepared.plan.level is levels.LEVELS[3]
    deep = prepared.plan.deep
    assert deep is not None and deep.level is levels.LEVELS[3] and deep.budget == levels.LEVELS[3].budget
    assert "stress.gemm" in deep.checks and "mem.bandwidth" not in deep.checks  # a level-4 check
    assert prepare(CheckRequest(level=2, budget=90.0, force=True), replay=None).plan.deep == levels.DeepPlan(
        levels.LEVELS[2], ("mem.test", "link.pcie", "link.peer", "link.nccl"), 90.0, force=True
    )


def test_level_1_plans_no_deep_test() -> None:
    plan = prepare(CheckRequest(), replay="h100x8-healthy").plan
    assert plan.level is levels.LEVELS[1] and plan.deep is None
    assert prepare(CheckRequest(level=2, only=["health"]), replay=None).plan.deep is None  # none selected


@pytest.mark.parametrize("number", [0, 5, -1])
def test_a_level_that_does_not_exist_is_a_usage_error(number: int) -> None:
    with pytest.raises(UsageError, match=f"--level {number}: expected 1 to 4"):
        prepare(CheckRequest(level=number), replay=None)
