"""`gpudiag report`: the fleet in groups (by verdict, failed check, unreadable cause, skew, outlier),
optionally a line per node; JSON (`gpudiag.report/1`) and JUnit XML, both written as they go.

Everything shown comes from node files, which are untrusted: text meets the terminal and the XML
through :func:`safe` (control characters escaped), names that are not node names are never put in
a hostlist.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

from rich.console import Group
from rich.text import Text

from gpudiag.fleet import hostlists
from gpudiag.fleet.faults import REMEDY_CHECKS
from gpudiag.fleet.outliers import RULE, Outlier, figure_of
from gpudiag.fleet.report import SCHEMA, Node, Report, State, exit_code, gpu_summary
from gpudiag.render.printable import printable

_STYLES = {State.READY: "green", State.NOT_READY: "red bold", State.UNREADABLE: "yellow", State.MISSING: "red"}
HOSTS_WIDTH = 64  # characters of a hostlist in the grouped view; the rest is counted ("+12 more")
EXAMPLE_WIDTH = 160  # characters of an example finding or problem
MAX_GROUPS = 20  # failed checks and unreadable causes shown; the rest is counted
MAX_VALUES = 4  # values per version field shown; the rest is counted


def _clip(text: str, width: int = EXAMPLE_WIDTH) -> str:
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _hosts(names: Iterable[str], nodes: dict[str, Node] | None = None) -> str:
    """Nodes as a hostlist within HOSTS_WIDTH (``gpu[001-040,042] +17 more``); names that are not
    node names (``nodes`` says which) are quoted one by one after it, escaped."""
    names = list(names)
    bad = [n for n in names if nodes is not None and not nodes[n].name_ok]
    good = [n for n in names if nodes is None or nodes[n].name_ok] if bad else names
    text, left = hostlists.collect_within(good, HOSTS_WIDTH)
    parts = [text] if text else []
    parts += [repr(n) for n in bad[:3]]  # repr escapes what is not printable
    left += max(0, len(bad) - 3)
    if left:
        parts.append(f"+{left} more")
    return " ".join(parts)


def summary_line(report: Report) -> str:
    parts = [f"{report.count(s)} {s.value}" for s in State if s is not State.MISSING or report.expected is not None]
    head = f"{len(report.nodes)} node(s)" + (f" expected as {printable(report.expected)}" if report.expected else "")
    return f"{head}: {', '.join(parts)}"


def _value(x: float, unit: str) -> str:
    text = f"{x:.0f}" if x == int(x) or abs(x) >= 100 else f"{x:.1f}"
    return f"{text} {unit}".strip()


def node_line(node: Node, width: int) -> Text:
    """One line: host, state, GPUs, driver, then what is wrong."""
    host = node.host if node.name_ok else repr(node.host)  # repr escapes what is not printable
    line = Text(f"{host:<{width}}  ")
    line.append(f"{node.state.value.upper():<10}", style=_STYLES[node.state])
    if node.state is State.MISSING:
        line.append("  sent nothing")
        return line
    details = [] if node.drain or node.state is not State.NOT_READY else ["(job)"]
    if len(node.files) > 1 and node.worst:
        details.append(f"{len(node.files)} files; worst: {printable(node.worst)}")
    if node.gpus:
        details.append(printable(gpu_summary(node.gpus)))
    elif node.kinds:
        details.append("no GPU")
    if driver := node.versions.get("Driver"):
        details.append(f"driver {printable(driver)}")
    if node.failures:
        details.append(printable(", ".join(node.failed_checks)))
    if node.remedy:
        details.append(node.remedy)
    details += [printable(p) for p in node.problems]
    line.append("  " + "  ".join(details))
    return line


def render(report: Report, nodes: bool = False) -> Group:
    """The grouped view (a few dozen lines, however large the fleet); ``nodes`` adds a line per node."""
    by_host = {n.host: n for n in report.nodes}
    out: list[Text] = [Text(summary_line(report), style="bold")]
    ready = report.hosts(State.READY)
    not_ready = report.hosts(State.NOT_READY)
    if ready or not_ready:
        out.append(Text(""))
    if ready:
        out.append(Text(f"Ready: {len(ready)}  {_hosts(ready)}", style=_STYLES[State.READY]))
    if not_ready:
        drain = report.to_drain
        row = Text(f"Not ready: {len(not_ready)}  {_hosts(not_ready)}", style=_STYLES[State.NOT_READY])
        row.append(f"  ({drain} to drain, {len(not_ready) - drain} job only)")
        out.append(row)
    if report.failures:
        out += [Text(""), Text("Failures by check (scope node: drain the node; job: only the job fails)", style="bold")]
        shown = report.failures[:MAX_GROUPS]
        width = max(len(printable(g.check)) for g in shown)
        for g in shown:
            row = Text(f"  {printable(g.check):<{width}}  {g.scope:<4}  {len(g.hosts):>5}  ")
            row.append(_hosts(g.hosts), style="red")
            remedy = f" ({g.remedy})" if g.remedy and g.check in REMEDY_CHECKS else ""
            row.append(f"  e.g. {_clip(g.finding)}{remedy}")
            out.append(row)
        if len(report.failures) > MAX_GROUPS:
            out.append(Text(f"  … {len(report.failures) - MAX_GROUPS} more checks failed (--json or --nodes for all)"))
    unreadable = [n.host for n in report.nodes if n.state is State.UNREADABLE]
    if unreadable:
        out += [Text("")]
        out.append(
            Text(f"Unreadable: {len(unreadable)}  {_hosts(unreadable, by_host)}", style=_STYLES[State.UNREADABLE])
        )
        width = max(len(p.cause.value) for p in report.problems[:MAX_GROUPS])
        for p in report.problems[:MAX_GROUPS]:
            row = Text(f"  {p.cause.value:<{width}}  {len(p.hosts):>5}  {_hosts(p.hosts, by_host)}")
            row.append(f"  e.g. {_clip(os.path.basename(p.file))}: {_clip(p.example, EXAMPLE_WIDTH)}")
            out.append(row)
    missing = report.hosts(State.MISSING)
    if missing:
        out += [Text(""), Text(f"Missing: {len(missing)}  {_hosts(missing)}", style=_STYLES[State.MISSING])]
    if report.unexpected:
        out.append(Text(f"Not in --expect: {len(report.unexpected)}  {_hosts(report.unexpected)}"))
    if report.skew:
        out += [Text(""), Text("Version skew (the most common value, then the others and their nodes)", style="bold")]
        width = max(len(s.field) for s in report.skew)
        for s in report.skew:
            for i, (value, members) in enumerate(s.values[:MAX_VALUES]):
                label = s.field if i == 0 else ""
                where = "" if i == 0 else f"  {_hosts(members)}"
                out.append(Text(f"  {label:<{width}}  {len(members):>5}  {_clip(value, 60)}{where}"))
            if len(s.values) > MAX_VALUES:
                rest = s.values[MAX_VALUES:]
                count = sum(len(m) for _, m in rest)
                out.append(Text(f"  {'':<{width}}  {count:>5}  … {len(rest)} more values (--json for all)"))
    if report.outliers:
        out += [Text(""), Text("Outliers against the fleet's median", style="bold")]
        out += _outlier_rows(report.outliers)
        out.append(Text(f"  rule: {RULE}", style="dim"))
    if nodes and report.nodes:
        out += [Text(""), Text("Nodes", style="bold")]
        width = max(len(n.host) if n.name_ok else len(repr(n.host)) for n in report.nodes)
        # One Text for all the lines: rich renders 10,000 nodes in a fraction of the time of 10,000 Texts.
        out.append(Text("\n").join(node_line(n, width) for n in report.nodes))
    for text in out:  # a line per item, never folded: grep and diff read it whole
        text.no_wrap, text.overflow = True, "ignore"
    return Group(*out)


def _outlier_rows(found: tuple[Outlier, ...]) -> list[Text]:
    """One row per figure (per GPU model, for the figures compared model by model): how many nodes,
    which, and the worst of them against the median."""
    by_figure: dict[tuple[str, str], list[Outlier]] = {}
    for o in found:
        by_figure.setdefault((o.figure.name, o.model or ""), []).append(o)
    width = max(len(group[0].figure.label) for group in by_figure.values())
    rows = []
    for (_, model), group in by_figure.items():
        f = group[0].figure
        worst = max(group, key=lambda o: o.value if f.high_is_bad else -o.value)
        value = _value(worst.value, f.unit) + (f" on GPU {worst.gpu}" if worst.gpu is not None else "")
        text = value if len(group) == 1 else f"worst {value}"
        among = f" of {printable(model)} nodes" if model else ""
        rows.append(
            Text(
                f"  {f.label:<{width}}  {len(group):>5}  {_hosts(o.host for o in group)}  "
                f"{text} (fleet median{among} {_value(worst.median, f.unit)})",
                style="yellow",
            )
        )
    return rows


# --- JSON: gpudiag.report/1, written node by node ------------------------------------------


def write_json(report: Report, out: IO[bytes]) -> None:
    """The report as JSON (indented), without ever holding the whole text: the nodes are encoded one by one."""
    import msgspec

    from gpudiag.render.printable import json_document

    def ascii_safe(chunk: bytes) -> bytes:  # msgspec writes bidi marks, C1 controls and DEL as they are
        return chunk if chunk.isascii() and b"\x7f" not in chunk else json_document(chunk.decode()).encode()

    head = ascii_safe(msgspec.json.format(_encode(_head(report)), indent=2))
    out.write(head[: head.rindex(b"}")].rstrip())  # "{ ... last field" without the closing brace
    out.write(b',\n  "nodes": [')
    by_host: dict[str, list[Outlier]] = {}
    for o in report.outliers:
        by_host.setdefault(o.host, []).append(o)
    for i, n in enumerate(report.nodes):
        text = ascii_safe(msgspec.json.format(_encode(_node_json(n, by_host.get(n.host, []))), indent=2))
        out.write(b"\n    " if i == 0 else b",\n    ")
        out.write(text.replace(b"\n", b"\n    "))
    out.write(b"\n  ]\n}\n" if report.nodes else b"]\n}\n")


def to_json(report: Report) -> dict[str, Any]:
    """The whole report as one object (for tests and small fleets; the command streams it)."""
    by_host: dict[str, list[Outlier]] = {}
    for o in report.outliers:
        by_host.setdefault(o.host, []).append(o)
    return {**_head(report), "nodes": [_node_json(n, by_host.get(n.host, [])) for n in report.nodes]}


def _encode(obj: Any) -> bytes:
    """msgspec's JSON, with undecodable bytes of file names (lone surrogates) written as ``\\xff``."""
    import msgspec

    try:
        return msgspec.json.encode(obj)
    except UnicodeEncodeError:
        return msgspec.json.encode(_encodable(obj))


