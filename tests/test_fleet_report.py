"""`gpudiag report`: merging per-node outputs, bad node files, hostlists, skew, outliers, JSON, JUnit."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import hostlist
import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import hostlists, nodefiles, outliers, report
from gpudiag.fleet.nodefiles import Kind
from gpudiag.fleet.report import State
from gpudiag.render import report_view
from tests import fleet_files as ff
from tests import golden
from tests.conftest import Cli

BROKEN = "a100-ecc-errors"  # ECC errors, a pending row remap, NVML asks for a GPU reset
HEALTHY = "h100x8-healthy"
GOLDEN = golden.GOLDEN


def fleet(tmp_path: Path, nodes: dict[str, str]) -> Path:
    out = tmp_path / "nodes"
    for node, machine in nodes.items():
        ff.write(out, f"{node}.json", ff.check(machine, node))
    return out


# --- node files: whatever is in them is that node's problem ------------------------------

BAD_FILES = [
    (b"", "empty file"),
    (b"  \n", "empty file"),
    (b'{\n  "schema": "gpudiag.check/1",\n  "source": "li', "truncated or malformed JSON"),
    (b"srun: error: gpu007: task 0: Killed\n", "not JSON: 'srun: error: gpu007: task 0: Killed'"),
    (b"\xff\xfe\x00garbage", "not valid UTF-8 (byte 0)"),
    (b"NaN", "not JSON: 'NaN'"),
    (b"[1, 2]", "not a gpudiag output (JSON, but not an object)"),
    (b'{"hello": "world"}', "not a gpudiag output (no gpudiag schema field)"),
    (b'{"schema": "dcgm.diag/1"}', "not a gpudiag output"),
    (b'{"schema": "gpudiag.check/9", "verdict": "READY"}', "schema 'gpudiag.check/9' is not one this gpudiag reads"),
    (
        b'{"schema": "gpudiag.check/1", "verdict": 3, "could_not_run": [], "versions": {}, "checks": []}',
        "malformed gpudiag.check/1 output: Expected `str`, got `int` - at `$.verdict`",
    ),
    (
        b'{"schema": "gpudiag.check/1", "verdict": "NOT READY", "could_not_run": [], "versions": {},'
        b' "checks": [{"status": "FAIL"}]}',
        "missing required field `id`",
    ),
    (b'{"schema": "gpudiag.memory/2"}', "malformed gpudiag.memory/2 output: Object missing required field `gpus`"),
    (b'{"schema": "gpudiag.machine/1", "nvml": [], "gpus": []}', "malformed gpudiag.machine/1 output"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),  # deeper than any parser recurses
    (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
]


@pytest.mark.parametrize(("raw", "problem"), BAD_FILES)
def test_a_bad_node_file_is_that_nodes_problem(raw: bytes, problem: str) -> None:
    node = nodefiles.parse(raw, "nodes/gpu007.json")
    assert node.kind is None
    assert problem in node.problem
    assert node.host == "gpu007"  # named after the file when the content cannot say


def test_every_bad_file_at_once_is_unreadable_not_a_traceback(cli: Cli, tmp_path: Path) -> None:
    for i, (raw, _) in enumerate(BAD_FILES):
        ff.write(tmp_path / "nodes", f"bad{i:02d}.json", raw)
    code, out, err = cli("report", str(tmp_path / "nodes"))
    assert code == ExitCode.REPORT_UNREADABLE, out + err
    assert f"{len(BAD_FILES)} node(s): 0 ready, 0 not ready, {len(BAD_FILES)} unreadable" in out
    assert f"Unreadable: {len(BAD_FILES)}  bad[00-{len(BAD_FILES) - 1}]" in out


def test_a_document_followed_by_stderr_text_is_unreadable_and_says_what_to_do() -> None:
    """Slurm's --output without --error appends gpudiag's stderr lines to the JSON: not one document."""
    raw = json.dumps(ff.check(HEALTHY, "gpu001")) + "\ngpudiag: could not run: x\n"
    node = nodefiles.parse(raw.encode(), "nodes/x.json")
    assert (node.kind, node.cause, node.host) == (None, nodefiles.Cause.TRAILING_TEXT, "gpu001")
    assert "text after the JSON document: 'gpudiag: could not run: x'" in node.problem
    assert "srun --error" in node.problem


@pytest.mark.parametrize("order", [(HEALTHY, BROKEN), (BROKEN, HEALTHY), (HEALTHY, HEALTHY)])
def test_two_runs_appended_to_one_file_are_never_ready(cli: Cli, tmp_path: Path, order: tuple[str, str]) -> None:
    """`check --json >> gpu001.json` twice: the first run must not speak for the file."""
    raw = "".join(json.dumps(ff.check(m, "gpu001"), indent=2) + "\n" for m in order)
    ff.write(tmp_path / "n", "gpu001.json", raw)
    node = nodefiles.read(str(tmp_path / "n" / "gpu001.json"))
    assert (node.kind, node.cause, node.host) == (None, nodefiles.Cause.SEVERAL, "gpu001")
    assert "more than one JSON document" in node.problem
    code, out, _ = cli("report", str(tmp_path / "n"))
    assert code == ExitCode.REPORT_UNREADABLE and "0 ready" in out and "several JSON documents" in out


def test_a_check_file_names_its_node_figures_and_versions() -> None:
    node = nodefiles.parse(json.dumps(ff.check(BROKEN, "gpu003")).encode(), "x.json")
    assert node.host == "gpu003" and node.verdict == "NOT READY"
    assert [f.check for f in node.failures][:3] == ["health.ecc", "health.row_remap", "health.recovery_action"]
    assert node.remedy == "GPU reset needed"
    assert node.gpus == ("NVIDIA A100-SXM4-80GB",)
    assert node.versions == {
        "Driver": "535.129.03",
        "CUDA (driver max)": "12.2",
        "torch": "2.3.1+cu121",
        "torch CUDA build": "12.1",
    }
    assert node.metrics == {
        "ecc_uncorrected": 5.0,
        "ecc_corrected": 4031.0,
        "remapped_rows": 4.0,
        "temperature_c": 89.0,
    }


def test_each_failure_carries_its_scope_action_and_gpu_uuid() -> None:
    data = ff.check(BROKEN, "gpu003")
    ecc = nodefiles.parse(json.dumps(data).encode(), "x.json").failures[0]
    assert (ecc.check, ecc.target, ecc.scope, ecc.action) == ("health.ecc", "GPU 0", "node", "reset")
    assert ecc.uuid == data["gpus"][0]["uuid"] and ecc.uuid.startswith("GPU-")
    # A file written before results carried them: the check's declaration says.
    for c in data["checks"]:
        c.pop("scope"), c.pop("action")
    c = next(c for c in data["checks"] if c["id"] == "health.ecc")
    c["id"], c["status"] = "env.visible_devices", "FAIL"
    old = nodefiles.parse(json.dumps(data).encode(), "x.json").failures[0]
    assert (old.check, old.scope, old.action) == ("env.visible_devices", "job", "fix_job")


def test_a_node_name_is_one_name_or_nothing() -> None:
    for good in ("gpu001", "node-1.cluster", "dgx_a100-07", "a" * 253):
        assert hostlists.is_node_name(good)
    for bad in ("gpu[1-3]", "a,b", "a b", "-x", "", "a\nb", "gpu1\x1b[2J", "NodeName=x", "a" * 254, 'a"b', "é"):
        assert not hostlists.is_node_name(bad), bad


def test_without_slurm_the_hostname_names_the_node() -> None:
    data = ff.check(HEALTHY, "x")
    data["slurm_node"] = None
    assert nodefiles.parse(json.dumps(data).encode(), "n.json").host == "dgx-h100-07"


def test_a_snapshot_and_a_memory_file_merge_with_the_check_of_the_same_node(tmp_path: Path) -> None:
    out = tmp_path / "n"
    ff.write(out, "a.check.json", ff.check(HEALTHY, "dgx-h100-07"))
    ff.write(out, "a.snapshot.json", ff.snapshot(HEALTHY))
    ff.write(out, "a.memory.json", ff.memory(HEALTHY))
    snap = nodefiles.read(str(out / "a.snapshot.json"))
    assert snap.kind is Kind.SNAPSHOT and snap.versions["Driver"] == "550.54.15" and len(snap.gpus) == 8
    fleet_report = report.build(nodefiles.read(f) for f in report.node_files([str(out)]))
    (node,) = fleet_report.nodes
    assert node.host == "dgx-h100-07" and node.state is State.READY
    assert set(node.kinds) == {Kind.CHECK, Kind.SNAPSHOT, Kind.MEMORY}
    assert fleet_report.skew == ()
    older = {"schema": "gpudiag.memory/1", "host": "n2", "gpus": [{"name": "NVIDIA A40"}, {"name": None}]}
    assert nodefiles.parse(json.dumps(older).encode(), "m.json").gpus == ("NVIDIA A40", "unknown GPU")


# --- the fleet -------------------------------------------------------------------------------


def test_failures_are_grouped_by_check_in_hostlist_form(cli: Cli, tmp_path: Path) -> None:
    nodes = {"gpu001": HEALTHY, "gpu002": HEALTHY, "gpu003": BROKEN, "gpu017": BROKEN}
    nodes |= {"gpu018": BROKEN, "gpu019": BROKEN, "gpu020": "gpu-lost"}
    directory = fleet(tmp_path, nodes)
    code, out, _ = cli("report", str(directory), "--expect", "gpu[001-021]")
    assert code == ExitCode.FAILED
    assert "21 node(s) expected as gpu[001-021]: 2 ready, 5 not ready, 0 unreadable, 14 missing" in out
    assert "Ready: 2  gpu[001-002]" in out
    assert "Not ready: 5  gpu[003,017-020]  (5 to drain, 0 job only)" in out
    assert "health.ecc              node      4  gpu[003,017-019]  e.g. GPU 0: 2 uncorrected ECC error(s)" in out
    assert "health.row_remap        node      4  gpu[003,017-019]  e.g. GPU 0: row remap pending" in out
    assert "(GPU reset needed)" in out
    assert "nvml.gpu_lost           node      1  gpu020" in out
    assert "Missing: 14  gpu[004-016,021]" in out


def test_version_skew_names_each_value_and_its_nodes(tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"n1": HEALTHY, "n2": HEALTHY, "n3": "driver535-torch-cu128"})
    fleet_report = report.build(nodefiles.read(f) for f in report.node_files([str(directory)]))
    skew = {s.field: s.values for s in fleet_report.skew}
    assert skew["Driver"][0] == ("550.54.15", ("n1", "n2"))
    assert skew["Driver"][1][1] == ("n3",)
    assert "GPUs" in skew and skew["GPUs"][0] == ("8× NVIDIA H100 80GB HBM3", ("n1", "n2"))


def test_bandwidth_outliers_against_the_fleets_median(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    for i in range(1, 11):
        ff.write(out, f"gpu{i:03d}.json", ff.bench(f"gpu{i:03d}", h2d=25.0 + (i % 3) * 0.2))
    ff.write(out, "gpu011.json", ff.bench("gpu011", h2d=12.1))  # a GPU behind a link trained down
    code, text, _ = cli("report", str(out))
    assert code == ExitCode.OK  # an outlier is a lead, not a failure
    assert "H2D bandwidth      1  gpu011  12.1 GB/s (fleet median 25.2 GB/s)" in text
    assert text.count("bandwidth") == 1
    assert "gpu011  READY" in cli("report", str(out), "--nodes")[1]
    data = json.loads(cli("report", str(out), "--json")[1])
    assert data["outliers"]["found"] == [{"node": "gpu011", "figure": "h2d_gbps", "value": 12.1, "median": 25.2}]
    assert data["outliers"]["fleet"]["d2h_gbps"]["median"] == pytest.approx(26.0)


def test_the_outlier_rule() -> None:
    same = {f"n{i}": {"h2d_gbps": 25.0, "temperature_c": 40.0, "ecc_uncorrected": 0.0} for i in range(8)}
    assert outliers.find(same)[0] == []  # MAD 0: the floors keep identical nodes quiet
    noisy = same | {"n8": {"h2d_gbps": 23.5, "temperature_c": 44.0, "ecc_uncorrected": 0.0}}
    assert outliers.find(noisy)[0] == []  # within 10 % and 5 °C
    bad = same | {"n8": {"h2d_gbps": 31.0, "temperature_c": 60.0, "ecc_uncorrected": 2.0}}
    found = {(o.host, o.figure.name) for o in outliers.find(bad)[0]}
    assert found == {("n8", "temperature_c"), ("n8", "ecc_uncorrected")}  # faster is not a fault
    assert outliers.find({"a": {"h2d_gbps": 1.0}, "b": {"h2d_gbps": 100.0}})[0] == []  # two nodes: no fleet
    spread = {f"n{i}": {"matmul_tflops": 40.0 + i} for i in range(10)} | {"slow": {"matmul_tflops": 20.0}}
    ((o,), stats) = outliers.find(spread)
    assert (o.host, o.median) == ("slow", 44.0) and stats["matmul_tflops"][2] == 11


def test_hostlists() -> None:
    assert hostlists.collect(["gpu019", "gpu003", "gpu018", "gpu017"]) == "gpu[003,017-019]"
    assert hostlists.collect(["node10", "node2", "login"]) == "login,node[2,10]"
    assert hostlists.expand("node[001-003],gpu7") == ["node001", "node002", "node003", "gpu7"]
    assert hostlists.collect([]) == ""


@pytest.mark.parametrize("expect", ["node[001-", "node[3-1]", ""])
def test_a_bad_expect_is_a_usage_error(cli: Cli, tmp_path: Path, expect: str) -> None:
    directory = fleet(tmp_path, {"node001": HEALTHY})
    code, out, err = cli("report", str(directory), "--expect", expect)
    assert code == ExitCode.USAGE and "--expect" in err, out + err


def test_usage_errors(cli: Cli, tmp_path: Path) -> None:
    assert cli("report", str(tmp_path / "nope"))[0] == ExitCode.USAGE
    (tmp_path / "empty").mkdir()
    code, _, err = cli("report", str(tmp_path / "empty"))
    assert code == ExitCode.USAGE and "no node files (*.json)" in err
    # With --expect, an empty directory is a fleet where every node is missing.
    code, out, _ = cli("report", str(tmp_path / "empty"), "--expect", "n[1-2]")
    assert code == ExitCode.FAILED and "Missing: 2  n[1-2]" in out


@pytest.mark.parametrize(
    ("nodes", "extra", "code"),
    [
        ({"a1": HEALTHY, "a2": HEALTHY}, None, ExitCode.OK),
        ({"a1": HEALTHY, "a2": BROKEN}, None, ExitCode.FAILED),
        ({"a1": HEALTHY}, b"", ExitCode.REPORT_UNREADABLE),
        ({"a1": BROKEN}, b"", ExitCode.FAILED),  # a failure outranks an unreadable file
    ],
)
def test_exit_codes(cli: Cli, tmp_path: Path, nodes: dict[str, str], extra: bytes | None, code: int) -> None:
    directory = fleet(tmp_path, nodes)
    if extra is not None:
        ff.write(directory, "a9.json", extra)
    assert cli("report", str(directory))[0] == code
    assert cli("report", str(directory), "--json")[0] == code


def test_json_output(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu001": HEALTHY, "gpu002": BROKEN})
    ff.write(directory, "gpu004.json", b"{")
    code, out, _ = cli("report", str(directory), "--expect", "gpu[001-004]", "--json")
    data = json.loads(out)
    assert data["schema"] == "gpudiag.report/1" and data["exit_code"] == code == 1
    assert data["summary"] == {"nodes": 4, "ready": 1, "not_ready": 1, "unreadable": 1, "missing": 1}
    assert data["hostlists"] == {"ready": "gpu001", "not_ready": "gpu002", "unreadable": "gpu004", "missing": "gpu003"}
    assert data["drain"] == {"count": 1, "nodes": "gpu002"} and data["invalid_names"] == []
    assert data["failures"][0] == {
        "check": "health.ecc",
        "nodes": "gpu002",
        "count": 1,
        "example": "GPU 0: 2 uncorrected ECC error(s) since the driver loaded",
        "scope": "node",
    }
    assert data["unreadable_by_cause"] == [
        {
            "cause": "truncated JSON",
            "count": 1,
            "nodes": "gpu004",
            "example": "truncated or malformed JSON (the node was killed while writing?)",
            "example_file": f"{directory}/gpu004.json",
        }
    ]
    node = {n["node"]: n for n in data["nodes"]}
    assert node["gpu002"]["remedy"] == "GPU reset needed"
    assert node["gpu002"]["gpus"] == "1× NVIDIA A100-SXM4-80GB" and node["gpu002"]["gpu_count"] == 1
    assert node["gpu004"]["problems"] == [
        f"{directory}/gpu004.json: truncated or malformed JSON (the node was killed while writing?)"
    ]
    assert node["gpu003"]["state"] == "missing"
    assert node["gpu002"]["drain"] is True and node["gpu001"]["drain"] is False
    assert node["gpu004"]["causes"] == ["truncated JSON"] and node["gpu004"]["name_valid"] is True
    # What the command streams, node by node, is the whole report object.
    files = (nodefiles.read(f) for f in report.node_files([str(directory)]))
    whole = report.build(files, report.expected_nodes("gpu[001-004]"))
    assert data == json.loads(json.dumps(report_view.to_json(whole)))


def test_junit_has_a_case_per_node(cli: Cli, tmp_path: Path) -> None:
    """By default one test case per node (50,000 nodes: 50,000 cases, not 1.35 million)."""
    directory = fleet(tmp_path, {"gpu001": HEALTHY, "gpu002": BROKEN, "gpu005": HEALTHY})
    ff.write(directory, "gpu005.json", ff.check(HEALTHY, "gpu005", "--require-driver", "999"))  # job only
    ff.write(directory, "gpu004.json", b"")
    junit = tmp_path / "report.xml"
    code, out, err = cli("report", str(directory), "--expect", "gpu[001-005]", "--junit", str(junit))
    assert code == ExitCode.FAILED, out + err
    root = ET.parse(junit).getroot()
    cases = {c.get("classname"): c for c in root.iter("testcase")}
    assert len(list(root.iter("testcase"))) == 5 and root.get("tests") == "5"
    assert (root.get("failures"), root.get("errors")) == ("2", "2")
    assert list(cases["gpudiag.report.gpu001"]) == []  # ready: passed
    failure = cases["gpudiag.report.gpu002"].find("failure")
    assert failure is not None and failure.get("type") == "NOT READY"
    assert (failure.get("message") or "").startswith("health.ecc GPU 0: 2 uncorrected ECC error(s)")
    assert (failure.get("message") or "").endswith(" more)")
    job = cases["gpudiag.report.gpu005"].find("failure")
    assert job is not None and job.get("type") == "NOT READY (job)"
    assert cases["gpudiag.report.gpu003"].find("error") is not None  # missing
    assert "empty file" in (cases["gpudiag.report.gpu004"].find("error").get("message") or "")  # type: ignore[union-attr]
    code, _, err = cli("report", str(directory), "--junit-per-check")
    assert code == ExitCode.USAGE and "give --junit FILE too" in err


def test_junit_per_check_has_a_case_per_node_and_check(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu001": HEALTHY, "gpu002": BROKEN})
    ff.write(directory, "gpu004.json", b"")
    junit = tmp_path / "report.xml"
    cli("report", str(directory), "--expect", "gpu[001-004]", "--junit", str(junit), "--junit-per-check")
    cases = ET.parse(junit).getroot().findall(".//testcase")
    by_node: dict[str, list[ET.Element]] = {}
    for case in cases:
        by_node.setdefault(case.get("classname", ""), []).append(case)
    healthy = by_node["gpudiag.report.gpu001"]
    ids = [c.get("name") for c in healthy]
    assert len(ids) == len(set(ids)) > 20 and "health.ecc" in ids  # one per check, not per GPU
    assert not any(c.find("failure") is not None for c in healthy)
    failed = {c.get("name") for c in by_node["gpudiag.report.gpu002"] if c.find("failure") is not None}
    assert {"health.ecc", "health.row_remap", "health.recovery_action"} <= failed
    (missing,) = by_node["gpudiag.report.gpu003"]
    assert missing.find("error") is not None
    (unreadable,) = by_node["gpudiag.report.gpu004"]
    assert "empty file" in (unreadable.find("error").get("message") or "")  # type: ignore[union-attr]


def test_rendered_report_at_a_fixed_width(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu1": HEALTHY, "gpu2": BROKEN, "gpu3": HEALTHY})
    ff.write(directory, "gpu5.json", b"")
    code, out, _ = cli("report", str(directory), "--expect", "gpu[1-5]", "--nodes", width=100)
    assert code == ExitCode.FAILED
    golden.assert_matches_golden(GOLDEN / "report-fleet.txt", out.replace(str(directory), "{directory}"))


def test_check_json_carries_the_figures_and_the_slurm_node(cli: Cli) -> None:
    data = json.loads(cli.replay(BROKEN, "check", "--json", "--no-torch", env={"SLURMD_NODENAME": "gpu003"})[1])
    assert data["slurm_node"] == "gpu003" and data["host"] == "a100-node-31"
    (gpu,) = data["gpus"]
    assert gpu["remap_pending"] is True and gpu["recovery_action"] == 1 and gpu["matmul_tflops"] is None
    memory = json.loads(cli.replay(BROKEN, "memory", "--json", env={"SLURMD_NODENAME": "gpu003"})[1])
    assert (memory["host"], memory["slurm_node"]) == ("a100-node-31", "gpu003")


@pytest.mark.slow
def test_real_bench_transfer_output_is_read(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench-transfer --json as the command writes it (the real child on fake copies), healthy and trained down."""
    from tests.test_bench_cli import _fake_child

    with monkeypatch.context() as patch:
        _fake_child(patch, "h100x8-healthy", default_rate=53e9, rates={"d2d": 2.9e12})
        args = ("bench-transfer", "--device", "0,1", "--modes", "h2d,d2h,d2d", "--json")
        code, out, _ = cli(*args, env={"SLURMD_NODENAME": "gpu001"})
    assert code == ExitCode.OK
    healthy = nodefiles.parse(out.encode(), "x.json")
    assert healthy.kind is Kind.BENCH and healthy.host == "gpu001" and healthy.failures == ()
    assert healthy.metrics == pytest.approx({"h2d_gbps": 53.0, "d2h_gbps": 53.0, "d2d_gbps": 2900.0})

    with monkeypatch.context() as patch:
        _fake_child(patch, "h100-pcie-gen2-trained-down", default_rate=6.4e9, rates={"d2d": 1.0e12})
        code, out, _ = cli("bench-transfer", "--iters", "4", "--samples", "2", "--json")
    assert code == ExitCode.FAILED
    slow = nodefiles.parse(out.encode(), "x.json")
    assert slow.host == json.loads(out)["host"] and slow.metrics["h2d_gbps"] == pytest.approx(6.4)
    assert [f.check for f in slow.failures] == ["bench-transfer"]
    assert "host copies below expected" in slow.failures[0].finding


