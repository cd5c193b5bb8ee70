"""`gpudiag report`: the fleet summary, failures by check, version skew, outliers, a line per node;
JSON (`gpudiag.report/1`) and JUnit XML (one test case per node and check)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from gpudiag.fleet import hostlists
from gpudiag.fleet.faults import REMEDY_CHECKS
from gpudiag.fleet.outliers import FIGURES, RULE, Outlier
from gpudiag.fleet.report import SCHEMA, Node, Report, State, exit_code, gpu_summary
from gpudiag.render.printable import printable

_STYLES = {State.READY: "green", State.NOT_READY: "red bold", State.UNREADABLE: "yellow", State.MISSING: "red"}
_FIGURE = {f.name: f for f in FIGURES}


def summary_line(report: Report) -> str:
    parts = [f"{report.count(s)} {s.value}" for s in State if s is not State.MISSING or report.expected is not None]
    head = f"{len(report.nodes)} node(s)" + (f" expected as {report.expected}" if report.expected else "")
    return printable(f"{head}: {', '.join(parts)}")


def _value(x: float, unit: str) -> str:
    text = f"{x:.0f}" if x == int(x) or abs(x) >= 100 else f"{x:.1f}"
    return f"{text} {unit}".strip()


def outlier_text(o: Outlier) -> str:
    f = o.figure
    return f"{f.label} {_value(o.value, f.unit)} (fleet median {_value(o.median, f.unit)})"


def node_line(node: Node, width: int) -> Text:
    """One line: host, state, GPUs, driver, then what is wrong."""
    line = Text(f"{printable(node.host):<{width}}  ")
    line.append(f"{node.state.value.upper():<10}", style=_STYLES[node.state])
    if node.state is State.MISSING:
        line.append("  sent nothing")
        return line
    details = [gpu_summary(node.gpus)] if node.gpus else ([] if node.problems and not node.kinds else ["no GPU"])
    if driver := node.versions.get("Driver"):
        details.append(f"driver {driver}")
    if node.failures:
        details.append(", ".join(node.failed_checks))
    if node.remedy:
        details.append(node.remedy)
    details += [p for p in node.problems]
    line.append("  " + printable("  ".join(details)))
    return line


def render(report: Report, nodes: bool = True) -> Group:
    out: list[Text] = [Text(summary_line(report), style="bold")]
    if report.failures:
        out += [Text(""), Text("Failures by check", style="bold")]
        width = max(len(printable(g.check)) for g in report.failures)
        for g in report.failures:
            row = Text(f"  {printable(g.check):<{width}}  {len(g.hosts):>5}  ")
            row.append(printable(hostlists.collect(g.hosts)), style="red")
            remedy = f" ({g.remedy})" if g.remedy and g.check in REMEDY_CHECKS else ""
            row.append(printable(f"  e.g. {g.finding}{remedy}"))
            out.append(row)
    for state in (State.MISSING, State.UNREADABLE):
        hosts = report.hosts(state)
        if hosts:
            out.append(Text(""))
            out.append(
                Text(
                    f"{state.value.capitalize()}: {len(hosts)}  {printable(hostlists.collect(hosts))}",
                    style=_STYLES[state],
                )
            )
    if report.unexpected:
        unexpected = printable(hostlists.collect(report.unexpected))
        out.append(Text(f"Not in --expect: {len(report.unexpected)}  {unexpected}"))
    if report.skew:
        out += [Text(""), Text("Version skew", style="bold")]
        width = max(len(printable(s.field)) for s in report.skew)
        for s in report.skew:
            for i, (value, members) in enumerate(s.values):
                label = printable(s.field) if i == 0 else ""
                shown = printable(f"{value}  {hostlists.collect(members)}")
                out.append(Text(f"  {label:<{width}}  {len(members):>5}  {shown}"))
    if report.outliers:
        out += [Text(""), Text("Outliers against the fleet's median", style="bold")]
        width = max(len(printable(o.host)) for o in report.outliers)
        for o in report.outliers:
            out.append(Text(f"  {printable(o.host):<{width}}  {outlier_text(o)}", style="yellow"))
        out.append(Text(f"  rule: {RULE}", style="dim"))
    if nodes and report.nodes:
        out += [Text(""), Text("Nodes", style="bold")]
        width = max(len(printable(n.host)) for n in report.nodes)
        # One Text for all the lines: rich renders 10,000 nodes in a fraction of the time of 10,000 Texts.
        out.append(Text("\n").join(node_line(n, width) for n in report.nodes))
    for text in out:  # a line per item, never folded: grep and diff read it whole
        text.no_wrap, text.overflow = True, "ignore"
    return Group(*out)


def to_json(report: Report) -> dict[str, Any]:
    by_host: dict[str, list[Outlier]] = {}
    for o in report.outliers:
        by_host.setdefault(o.host, []).append(o)
    return {
        "schema": SCHEMA,
        "exit_code": int(exit_code(report)),
        "expected": report.expected,
        "summary": {
            "nodes": len(report.nodes),
            **{s.name.lower(): report.count(s) for s in State},
        },
        "hostlists": {s.name.lower(): hostlists.collect(report.hosts(s)) for s in State},
        "unexpected": hostlists.collect(report.unexpected),
        "failures": [
            {"check": g.check, "nodes": hostlists.collect(g.hosts), "count": len(g.hosts), "example": g.finding}
            for g in report.failures
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
                name: {"median": median, "mad_scaled": mad, "nodes": n, "unit": _FIGURE[name].unit}
                for name, (median, mad, n) in report.stats.items()
            },
            "found": [
                {"node": o.host, "figure": o.figure.name, "value": o.value, "median": o.median} for o in report.outliers
            ],
        },
        "nodes": [_node_json(n, by_host.get(n.host, [])) for n in report.nodes],
    }


def _node_json(n: Node, found: list[Outlier]) -> dict[str, Any]:
    return {
        "node": n.host,
        "state": n.state.name.lower(),
        "verdict": n.verdict,
        "outputs": [k.value for k in n.kinds],
        "files": list(n.files),
        "failures": [{"check": f.check, "target": f.target or None, "finding": f.finding} for f in n.failures],
        "remedy": n.remedy or None,
        "problems": list(n.problems),
        "versions": n.versions,
        "gpus": gpu_summary(n.gpus) if n.gpus else None,
        "gpu_count": len(n.gpus),
        "figures": n.metrics,
        "outliers": [o.figure.name for o in found],
    }


def to_junit(report: Report) -> str:
    """One test case per node and check (the node's worst result for it), for CI dashboards."""
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    cases = []
    for n in report.nodes:
        classname = f"gpudiag.report.{n.host}"
        if n.state is State.MISSING:
            case = TestCase("report", classname=classname)
            case.add_error_info(message="the node sent no output", error_type="missing")
            cases.append(case)
            continue
        for problem in n.problems:
            case = TestCase("report", classname=classname)
            case.add_error_info(message=problem, error_type="unreadable")
            cases.append(case)
        failed: dict[str, list[str]] = {}
        for f in n.failures:
            failed.setdefault(f.check, []).append(f"{f.target}: {f.finding}" if f.target else f.finding)
        seen = set()
        for cid, status in n.checks:
            case = TestCase(cid, classname=classname)
            if cid in failed:
                case.add_failure_info(message="; ".join(failed[cid]), failure_type="FAIL")
            elif status == "SKIP":
                case.add_skipped_info(message="skipped")
            cases.append(case)
            seen.add(cid)
        for cid, findings in failed.items():  # failures that are not check results (bench, could not run)
            if cid not in seen:
                case = TestCase(cid, classname=classname)
                case.add_failure_info(message="; ".join(findings), failure_type="FAIL")
                cases.append(case)
    return str(to_xml_report_string([TestSuite("gpudiag report", cases)]))