def _encodable(obj: Any) -> Any:
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(obj, dict):
        return {_encodable(k): _encodable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_encodable(x) for x in obj]
    return obj


def _head(report: Report) -> dict[str, Any]:
    drain = [n.host for n in report.nodes if n.drain]
    return {
        "schema": SCHEMA,
        "exit_code": int(exit_code(report)),
        "expected": report.expected,
        "summary": {
            "nodes": len(report.nodes),
            **{s.name.lower(): report.count(s) for s in State},
        },
        "hostlists": {s.name.lower(): hostlists.collect(report.hosts(s)) for s in State},
        "drain": {"count": len(drain), "nodes": hostlists.collect(drain)},
        "invalid_names": [n.host for n in report.unnamed()],
        "unexpected": hostlists.collect(report.unexpected),
        "failures": [
            {
                "check": g.check,
                "nodes": hostlists.collect(g.hosts),
                "count": len(g.hosts),
                "example": g.finding,
                "scope": g.scope,
            }
            for g in report.failures
        ],
        "unreadable_by_cause": [
            {
                "cause": p.cause.value,
                "count": len(p.hosts),
                "nodes": hostlists.collect(h for h in p.hosts if hostlists.is_node_name(h)),
                "example": p.example,
                "example_file": p.file,
            }
            for p in report.problems
        ],
        "skew": [
            {
                "field": s.field,
                "values": [{"value": v, "count": len(h), "nodes": hostlists.collect(h)} for v, h in s.values],
            }
            for s in report.skew
        ],
        "outliers": {
            "rule": RULE,
            "fleet": {
                name: {"median": median, "mad_scaled": mad, "nodes": n, "unit": figure_of(name).unit}
                for name, (median, mad, n) in report.stats.items()
            },
            "found": [_found_json(o) for o in report.outliers],
        },
    }


