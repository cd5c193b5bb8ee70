"""One rule for a verdict wherever it is read: a node file is judged by `check`'s own rule
(gpudiag.exitcodes.check_code). Nothing verified is UNKNOWN, never READY and never a reason to
resume; a file whose verdict, exit code, summary and results disagree, or that has a key twice in
one object, is UNREADABLE with the reason; `drain --resume` needs a check of the node itself."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import drain, hostlists, nodefiles, report
from gpudiag.fleet.drain import Current, Verb
from gpudiag.fleet.nodefiles import Cause
from gpudiag.fleet.report import State
from tests import fleet_files as ff
from tests.conftest import Cli

HEALTHY = "h100x8-healthy"
BROKEN = "a100-ecc-errors"
OURS = "gpudiag: health.ecc GPU0 GPU-dead0bad: uncorrected ECC errors; reset (+3 more)"


def skipped_everything(data: dict[str, Any]) -> dict[str, Any]:
    """A READY file whose every result was turned into a SKIP: what the old reader took for READY."""
    for c in data["checks"]:
        c["status"] = "SKIP"
    data["summary"] = {"pass": 0, "warn": 0, "fail": 0, "skip": len(data["checks"])}
    return data


def parse(data: dict[str, Any] | bytes) -> nodefiles.NodeFile:
    raw = data if isinstance(data, bytes) else json.dumps(data, indent=2).encode()
    return nodefiles.parse(raw, "nodes/gpu1.json")


# --- nothing verified ----------------------------------------------------------------------------


def test_the_genuine_nothing_checked_document_reads_unknown(cli: Cli) -> None:
    """`check --only compat.torch --no-torch` exits 7: UNKNOWN. The report reads it so (it read it as
    a contradiction, UNREADABLE), never READY, and does not drain the node for it."""
    code, out, _ = cli.replay(BROKEN, "check", "--only", "compat.torch", "--no-torch", "--json")
    assert code == ExitCode.NOTHING_CHECKED
    data = json.loads(out)
    assert (data["verdict"], data["exit_code"]) == ("UNKNOWN", 7)
    node = parse(out.encode())
    assert node.kind is nodefiles.Kind.CHECK, node.problem
    assert node.verdict == "UNKNOWN" and not node.node_verified
    assert [(f.check, f.scope) for f in node.failures] == [("gpudiag.nothing_checked", "job")]
    (merged,) = report.build([node]).nodes
    assert merged.state is State.NOT_READY and not merged.drain and merged.verified == ()


@pytest.mark.parametrize("empty", [False, True])
def test_a_file_that_verified_nothing_but_says_ready_is_unreadable(empty: bool) -> None:
    data = skipped_everything(ff.check(HEALTHY, "gpu1"))
    if empty:
        data["checks"], data["summary"] = [], {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
    node = parse(data)
    assert (node.kind, node.cause) == (None, Cause.CONTRADICTS)
    assert node.problem == "verdict READY contradicts its own results, which give UNKNOWN (edited or corrupted?)"


@pytest.mark.parametrize("empty", [False, True])
def test_a_file_that_verified_nothing_and_says_so_is_unknown(empty: bool) -> None:
    data = skipped_everything(ff.check(HEALTHY, "gpu1"))
    if empty:
        data["checks"], data["summary"] = [], {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
    data |= {"verdict": "UNKNOWN", "exit_code": 7}
    node = parse(data)
    assert node.verdict == "UNKNOWN" and node.failures[0].check == "gpudiag.nothing_checked"
    assert report.file_state(node) is State.NOT_READY and not node.node_verified


# --- a document that contradicts itself ----------------------------------------------------------


def contradicting() -> list[tuple[dict[str, Any], str]]:
    ready = ff.check(HEALTHY, "gpu1")
    broken = ff.check(BROKEN, "gpu1")
    fails = sum(1 for c in broken["checks"] if c["status"] == "FAIL")
    return [
        ({**ready, "exit_code": 1}, "exit_code 1 contradicts its verdict READY, which is exit 0"),
        ({**broken, "exit_code": 0}, "exit_code 0 contradicts its verdict NOT READY, which is exit 1"),
        ({**ready, "exit_code": 7}, "exit_code 7 contradicts its verdict READY, which is exit 0"),
        (
            {**broken, "summary": {**broken["summary"], "fail": 0}},
            f"summary {broken['summary']['pass']} pass, {broken['summary']['warn']} warn, 0 fail",
        ),
        ({**ready, "summary": {**ready["summary"], "pass": 0}}, "summary 0 pass, 0 warn, 0 fail, 16 skip"),
        ({**broken, "verdict": "READY", "exit_code": 0}, f"verdict READY contradicts its own results ({fails} FAILs)"),
    ]


@pytest.mark.parametrize(("data", "problem"), contradicting())
def test_verdict_exit_code_summary_and_results_must_agree(data: dict[str, Any], problem: str) -> None:
    node = parse(data)
    assert (node.kind, node.cause, node.host) == (None, Cause.CONTRADICTS, "gpu1")
    assert problem.split(" (")[0] in node.problem


# --- a key twice ---------------------------------------------------------------------------------


def twice(key_path: str, first: Any) -> bytes:
    """The healthy file with ``first`` written before the key at ``key_path`` ("checks",
    "checks.0.status", "gpus.3.ecc_aggregate_uncorrected", "summary.fail"): a key given twice."""
    data = ff.check(HEALTHY, "gpu1")
    *parents, key = key_path.split(".")
    obj: Any = data
    for part in parents:
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    marker = "@@TWICE@@"
    items = list(obj.items())
    obj.clear()
    obj[marker] = None
    obj.update(items)
    text = json.dumps(data, indent=2)
    return text.replace(f'"{marker}": null', f'"{key}": {json.dumps(first)}', 1).encode()


def broken_checks() -> list[dict[str, Any]]:
    return [c for c in ff.check(BROKEN, "gpu1")["checks"] if c["status"] == "FAIL"]


@pytest.mark.parametrize(
    ("key_path", "first"),
    [
        ("checks", "@broken"),  # the first "checks" holds FAILs; the reader kept the second, READY
        ("verdict", "NOT READY"),
        ("checks.5.status", "FAIL"),
        ("gpus.3.ecc_aggregate_uncorrected", 7),
        ("versions.Driver", "535.129.03"),
        ("summary.fail", 3),  # in an object the report only counts
        ("source", "live"),  # at the top, in a key it does not read
    ],
)
def test_a_key_twice_at_any_depth_is_unreadable(key_path: str, first: Any) -> None:
    raw = twice(key_path, broken_checks() if first == "@broken" else first)
    assert json.loads(raw)["verdict"] == "READY"  # what a last-key-wins reader sees
    node = nodefiles.parse(raw, "nodes/gpu1.json")
    key = key_path.rsplit(".", 1)[-1]
    assert (node.kind, node.cause, node.host) == (None, Cause.DUPLICATE_KEY, "gpu1"), node.problem
    assert node.problem.startswith(f"key {key!r} twice in one object: readers disagree")


def test_a_key_twice_is_found_however_the_text_is_laid_out() -> None:
    """Blanks before a colon, a string that begins with ':', an escaped quote: the count that spares
    gpudiag's own files the exact check never hides a duplicate."""
    raw = twice("checks.0.status", "FAIL").replace(b'"status": ', b'"status" \n : ')
    assert nodefiles.parse(raw, "gpu1.json").cause is Cause.DUPLICATE_KEY
    data = ff.check(HEALTHY, "gpu1")
    data["checks"][0]["finding"] = ': he said "ok": ' * 3
    fine = json.dumps(data, indent=2).encode()
    assert nodefiles.parse(fine, "gpu1.json").kind is nodefiles.Kind.CHECK
    dup = fine.replace(b'"area": ', b'"id": "nvml.init", "area": ', 1)
    assert nodefiles.parse(dup, "gpu1.json").cause is Cause.DUPLICATE_KEY


