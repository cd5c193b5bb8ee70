"""Fuzzing the node files `gpudiag report` reads: whatever a file holds, the report never raises,
every file gets exactly one verdict, and a file is READY only while it is still exactly one valid
document. A few seconds in the default run (bounded example counts, no deadline); a longer hunt:
``GPUDIAG_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fleet_fuzz.py``."""

from __future__ import annotations

import functools
import json
import math
import os
import xml.etree.ElementTree as ET
from io import BytesIO
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiag.fleet import hostlists, nodefiles, report
from gpudiag.fleet.report import State
from gpudiag.render import report_view
from tests import fleet_files as ff

EXAMPLES = int(os.environ.get("GPUDIAG_FUZZ_EXAMPLES", "80"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def originals() -> tuple[bytes, ...]:
    """Real node files: a healthy and a failing check, a job-only failure, a snapshot, a memory file, a benchmark."""
    docs: list[dict[str, Any]] = [
        ff.check("h100x8-healthy", "gpu001"),
        ff.check("a100-ecc-errors", "gpu002"),
        ff.check("h100x8-healthy", "gpu003", "--require-driver", "999"),
        ff.snapshot("h100x8-healthy"),
        ff.memory("a100-ecc-errors"),
        ff.bench("gpu006", h2d=25.0),
    ]
    return tuple(json.dumps(d, indent=2).encode() for d in docs)


def one_valid_document(raw: bytes) -> bool:
    """An oracle independent of nodefiles: UTF-8, one JSON document (no NaN), a known schema, a valid
    node name, and for a check a verdict its own results give."""
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_constant=_reject)
    except (ValueError, RecursionError):
        return False
    if not isinstance(data, dict) or data.get("schema") not in nodefiles.SCHEMAS:
        return False
    name = data.get("slurm_node") or data.get("host")
    if isinstance(name, dict):
        name = name.get("hostname")  # a snapshot's host
    name = name or "gpu099"  # the file's name, when the document names no node
    if not isinstance(name, str) or not hostlists.is_node_name(name):
        return False
    if data["schema"] == "gpudiag.check/1":
        checks = data.get("checks")
        if not isinstance(checks, list) or data.get("could_not_run") != []:
            return False
        failing = ("FAIL", "WARN") if data.get("strict") is True else ("FAIL",)
        return data.get("verdict") == "READY" and not any(
            isinstance(c, dict) and c.get("status") in failing for c in checks
        )
    return True


def _reject(constant: str) -> None:
    raise ValueError(constant)


def verdict(node: nodefiles.NodeFile) -> State:
    """The one verdict a file gets: read (READY or NOT READY) or unreadable, with a cause."""
    assert (node.kind is None) == (node.cause is not None) == bool(node.problem), node
    return report.file_state(node)


def judged(raw: bytes) -> State:
    node = nodefiles.parse(raw, "nodes/gpu099.json")
    state = verdict(node)
    if state is State.READY:
        assert one_valid_document(raw), raw[:300]
    return state


# --- byte-level mutations of real files ---------------------------------------------------------

_BYTES = st.binary(min_size=1, max_size=8)


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(originals())))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        how = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "append", "duplicate"]))
        if how == "flip" and at < len(raw):
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "insert":
            raw[at:at] = draw(_BYTES)
        elif how == "delete":
            del raw[at : at + draw(st.integers(1, 16))]
        elif how == "truncate":
            del raw[at:]
        elif how == "append":
            raw += draw(st.sampled_from([b"\ngpudiag: error\n", b"\x00", b"{}", b"  \n"]))
        elif how == "duplicate":
            raw += draw(st.sampled_from(originals()))
    return bytes(raw)


@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_get_one_verdict_and_never_raise(raw: bytes) -> None:
    assert judged(raw) in (State.UNREADABLE, State.READY, State.NOT_READY)


@FUZZ
@given(mutated_bytes())
def test_a_mutated_file_is_ready_only_while_still_one_valid_document(raw: bytes) -> None:
    judged(raw)


# --- structure-level mutations: wrong types, huge numbers, NaN, deep nesting, odd names ------------

_ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**400, -1, 2**53 + 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["READY", "NOT READY", "UNKNOWN", "FAIL", "PASS", "gpudiag.check/1", "gpu[1-3]", "a\nb"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.integers(100, 3000).map(lambda depth: functools.reduce(lambda inner, _: [inner], range(depth), 0)),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if len(prefix) > 6:  # into a deeply nested value put there by an earlier mutation: far enough
        return out
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:3]):
            out += _paths(inner, (*prefix, i))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> bytes:
    doc = json.loads(draw(st.sampled_from(originals())))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent = functools.reduce(lambda inner, key: inner[key], path[:-1], doc)
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(_ODD_VALUES)
    try:
        return json.dumps(doc, allow_nan=True).encode()
    except (ValueError, RecursionError):
        return b"{"


@FUZZ
@given(mutated_documents())
def test_wrong_types_huge_numbers_nan_and_deep_nesting(raw: bytes) -> None:
    judged(raw)


@FUZZ
@given(
    st.deferred(lambda: st.sampled_from(originals())),  # made when the test runs, not at collection
    st.deferred(lambda: st.sampled_from(originals())),
    st.sampled_from([b"", b"\n", b"  \r\n\t"]),
)
def test_several_documents_in_one_file_are_never_read(first: bytes, second: bytes, between: bytes) -> None:
    node = nodefiles.parse(first + between + second, "nodes/gpu099.json")
    assert verdict(node) is State.UNREADABLE and node.cause is nodefiles.Cause.SEVERAL


@FUZZ
@given(st.text(min_size=1, max_size=40))
def test_a_node_is_named_only_by_a_valid_node_name(name: str) -> None:
    doc = json.loads(originals()[0])
    doc["slurm_node"] = name
    node = nodefiles.parse(json.dumps(doc).encode(), "nodes/gpu099.json")
    if hostlists.is_node_name(name):
        assert (verdict(node), node.host) == (State.READY, name)
    else:
        assert (verdict(node), node.cause, node.host) == (State.UNREADABLE, nodefiles.Cause.BAD_NAME, "gpu099")


# --- the whole report over fuzzed fleets ----------------------------------------------------------


@settings(max_examples=max(25, EXAMPLES // 4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.one_of(
                mutated_bytes(),
                mutated_documents(),
                st.deferred(lambda: st.sampled_from(originals())),
                st.binary(max_size=64),
            ),
            st.text(min_size=1, max_size=12),  # the file's name, anything
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_fleet_renders_and_its_json_and_junit_parse(files: list[tuple[bytes, str]]) -> None:
    parsed = [nodefiles.parse(raw, f"nodes/{name}.json") for raw, name in files]
    fleet = report.build(parsed)
    assert sum(fleet.count(s) for s in State) == len(fleet.nodes)
    assert all(
        n.state is not State.READY or all(report.file_state(f) is State.READY for f in parsed if f.host == n.host)
        for n in fleet.nodes
    )
    out = BytesIO()
    report_view.write_json(fleet, out)
    data = json.loads(out.getvalue())
    assert len(data["nodes"]) == len(fleet.nodes) and data["summary"]["nodes"] == len(fleet.nodes)
    assert all(not math.isnan(v) for n in data["nodes"] for v in n["figures"].values() if v is not None)
    xml = BytesIO()
    report_view.write_junit(fleet, xml)
    ET.fromstring(xml.getvalue())
    for line in report_view.render(fleet, nodes=True).renderables:
        plain = getattr(line, "plain", "")
        assert not any(ord(c) < 32 and c != "\n" for c in plain), plain