def _found_json(o: Outlier) -> dict[str, Any]:
    found: dict[str, Any] = {"node": o.host, "figure": o.figure.name, "value": o.value, "median": o.median}
    if o.figure.per_model:  # check --level 2-4's figures: compared among one GPU model, from one GPU
        found |= {"model": o.model, "gpu": o.gpu}
    return found


def _node_json(n: Node, found: list[Outlier]) -> dict[str, Any]:
    return {
        "node": n.host,
        "state": n.state.name.lower(),
        "drain": n.drain,
        "name_valid": n.name_ok,
        "verdict": n.verdict,
        "outputs": [k.value for k in n.kinds],
        "files": list(n.files),
        "verified_files": list(n.verified),
        "worst_file": n.worst or None,
        "failures": [
            {
                "check": f.check,
                "target": f.target or None,
                "finding": f.finding,
                "scope": f.scope,
                "action": f.action or None,
                "uuid": f.uuid or None,
            }
            for f in n.failures
        ],
        "remedy": n.remedy or None,
        "problems": list(n.problems),
        "causes": [cause.value for _, cause, _ in n.unread],
        "versions": n.versions,
        "gpus": gpu_summary(n.gpus) if n.gpus else None,
        "gpu_count": len(n.gpus),
        "figures": n.metrics,
        "outliers": [o.figure.name for o in found],
    }