def test_a_colon_written_as_an_escape_does_not_balance_a_key_twice() -> None:
    """One key more is one ':' more; a finding's ':' written as \\u003a is one fewer in the text."""
    raw = twice("checks.0.status", "PASS")
    finding = next(c["finding"] for c in ff.check(HEALTHY, "gpu1")["checks"] if ":" in c["finding"])
    escaped = json.dumps(finding).replace(":", "\\u003a", 1).encode()
    balanced = raw.replace(json.dumps(finding).encode(), escaped, 1)
    assert balanced.count(b":") == raw.count(b":") - 1
    assert nodefiles.parse(balanced, "gpu1.json").cause is Cause.DUPLICATE_KEY
    fine = json.dumps(ff.check(HEALTHY, "gpu1"), indent=2).encode().replace(json.dumps(finding).encode(), escaped, 1)
    assert nodefiles.parse(fine, "gpu1.json").kind is nodefiles.Kind.CHECK


@pytest.mark.parametrize("finding", [{"object": "with a key twice"}, 3, None, ["x: y"]])
def test_a_finding_that_is_not_text_is_malformed_even_in_a_passed_check(finding: Any) -> None:
    """A finding is kept as JSON until a failure needs it: still, each must be a string (an object
    there would also hide its keys from the count)."""
    data = ff.check(HEALTHY, "gpu1")
    data["checks"][3]["finding"] = "@@F@@"
    raw = json.dumps(data).replace('"@@F@@"', '{"a": 1, "a": 2}' if isinstance(finding, dict) else json.dumps(finding))
    node = nodefiles.parse(raw.encode(), "gpu1.json")
    assert node.cause in (Cause.MALFORMED, Cause.DUPLICATE_KEY) and node.kind is None, node


