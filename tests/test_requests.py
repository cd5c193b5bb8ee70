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
from gpudiag.cli.smi_requests import Dmon, Mig, Nvlink, Pmon, Stat, Topo
from gpudiag.errors import UsageError
from gpudiag.export.request import Request as ExporterRequest
from gpudiag.fleet.request import DrainRequest, ReportRequest
from gpudiag.memory.request import Request as MemoryRequest
from gpudiag.replay.snapshot_request import Request as SnapshotRequest
from gpudiag.top.request import Request as TopRequest
from gpudiag.visibility.request import Request as VisibleRequest
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
    "visible": VisibleRequest,
    "stat": Stat,
    "topo": Topo,
    "nvlink": Nvlink,
    "mig": Mig,
    "dmon": Dmon,
    "pmon": Pmon,
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
    (["list", "--id", "0,,1"], "gpudiag.cli.list_modes", "validate", "empty entry in --id '0,,1'"),
    (["memory", "--id", ""], "gpudiag.memory.request", "prepare", "empty entry in --id ''"),
    (["nvlink", "--id", "1,"], "gpudiag.cli.smi_requests", "selection", "empty entry in --id '1,'"),
    (["visible", "--select", ",2"], "gpudiag.visibility.request", "prepare", "empty entry in --select ',2'"),
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


def test_bench_transfer_is_parsed_into_its_plan_and_output() -> None:
    from gpudiag.bench import request as bench
    from gpudiag.bench.plan import SWEEP_SIZES, Mode

    run = bench.prepare(BenchRequest(modes="peer,d2d", sweep=True, device="cuda:1,0", csv_output=True), replay=None)
    assert run.plan.modes == (Mode.D2D, Mode.PEER) and run.plan.sizes == SWEEP_SIZES and run.plan.devices == (1, 0)
    assert run.output is bench.Output.CSV and run.explicit_peer and not run.binary
    everything = bench.prepare(BenchRequest(gib=True, json_output=True), replay=None)
    assert everything.output is bench.Output.JSON and everything.binary
    assert not everything.explicit_peer  # every mode by default: peer copies were not asked for by name


def test_report_and_drain_are_parsed_into_files_nodes_and_targets(tmp_path: Path) -> None:
    from gpudiag.fleet import request as fleet

    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "a.json").write_text("{}")
    run = fleet.prepare_report(
        ReportRequest(paths=[str(tmp_path)], expect="gpu[01-03]", junit=tmp_path / "j.xml", junit_per_check=True)
    )
    assert run.files == [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert run.expected is not None and run.expected.nodes == ("gpu01", "gpu02", "gpu03")
    assert run.expected.expression == "gpu[01-03]" and run.keep_checks
    assert not fleet.prepare_report(ReportRequest(paths=[str(tmp_path)])).keep_checks
    drain = fleet.prepare_drain(DrainRequest(paths=[str(tmp_path)], resume=True))
    assert sorted(t.node for t in drain.targets) == ["a", "b"]  # unreadable files, named by their file
    assert drain.resume and not drain.execute


def test_exporter_is_parsed_into_what_it_serves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpudiag.export import request as export
    from gpudiag.export.kubelet import DEFAULT_SOCKET

    monkeypatch.setenv(export.NODE_NAME_ENV, "node7")
    live = export.prepare(ExporterRequest(), replay=None)
    assert live.kubelet_socket == DEFAULT_SOCKET and not live.kubelet_named  # asked only when it exists
    assert live.proc_root == Path("/proc") and live.hostname == "node7" and live.port == export.DEFAULT_PORT
    replayed = export.prepare(ExporterRequest(no_kubelet=True, hostname="h", compat="dcgm"), replay="x")
    assert replayed.kubelet_socket is None and replayed.proc_root is None  # a replay's PIDs are not this host's
    assert replayed.hostname == "h" and replayed.compat == "dcgm"
    named = export.prepare(ExporterRequest(kubelet_socket=tmp_path / "k.sock", proc_root=tmp_path), replay="x")
    assert named.kubelet_socket == tmp_path / "k.sock" and named.kubelet_named and named.proc_root == tmp_path


def test_snapshot_and_top_are_parsed() -> None:
    from gpudiag.replay import snapshot_request as snapshot
    from gpudiag.top import request as top

    assert snapshot.prepare(SnapshotRequest(description="d"), replay=None) == snapshot.Snapshot(None, "d", torch=True)
    assert not snapshot.prepare(SnapshotRequest(), replay="h100x8-healthy").torch  # recorded with the replay
    assert not snapshot.prepare(SnapshotRequest(no_torch=True), replay=None).torch
    assert top.prepare(TopRequest(interval=0.5), terminal=True) == top.Top(0.5)