# --- names are data, never syntax ---------------------------------------------------------------

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # all but the newline


@pytest.mark.parametrize("name", ["gpu[1-3]", "a,b", "gpu1\x1b[2J", "x y", "NodeName=x", "gpu1\nnode9"])
def test_a_node_name_with_syntax_in_it_makes_the_file_unreadable(cli: Cli, tmp_path: Path, name: str) -> None:
    from gpudiag.fleet import drain

    data = ff.check(BROKEN, name)
    directory = tmp_path / "n"
    ff.write(directory, "gpu007.json", data)
    ff.write(directory, "gpu008.json", ff.check(HEALTHY, "gpu008"))
    fleet_report = report.build(nodefiles.read(f) for f in report.node_files([str(directory)]))
    bad = next(n for n in fleet_report.nodes if n.host == "gpu007")  # attributed to its file's name
    assert bad.state is State.UNREADABLE and bad.unread[0][1] is nodefiles.Cause.BAD_NAME
    assert f"invalid node name {name!r} in slurm_node" in bad.problems[0]
    steps = drain.plan(drain.from_report(fleet_report), {}, resume=False)  # never drained, never expanded
    assert [(s.node, s.verb) for s in steps] == [("gpu007", drain.Verb.SKIP)]
    code, out, err = cli("report", str(directory), "--nodes")
    assert code == ExitCode.REPORT_UNREADABLE, out + err
    assert not CONTROL.search(out)
    assert "gpu007  UNREADABLE" in out and "invalid node name" in out
    plain = tmp_path / "plain"  # the same fleet with a harmless bad name: as many lines
    ff.write(plain, "gpu007.json", ff.check(BROKEN, "x[1]"))
    ff.write(plain, "gpu008.json", ff.check(HEALTHY, "gpu008"))
    assert len(out.splitlines()) == len(cli("report", str(plain), "--nodes")[1].splitlines())
    data_out = json.loads(cli("report", str(directory), "--json")[1])
    assert data_out["hostlists"]["unreadable"] == "gpu007"