def test_a_snapshot_with_a_key_twice_is_unreadable() -> None:
    raw = json.dumps(ff.snapshot(HEALTHY), indent=2).replace('"nvml": {', '"nvml": {"driver_version": "1",', 1)
    node = nodefiles.parse(raw.encode(), "gpu1.json")
    assert node.cause is Cause.DUPLICATE_KEY and "'driver_version' twice" in node.problem


# --- names: never defaulted, never a keyword ------------------------------------------------------


def test_an_empty_slurm_node_never_becomes_the_host_name() -> None:
    data = ff.check(BROKEN, "")
    node = parse(data)
    assert (node.kind, node.cause, node.host) == (None, Cause.BAD_NAME, "gpu1")  # the file's name, not the host's
    assert "invalid node name '' in slurm_node" in node.problem
    data["slurm_node"], data["host"] = None, ""
    assert parse(data).cause is Cause.BAD_NAME


@pytest.mark.parametrize("name", ["ALL", "all", "All", "DEFAULT"])
def test_a_word_scontrol_reads_as_every_node_is_no_node_name(name: str) -> None:
    assert not hostlists.is_node_name(name)
    node = parse(ff.check(BROKEN, name))
    assert (node.kind, node.cause) == (None, Cause.BAD_NAME)
    steps = drain.plan([drain.Target(name, "not_ready", node.failures)], {name: Current("IDLE", "")}, resume=False)
    assert [(s.verb, s.argv()) for s in steps] == [(Verb.SKIP, [])]
    for good in ("allgpu1", "gpu-all", "default1"):
        assert hostlists.is_node_name(good)


# --- drain --resume: only on a check of the node itself -----------------------------------------


def drained_fleet(tmp_path: Path, *options: str) -> list[drain.Target]:
    path = ff.write(tmp_path / "n", "gpu1.json", ff.check(HEALTHY, "gpu1", *options))
    later = time.time() + 60
    import os

    os.utime(path, (later, later))
    return drain.from_report(report.build(nodefiles.read(str(p)) for p in report.node_files([str(tmp_path / "n")])))