# --- JUnit XML: one test case per node (or per node and check), written case by case ------------

_Case = tuple[str, str, str, str]  # name, outcome ("", failure, error, skipped), its type, its message
_CLASS = "\x00"  # where a node's class name goes in a cached fragment (printable() never lets one through)


def _node_cases(n: Node) -> Iterator[_Case]:
    """The node's test cases: an error when it sent nothing or a file is unreadable, else one per check."""
    if n.state is State.MISSING:
        yield "report", "error", "missing", "the node sent no output"
        return
    for problem in n.problems:
        yield "report", "error", "unreadable", printable(problem)
    failed: dict[str, list[str]] = {}
    for f in n.failures:
        failed.setdefault(f.check, []).append(f"{f.target}: {f.finding}" if f.target else f.finding)
    for cid, status in n.checks:
        if cid in failed:
            yield printable(cid), "failure", "FAIL", printable("; ".join(failed.pop(cid)))
        else:
            yield printable(cid), "skipped" if status == "SKIP" else "", "skipped", "skipped"
    for cid, findings in failed.items():  # failures that are not check results (bench, could not run)
        yield printable(cid), "failure", "FAIL", printable("; ".join(findings))


def _node_case(n: Node) -> _Case:
    """The node as one test case: passed when ready, a failure naming its failed checks when not, an
    error when it sent nothing or a file is unreadable."""
    if n.state is State.MISSING:
        return "report", "error", "missing", "the node sent no output"
    if n.problems:
        return "report", "error", "unreadable", printable("; ".join(n.problems))
    if n.state is State.NOT_READY:
        shown = [
            f"{f.check} {f.target}: {f.finding}" if f.target else f"{f.check}: {f.finding}" for f in n.failures[:3]
        ]
        more = f" (+{len(n.failures) - 3} more)" if len(n.failures) > 3 else ""
        kind = "NOT READY" if n.drain else "NOT READY (job)"
        return "report", "failure", kind, printable("; ".join(shown) + more or f"verdict {n.verdict}")
    return "report", "", "", ""


