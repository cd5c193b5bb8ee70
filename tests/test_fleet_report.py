"""`gpudiag report`: merging per-node outputs, bad node files, hostlists, skew, outliers, JSON, JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import hostlists, nodefiles, outliers, report
from gpudiag.fleet.nodefiles import Kind
from gpudiag.fleet.report import State
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
    (b"\xff\xfe\x00garbage", "not JSON"),
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
    (b"[" * 100_000 + b"]" * 100_000, "truncated or malformed JSON"),  # deeper than any parser recurses
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


def test_a_document_followed_by_stderr_text_is_read() -> None:
    """Slurm's --output without --error appends gpudiag's stderr lines to the JSON."""
    raw = json.dumps(ff.check(HEALTHY, "gpu001")) + "\ngpudiag: could not run: x\n"
    node = nodefiles.parse(raw.encode(), "nodes/x.json")
    assert (node.kind, node.host, node.verdict) == (Kind.CHECK, "gpu001", "READY")


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
    assert "health.ecc                  4  gpu[003,017-019]  e.g. GPU 0: 2 uncorrected ECC error(s)" in out
    assert "health.row_remap            4  gpu[003,017-019]  e.g. GPU 0: row remap pending" in out
    assert "(GPU reset needed)" in out
    assert "nvml.gpu_lost               1  gpu020" in out
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
    assert "gpu011  H2D bandwidth 12.1 GB/s (fleet median 25.2 GB/s)" in text
    assert text.count("bandwidth") == 1
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
    assert data["failures"][0] == {
        "check": "health.ecc",
        "nodes": "gpu002",
        "count": 1,
        "example": "GPU 0: 2 uncorrected ECC error(s) since the driver loaded",
    }
    node = {n["node"]: n for n in data["nodes"]}
    assert node["gpu002"]["remedy"] == "GPU reset needed"
    assert node["gpu002"]["gpus"] == "1× NVIDIA A100-SXM4-80GB" and node["gpu002"]["gpu_count"] == 1
    assert node["gpu004"]["problems"] == [
        f"{directory}/gpu004.json: truncated or malformed JSON (the node was killed while writing?)"
    ]
    assert node["gpu003"]["state"] == "missing"


def test_junit_has_a_case_per_node_and_check(cli: Cli, tmp_path: Path) -> None:
    directory = fleet(tmp_path, {"gpu001": HEALTHY, "gpu002": BROKEN})
    ff.write(directory, "gpu004.json", b"")
    junit = tmp_path / "report.xml"
    cli("report", str(directory), "--expect", "gpu[001-004]", "--junit", str(junit))
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
    code, out, _ = cli("report", str(directory), "--expect", "gpu[1-5]", width=100)
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