@pytest.mark.parametrize(
    ("options", "resumed"),
    [
        ((), True),
        (("--only", "compat.torch"), False),  # every check skipped (no torch): UNKNOWN
        (("--only", "env"), False),  # READY, but only the job's checks ran
    ],
)
def test_resume_needs_node_checks_that_passed(tmp_path: Path, options: tuple[str, ...], resumed: bool) -> None:
    targets = drained_fleet(tmp_path, *options)
    now = {"gpu1": Current("IDLE+DRAIN", OURS, time.time() - 60)}
    (step,) = drain.plan(targets, now, resume=True)
    assert (step.verb is Verb.RESUME) is resumed, step


def test_resume_from_a_report_json_reads_its_verified_files(cli: Cli, tmp_path: Path) -> None:
    targets = drained_fleet(tmp_path, "--only", "env")
    code, out, _ = cli("report", str(tmp_path / "n"), "--json")
    data = json.loads(out)
    assert code == 0 and data["nodes"][0]["verified_files"] == []
    (target,) = drain.from_report_json(out.encode(), "report.json")
    assert target.verified == () == targets[0].verified
    del data["nodes"][0]["verified_files"]  # a report from before they were listed: never resumed
    (old,) = drain.from_report_json(json.dumps(data).encode(), "report.json")
    assert old.verified is None
    (step,) = drain.plan([old], {"gpu1": Current("IDLE+DRAIN", OURS, time.time() - 60)}, resume=True)
    assert step.verb is Verb.KEEP and "run report again" in step.note


def test_a_process_name_that_is_not_utf8_does_not_make_the_file_unreadable(cli: Cli) -> None:
    """gpudiag's JSON writes a byte of a command line that is not UTF-8 as a lone surrogate escape
    (valid JSON that msgspec refuses): the node is judged all the same, and a key twice still counts."""
    code, out, _ = cli.replay(HEALTHY, "check", "--no-torch", "--json")
    assert code == 0
    data = json.loads(out)
    data["checks"][0]["finding"] = "python3 tr\udcffin.py"
    raw = json.dumps(data).encode()
    assert b"\\udcff" in raw
    node = nodefiles.parse(raw, "nodes/gpu1.json")
    assert node.cause is None and node.host == data["host"]
    twice = raw.replace(b'{"schema"', b'{"verdict": "READY", "schema"', 1)
    assert nodefiles.parse(twice, "nodes/gpu1.json").cause is Cause.DUPLICATE_KEY


# --- a node whose files judge nothing -------------------------------------------------------------


@pytest.mark.parametrize("outputs", [("snapshot",), ("memory",), ("snapshot", "memory")])
def test_a_node_with_only_a_snapshot_or_memory_record_is_not_ready(
    cli: Cli, tmp_path: Path, outputs: tuple[str, ...]
) -> None:
    """A snapshot of a GPU with uncorrected ECC errors verifies nothing: never READY, never drained."""
    out = tmp_path / "n"
    for kind in outputs:
        doc = ff.snapshot(BROKEN) if kind == "snapshot" else ff.memory(BROKEN)
        ff.write(out, f"gpu1.{kind}.json", {**doc, "slurm_node": "gpu1"})
    code, text, _ = cli("report", str(out))
    assert code == ExitCode.FAILED, text
    assert "0 ready, 1 not ready" in text and "(0 to drain, 1 job only)" in text
    (node,) = report.build(nodefiles.read(f) for f in report.node_files([str(out)])).nodes
    assert node.state is State.NOT_READY and not node.drain
    assert [f.check for f in node.failures] == ["gpudiag.nothing_checked"]
    (step,) = drain.plan(
        drain.from_report(report.build([nodefiles.read(f) for f in report.node_files([str(out)])])),
        {"gpu1": Current("IDLE+DRAIN", OURS, time.time() - 60)},
        resume=True,
    )
    assert step.verb is Verb.KEEP, step
    # Beside a check file, a snapshot is figures for the report: the check's verdict stands.
    ff.write(out, "gpu1.check.json", ff.check(HEALTHY, "gpu1"))
    (node,) = report.build(nodefiles.read(f) for f in report.node_files([str(out)])).nodes
    assert node.state is State.READY and node.failures == ()