def _write_cases(xml: Any, classname: str, cases: Iterable[_Case]) -> None:
    from xml.sax.xmlreader import AttributesImpl

    for name, outcome, kind, message in cases:
        xml.ignorableWhitespace("\n\t\t")
        xml.startElement("testcase", AttributesImpl({"name": name, "classname": classname}))
        if outcome:
            xml.startElement(outcome, AttributesImpl({"type": kind, "message": message}))
            xml.endElement(outcome)
        xml.endElement("testcase")


def write_junit(report: Report, out: IO[bytes], per_check: bool = False) -> None:
    """JUnit XML for CI dashboards: a test case per node (``per_check``: per node and check, the
    node's worst result for it), written as it goes with the standard library's XML writer
    (junit-xml builds the whole document in memory: ~1 GiB for 10,000 nodes). Nodes with the same
    results share one rendered fragment, their class names put in (a node name needs no escaping)."""
    import io
    from xml.sax.saxutils import XMLGenerator
    from xml.sax.xmlreader import AttributesImpl

    def cases(n: Node) -> Iterable[_Case]:
        return _node_cases(n) if per_check else (_node_case(n),)

    counts = {"": 0, "failure": 0, "error": 0, "skipped": 0}
    for n in report.nodes:  # the suite's totals come first in the file: a counting pass
        for case in cases(n):
            counts[case[1]] += 1
    totals = {"errors": str(counts["error"]), "failures": str(counts["failure"]), "tests": str(sum(counts.values()))}
    xml = XMLGenerator(out, encoding="utf-8", short_empty_elements=True)
    xml.startDocument()
    xml.startElement("testsuites", AttributesImpl({"disabled": "0", **totals, "time": "0.0"}))
    xml.ignorableWhitespace("\n\t")
    suite = {"disabled": "0", **totals, "name": "gpudiag report", "skipped": str(counts["skipped"]), "time": "0"}
    xml.startElement("testsuite", AttributesImpl(suite))
    fragments: dict[tuple[int, tuple[Any, ...]], bytes] = {}
    for n in report.nodes:
        classname = f"gpudiag.report.{printable(n.host)}"
        if not n.name_ok or n.state is State.MISSING or n.problems or not per_check:
            _write_cases(xml, classname, cases(n))
            continue
        key = (id(n.checks), n.failures)  # n.checks is one shared tuple per distinct list of results
        fragment = fragments.get(key)
        if fragment is None:
            buffer = io.BytesIO()
            _write_cases(XMLGenerator(buffer, encoding="utf-8", short_empty_elements=True), _CLASS, _node_cases(n))
            fragment = fragments[key] = buffer.getvalue().removeprefix(b"\n\t\t")
            if len(fragments) > 10_000:  # a fleet of all-different nodes: keep memory bounded
                fragments.clear()
        xml.ignorableWhitespace("\n\t\t")  # through the writer: it closes a start tag it holds open
        out.write(fragment.replace(_CLASS.encode(), classname.encode()))
    xml.ignorableWhitespace("\n\t")
    xml.endElement("testsuite")
    xml.ignorableWhitespace("\n")
    xml.endElement("testsuites")
    xml.ignorableWhitespace("\n")
    xml.endDocument()