@pytest.mark.parametrize("file_name", ["gpu[1-3]", "a,b", "bad\nname", "x\x1b[2J"])
def test_a_file_whose_only_name_is_not_a_node_name_is_listed_by_it_escaped(
    cli: Cli, tmp_path: Path, file_name: str
) -> None:
    data = ff.check(HEALTHY, "x")
    data["slurm_node"] = data["host"] = None  # so the file's name is all there is
    directory = tmp_path / "n"
    ff.write(directory, f"{file_name}.json", data)
    ff.write(directory, "gpu1.json", ff.check(HEALTHY, "gpu1"))
    code, out, err = cli("report", str(directory), "--nodes")
    assert code == ExitCode.REPORT_UNREADABLE, out + err
    assert not CONTROL.search(out) and len(out.splitlines()) == 10, out  # no name split a row
    assert f"Unreadable: 1  {file_name!r}" in out  # quoted, what is not printable escaped: 'bad\nname'
    assert f"{file_name!r}  UNREADABLE" in out
    data_out = json.loads(cli("report", str(directory), "--json")[1])
    assert data_out["invalid_names"] == [file_name]  # raw in JSON: JSON escapes it, and it is data there
    assert data_out["hostlists"]["unreadable"] == "" and data_out["hostlists"]["ready"] == "gpu1"
    (node,) = [n for n in data_out["nodes"] if n["node"] == file_name]
    assert node["name_valid"] is False and node["drain"] is False


@pytest.mark.parametrize("expect", ["gpu1\nx", "gpu1 x", "gpu1,a=b", "gpu\x1b[2J"])
def test_an_expect_entry_that_is_not_a_node_name_is_a_usage_error(cli: Cli, tmp_path: Path, expect: str) -> None:
    directory = fleet(tmp_path, {"gpu1": HEALTHY})
    code, out, err = cli("report", str(directory), "--expect", expect)
    assert code == ExitCode.USAGE and "--expect" in err, out + err
    assert err.count("\n") == 1 and not CONTROL.search(err)


# --- what the file is, before what it holds -----------------------------------------------------


def test_links_fifos_and_directories_never_block_or_crash(cli: Cli, tmp_path: Path) -> None:
    import signal

    directory = fleet(tmp_path, {"gpu1": HEALTHY})
    os.symlink("loop.json", directory / "loop.json")
    os.symlink("gpu1.json", directory / "gpu2.json")  # a link to a good file: still not read through
    os.symlink("/dev/zero", directory / "gpu3.json")
    os.mkfifo(directory / "gpu4.json")
    (directory / "sub.json").mkdir()  # a directory is not a node file: left out

    def too_slow(signum: int, frame: object) -> None:
        raise TimeoutError("report blocked on a node file")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(30)
    try:
        code, out, err = cli("report", str(directory), "--nodes")
        fifo_alone = nodefiles.read(str(directory / "gpu4.json"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert code == ExitCode.REPORT_UNREADABLE, out + err
    assert "5 node(s): 1 ready, 0 not ready, 4 unreadable" in out  # gpu2, gpu3, gpu4 and loop
    assert "gpu4  UNREADABLE  " in out and "a FIFO, not a regular file" in out
    assert re.search(r"symbolic link +3  gpu\[2-3\],loop  e\.g\. gpu2\.json: a symbolic link", out)
    assert fifo_alone.cause is nodefiles.Cause.NOT_REGULAR


def test_a_file_named_on_the_command_line_is_held_to_the_same_rules(cli: Cli, tmp_path: Path) -> None:
    os.symlink("loop.json", tmp_path / "loop.json")
    code, out, err = cli("report", str(tmp_path / "loop.json"))
    assert code == ExitCode.REPORT_UNREADABLE and "symbolic link" in out, out + err


def mutated(change: dict[str, object] | None = None, **checks: object) -> bytes:
    """The healthy example's check file with top-level fields replaced, and check results changed
    (``health_ecc={"status": "FAIL"}`` changes every health.ecc result)."""
    data = ff.check(HEALTHY, "gpu1")
    data.update(change or {})
    for key, fields in checks.items():
        for c in data["checks"]:
            if c["id"] == key.replace("_", ".", 1):
                c.update(fields)  # type: ignore[call-overload]
    return json.dumps(data, indent=2).encode()


# Each document is made when its test runs, not when every worker collects this module (a
# check run and fifteen JSON dumps, ~0.4 s each time).
CORRUPT: list[tuple[Callable[[], bytes], nodefiles.Cause]] = [
    (lambda: mutated(None, health_ecc={"status": "FAIL"}), nodefiles.Cause.CONTRADICTS),  # READY, yet a FAIL
    (lambda: mutated({"verdict": "NOT READY"}), nodefiles.Cause.CONTRADICTS),  # NOT READY, yet nothing failed
    (lambda: mutated({"verdict": "UNKNOWN"}), nodefiles.Cause.CONTRADICTS),  # nothing that could not run
    (lambda: mutated({"verdict": "READX"}), nodefiles.Cause.MALFORMED),
    (lambda: mutated(None, health_ecc={"status": "FAIX"}), nodefiles.Cause.MALFORMED),
    (lambda: mutated(None, health_ecc={"status": "FAIL", "scope": "rack"}), nodefiles.Cause.MALFORMED),
    (lambda: mutated(None, health_ecc={"id": "health.ecc\x1b[2J"}), nodefiles.Cause.MALFORMED),
    (lambda: mutated({"gpus": [{"index": 0, "ecc_aggregate_uncorrected": 10**30}]}), nodefiles.Cause.MALFORMED),
    (lambda: mutated({"gpus": [{"index": 0, "ecc_aggregate_uncorrected": -1}]}), nodefiles.Cause.MALFORMED),
    (lambda: mutated({"gpus": [{"index": 0, "temperature_c": 1e308}]}), nodefiles.Cause.MALFORMED),
    (lambda: mutated().replace(b'"temperature_c": 34', b'"temperature_c": 1e999', 1), nodefiles.Cause.MALFORMED),
    (lambda: mutated().replace(b'"temperature_c": 34', b'"temperature_c": NaN', 1), nodefiles.Cause.TRUNCATED),
    (
        lambda: mutated({"zz": "caf\udce9"}).replace(b"\\udce9", b"\xe9"),
        nodefiles.Cause.BAD_UTF8,
    ),  # a stray Latin-1 byte
    (lambda: mutated().replace(b'"source"', b'"sou\xffrce"', 1), nodefiles.Cause.BAD_UTF8),  # in a key nobody reads
    (lambda: mutated({"zz": 0}).replace(b'"zz": 0', b'"zz": ' + b"[" * 5000 + b"]" * 5000), nodefiles.Cause.TOO_DEEP),
]


@pytest.mark.parametrize(
    ("raw", "cause"), CORRUPT, ids=[f"raw{i}-{cause.value}" for i, (_, cause) in enumerate(CORRUPT)]
)
def test_a_corrupted_document_is_unreadable_never_ready(raw: Callable[[], bytes], cause: nodefiles.Cause) -> None:
    node = nodefiles.parse(raw(), "nodes/gpu1.json")
    assert (node.kind, node.cause, node.host) == (None, cause, "gpu1"), node.problem


def test_consistent_verdicts_are_read() -> None:
    strict = json.loads(mutated(None, health_ecc={"status": "WARN"}))
    strict |= {"strict": True, "verdict": "NOT READY", "exit_code": 1}  # under --strict a warning fails
    strict["summary"] |= {"pass": strict["summary"]["pass"] - 8, "warn": strict["summary"]["warn"] + 8}
    node = nodefiles.parse(json.dumps(strict).encode(), "gpu1.json")
    assert node.verdict == "NOT READY" and {f.check for f in node.failures} == {"health.ecc"}
    unknown = mutated(
        {"verdict": "UNKNOWN", "exit_code": 5, "could_not_run": ["the torch probe could not start: killed"]}
    )
    node = nodefiles.parse(unknown, "gpu1.json")
    assert node.verdict == "UNKNOWN" and [(f.check, f.scope) for f in node.failures] == [
        ("gpudiag.could_not_run", "job")
    ]


# --- several files for one node ---------------------------------------------------------------


def test_the_worse_of_two_files_wins_and_the_line_says_which(cli: Cli, tmp_path: Path) -> None:
    ff.write(tmp_path / "a", "gpu1.json", ff.check(HEALTHY, "gpu1"))
    ff.write(tmp_path / "b", "gpu1.json", ff.check(BROKEN, "gpu1"))
    ff.write(tmp_path / "a", "gpu2.json", ff.check(HEALTHY, "gpu2"))
    ff.write(tmp_path / "b", "gpu2.json", b"")
    ff.write(tmp_path / "a", "gpu3.json", ff.check(HEALTHY, "gpu3"))
    ff.write(tmp_path / "b", "gpu3.json", ff.bench("gpu3", h2d=25.0))
    code, out, _ = cli("report", str(tmp_path / "a"), str(tmp_path / "b"), "--nodes")
    assert code == ExitCode.FAILED
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("gpu")}
    assert f"NOT READY   2 files; worst: {tmp_path}/b/gpu1.json" in lines["gpu1"]
    assert f"UNREADABLE  2 files; worst: {tmp_path}/b/gpu2.json" in lines["gpu2"]
    assert "READY       8× NVIDIA H100" in lines["gpu3"] and "files" not in lines["gpu3"]  # agree: nothing to say
    data = json.loads(cli("report", str(tmp_path / "a"), str(tmp_path / "b"), "--json")[1])
    nodes = {n["node"]: n for n in data["nodes"]}
    assert nodes["gpu1"]["worst_file"] == f"{tmp_path}/b/gpu1.json" and nodes["gpu3"]["worst_file"] is None


# --- scope: the job's failures never drain the node ---------------------------------------------


def test_a_node_that_failed_only_the_jobs_checks_is_not_ready_but_not_drained(cli: Cli, tmp_path: Path) -> None:
    directory = tmp_path / "n"
    ff.write(directory, "gpu1.json", ff.check(HEALTHY, "gpu1", "--require-driver", "999"))  # req.driver: job
    ff.write(directory, "gpu2.json", ff.check("misconfigured-node", "gpu2"))  # env (job) and config (node)
    ff.write(directory, "gpu3.json", ff.check(HEALTHY, "gpu3"))
    fleet_report = report.build(nodefiles.read(f) for f in report.node_files([str(directory)]))
    states = {n.host: (n.state, n.drain) for n in fleet_report.nodes}
    assert states == {
        "gpu1": (State.NOT_READY, False),
        "gpu2": (State.NOT_READY, True),
        "gpu3": (State.READY, False),
    }
    code, out, _ = cli("report", str(directory), "--nodes")
    assert code == ExitCode.FAILED  # not ready for the job: never green
    assert "Not ready: 2  gpu[1-2]  (1 to drain, 1 job only)" in out
    assert re.search(r"req\.driver +job +1  gpu1  e\.g\. driver 550\.54\.15, required ≥ 999", out)
    assert re.search(r"env\.visible_devices +job +1  gpu2", out)
    assert re.search(r"config\.compute_mode +node +1  gpu2", out)
    assert "gpu1  NOT READY   (job)  8× NVIDIA H100" in out and "gpu2  NOT READY   2× NVIDIA A40" in out
    data = json.loads(cli("report", str(directory), "--json")[1])
    assert data["drain"] == {"count": 1, "nodes": "gpu2"}
    assert {n["node"]: n["drain"] for n in data["nodes"]} == {"gpu1": False, "gpu2": True, "gpu3": False}
    assert {f["check"]: f["scope"] for f in data["failures"]}["req.driver"] == "job"


# --- untrusted text meets the terminal and the XML escaped --------------------------------------


def test_control_characters_from_node_files_are_escaped_everywhere(cli: Cli, tmp_path: Path) -> None:
    data = ff.check(BROKEN, "gpu1")
    evil = "\x1b[2J\x1b]0;pwned\x07line\nbreak\u202eevil\r"
    for c in data["checks"]:
        if c["status"] == "FAIL":
            c["finding"] = evil
    data["gpus"][0]["name"] = f"A100{evil}"
    data["versions"]["Driver"] = f"535{evil}"
    directory = tmp_path / "n"
    ff.write(directory, "gpu1.json", data)
    ff.write(directory, "gpu2.json", ff.check(HEALTHY, "gpu2"))
    ff.write(directory, "gpu3.json", b"\x1b[2Jnot json\n")
    junit = tmp_path / "r.xml"
    code, out, err = cli("report", str(directory), "--nodes", "--junit", str(junit))
    assert code == ExitCode.FAILED, out + err
    assert not CONTROL.search(out) and "\\x1b[2J" in out
    plain = cli("report", str(fleet(tmp_path / "plain", {"gpu1": BROKEN, "gpu2": HEALTHY})), "--nodes")[1]
    # + the unreadable gpu3 (a blank, its group, its cause, its node line): nothing split a row
    assert len(out.splitlines()) == len(plain.splitlines()) + 4
    root = ET.parse(junit).getroot()  # valid XML: control characters are not allowed in XML 1.0
    messages = [e.get("message", "") for e in root.iter("failure")]
    assert messages and all("\\x1b[2J" in m for m in messages if "line" in m)
    assert json.loads(cli("report", str(directory), "--json")[1])["nodes"][0]["failures"][0]["finding"] == evil


# --- JUnit: streamed, valid, written atomically ---------------------------------------------------


def test_junit_is_valid_xml_and_replaces_the_old_file_atomically(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu1": HEALTHY, "gpu2": BROKEN, "gpu3": HEALTHY})
    ff.write(directory, "x[1].json", {**ff.check(HEALTHY, "x"), "slurm_node": None, "host": None})
    junit = tmp_path / "out" / "report.xml"
    junit.parent.mkdir()
    junit.write_text("old")
    cli("report", str(directory), "--junit", str(junit), "--expect", "gpu[1-4]")
    assert os.listdir(junit.parent) == ["report.xml"]  # no temporary file left behind
    assert oct(junit.stat().st_mode & 0o777) != oct(0o600)  # made as open() makes files, not mkstemp
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    suite = root.find("testsuite")
    assert suite is not None and int(suite.get("tests", "")) == len(cases)
    assert int(suite.get("failures", "")) == sum(1 for c in cases if c.find("failure") is not None)
    assert int(suite.get("errors", "")) == sum(1 for c in cases if c.find("error") is not None) == 2
    assert int(suite.get("skipped", "")) == sum(1 for c in cases if c.find("skipped") is not None)
    classes = {c.get("classname") for c in cases}
    assert classes == {f"gpudiag.report.{n}" for n in ("gpu1", "gpu2", "gpu3", "gpu4", "x[1]")}
    # Healthy nodes share one rendered fragment: theirs must still carry their own names.
    assert [c.get("name") for c in cases if c.get("classname") == "gpudiag.report.gpu1"] == [
        c.get("name") for c in cases if c.get("classname") == "gpudiag.report.gpu3"
    ]


def test_junit_that_cannot_be_written_is_one_line(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu1": HEALTHY})
    code, _, err = cli("report", str(directory), "--junit", str(tmp_path / "no" / "r.xml"))
    assert code == ExitCode.USAGE and err.startswith("gpudiag: cannot write") and err.count("\n") == 1


# --- the grouped view stays short at fleet scale ----------------------------------------------


def synthetic_fleet(nodes: int) -> report.Report:
    """A messy fleet built in memory: 40 different failed checks, every unreadable cause, 30 driver
    versions, bandwidth outliers, two names that are no node names."""
    failed, node_file = nodefiles.Failure, nodefiles.NodeFile
    files = []
    causes = list(nodefiles.Cause)
    for i in range(nodes):
        host, path = f"node{i:05d}", f"nodes/node{i:05d}.json"
        metrics = {"h2d_gbps": 25.0 if i % 97 else 5.0, "temperature_c": 40.0 + (i % 7)}
        versions = {"Driver": f"550.{i % 30 if i % 11 == 0 else 54}", "torch": "2.5.1"}
        if i % 13 == 0:
            files.append(nodefiles.unreadable(path, causes[i % len(causes)], f"why {i}"))
        elif i % 7 == 0:
            failure = failed(f"check.{i % 40}", "GPU 0", f"broken {i}", "job" if i % 3 else "node")
            gpus = ("H100",) * 8
            files.append(node_file(path, host, Kind.CHECK, "", "NOT READY", (failure,), versions, gpus, metrics))
        else:
            files.append(node_file(path, host, Kind.CHECK, "", "READY", (), versions, ("H100",) * 8, metrics))
    files.append(nodefiles.unreadable("nodes/bad[1].json", nodefiles.Cause.BAD_NAME, "invalid node name"))
    files.append(nodefiles.unreadable("nodes/a,b.json", nodefiles.Cause.BAD_NAME, "invalid node name"))
    return report.build(files, report.expected_nodes(f"node[00000-{nodes + 99:05d}]"))


@pytest.mark.slow  # 10 000 node files built and judged: seconds
def test_the_grouped_report_of_10000_nodes_fits_in_100_lines(cli: Cli) -> None:
    from rich.console import Console

    fleet_report = synthetic_fleet(10_000)
    console = Console(width=120, no_color=True, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(report_view.render(fleet_report), crop=False)
    text = console.export_text()
    lines = text.splitlines()
    assert len(lines) <= 100, text
    assert max(len(line) for line in lines) < 400  # hostlists are cut ("+N more"), never the whole fleet
    assert "more checks failed (--json or --nodes for all)" in text and "more values (--json for all)" in text
    assert re.search(r"^  Driver +\d+  550\.54$", text, re.M)  # the majority: a count, not its nodes
    assert "'a,b' 'bad[1]'" in text and "Missing: 100  node[10000-10099]" in text
    assert len(report_view.render(fleet_report, nodes=True).renderables[-1].plain.splitlines()) == 10_102


def test_a_hostlist_cut_to_a_width_is_a_prefix_of_the_hosts() -> None:
    names = [f"gpu{i:05d}" for i in range(5000) if i % 7]
    text, left = hostlists.collect_within(names, 64)
    assert len(text) <= 64 and left > 0
    shown = hostlist.expand_hostlist(text)
    assert shown == names[: len(shown)] and len(shown) + left == len(names)
    assert hostlists.collect_within(names[:3], 64) == ("gpu[00001-00003]", 0)
    assert hostlists.collect_within([], 10) == ("", 0)


def test_junit_follows_a_link_and_writes_a_fifo_in_place(cli: Cli, tmp_path: Path) -> None:
    """Renaming over a link would cut it; renaming over a FIFO or /dev/stdout would replace it."""
    import threading

    directory = fleet(tmp_path, {"gpu1": HEALTHY})
    real = tmp_path / "reports" / "latest.xml"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "report.xml"
    link.symlink_to(real)
    cli("report", str(directory), "--junit", str(link))
    assert link.is_symlink() and real.stat().st_mode & 0o777 == 0o640
    assert ET.parse(real).getroot().tag == "testsuites"

    fifo = tmp_path / "pipe.xml"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    cli("report", str(directory), "--junit", str(fifo))
    reader.join(30)
    assert fifo.is_fifo() and ET.fromstring(received[0]).tag == "testsuites"
