"""`gpudiag check` results: a grouped checklist, a versions table, JSON and JUnit XML."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpudiag.checks import CheckResult, Facts, Status, exit_code, nothing_checked
from gpudiag.checks.rules import BY_ID, action
from gpudiag.exitcodes import CHECK_VERDICTS
from gpudiag.model import cuda_version_text
from gpudiag.render.printable import printable

SCHEMA = "gpudiag.check/1"
_STYLES = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "red bold", Status.SKIP: "dim"}


def _cudnn_text(encoded: int) -> str:
    if encoded >= 90000:
        return f"{encoded // 10000}.{encoded % 10000 // 100}.{encoded % 100}"
    return f"{encoded // 1000}.{encoded % 1000 // 100}.{encoded % 100}"


def versions(facts: Facts) -> list[tuple[str, str]]:
    """What `python -m torch.utils.collect_env` users look for."""
    m, rt = facts.machine, facts.torch.value
    build = m.torch_build.value

    def dotted(v: tuple[int, int, int] | None) -> str:
        return ".".join(map(str, v)) if v else "N/A"

    if rt is not None:
        torch_version = f"{rt.version}  ({rt.python})" if rt.python else rt.version
    elif build is not None:
        torch_version = f"{build.version}  (files only: {facts.torch.detail or 'not started'})"
    else:
        torch_version = facts.torch.detail or m.torch_build.detail or "not installed"
    torch_cuda = (rt.cuda if rt else (build.cuda if build else None)) or "N/A"
    return [
        ("Driver", m.nvml.driver_version.get("N/A")),
        ("CUDA (driver max)", m.nvml.cuda_driver_version.map(cuda_version_text).get("N/A")),
        ("torch", torch_version),
        ("torch CUDA build", torch_cuda),
        ("cuDNN", _cudnn_text(rt.cudnn_version) if rt is not None and rt.cudnn_version is not None else "N/A"),
        ("NCCL", dotted(rt.nccl_version) if rt else "N/A"),
        ("Python", m.host.python),
        ("OS", m.host.os),
    ]


def summary(results: list[CheckResult]) -> Counter[Status]:
    return Counter(r.status for r in results)


NOTHING_CHECKED = "nothing was checked: every selected check was skipped"


def skipped(results: list[CheckResult]) -> str:
    """``func.gpu (no CUDA device)``: each skipped check once, with why, for the one stderr line."""
    from gpudiag.parsing import shorten

    why = {r.id: r.finding for r in results}
    return "; ".join(f"{cid} ({shorten(finding, 80)})" for cid, finding in why.items())


def verdict(results: list[CheckResult], strict: bool, notes: list[str]) -> str:
    """READY, NOT READY (a failure, or a warning under --strict) or UNKNOWN (something could not
    run, or every selected check was skipped: nothing was verified): the exit status's word."""
    return CHECK_VERDICTS[exit_code(results, notes, strict)]


def summary_line(results: list[CheckResult], strict: bool, notes: list[str] | None = None) -> Text:
    notes = notes or []
    counts = summary(results)
    word = verdict(results, strict, notes)
    parts = [f"{counts[s]} {s.value.lower()}" for s in Status]
    text = f"{word}: {', '.join(parts)}"
    if strict:
        text += " (--strict: warnings fail)"
    if word == "UNKNOWN":
        text += f"; could not run: {printable('; '.join(notes))}" if notes else f"; {NOTHING_CHECKED}"
    style = {"READY": "green bold", "NOT READY": "red bold", "UNKNOWN": "yellow bold"}[word]
    return Text(text, style=style)


def _grouped(results: list[CheckResult]) -> list[tuple[CheckResult, str]]:
    """Merge runs of per-GPU results that say the same thing: 'GPU 0-7  MIG disabled'."""
    out: list[tuple[CheckResult, list[str]]] = []
    for r in results:
        if out and r.target.startswith("GPU ") and out[-1][0].target.startswith("GPU "):
            prev, targets = out[-1]
            if (prev.id, prev.status, prev.finding, prev.fix) == (r.id, r.status, r.finding, r.fix):
                targets.append(r.target[4:])
                continue
        out.append((r, [r.target[4:]] if r.target.startswith("GPU ") else []))
    grouped = []
    for r, targets in out:
        if len(targets) > 1:
            numbers = [int(t) for t in targets if t.isdigit()]
            contiguous = len(numbers) == len(targets) and numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            label = f"GPU {numbers[0]}-{numbers[-1]}" if contiguous else "GPU " + ",".join(targets)
        else:
            label = r.target
        grouped.append((r, label))
    return grouped


def render(facts: Facts, results: list[CheckResult], strict: bool, notes: list[str] | None = None) -> Group:
    parts: list[RenderableType] = []
    if facts.machine.source != "live":
        parts.append(Text(printable(facts.machine.source), style="dim"))
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    table.add_column("status", no_wrap=True, width=4)
    table.add_column("id", no_wrap=True, style="cyan")
    table.add_column("target", no_wrap=True)
    table.add_column("finding", ratio=1)
    area = None
    for r, target in _grouped(results):
        if r.area != area:
            if area is not None:
                table.add_row("", "", "", "")
            area = r.area
            table.add_row("", Text(area, style="bold underline"), "", "")
        finding = Text(printable(r.finding))
        if r.fix and r.status in (Status.FAIL, Status.WARN):
            finding.append(f"\n→ {printable(r.fix)}", style="italic")
        table.add_row(Text(r.status.value, style=_STYLES[r.status]), r.id, printable(target), finding)
    parts += [table, Text("")]
    versions_table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    versions_table.add_column("Versions", style="bold", no_wrap=True)
    versions_table.add_column("")
    for name, value in versions(facts):
        versions_table.add_row(name, printable(value))
    parts += [versions_table, Text(""), summary_line(results, strict, notes)]
    return Group(*parts)


def to_json(
    facts: Facts,
    results: list[CheckResult],
    strict: bool,
    exit_code: int,
    notes: list[str] | None = None,
    slurm_node: str | None = None,
) -> dict[str, Any]:
    """``slurm_node``: Slurm's name for this node when run by Slurm (what `gpudiag report` and `drain` use)."""
    notes = notes or []
    counts = summary(results)
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "source": facts.machine.source,
        "host": facts.machine.host.hostname,
        "slurm_node": slurm_node,
        # When the node was read (unix time; null on a replay): `drain --resume` wants evidence newer than a drain.
        "collected_at": None if facts.machine.source.startswith("replay:") else facts.machine.collected_at,
        "verdict": verdict(results, strict, notes),
        "exit_code": exit_code,
        "strict": strict,
        "summary": {s.value.lower(): counts[s] for s in Status},
        "could_not_run": list(notes),
        "versions": dict(versions(facts)),
        "gpus": gpus_json(facts),
        "checks": [
            {
                "id": r.id,
                "area": r.area,
                "status": r.status.value,
                "target": r.target or None,
                "finding": r.finding,
                "fix": r.fix or None,
                "scope": BY_ID[r.id].scope.value,
                "action": action(r),
            }
            for r in results
        ],
    }
    if facts.deep is not None:  # check --level 2-4: what the deep tests measured, in full
        data["diagnostics"] = diagnostics_json(facts)
    return data


def gpus_json(facts: Facts) -> list[dict[str, Any]]:
    """Per GPU the figures a fleet report compares across nodes (null: not supported or not measured)."""
    tflops = {r.gpu_index: r.tflops for r in facts.functional or () if r.gpu_index is not None}
    out = []
    for g in facts.machine.gpus:
        rows, pages = g.remapped_rows.value, g.retired_pages.value
        out.append(
            {
                "index": g.index,
                "name": g.name.value,
                "uuid": g.uuid.value,
                "temperature_c": g.temperature_c.value,
                "ecc_aggregate_corrected": g.ecc_errors.aggregate_corrected.value,
                "ecc_aggregate_uncorrected": g.ecc_errors.aggregate_uncorrected.value,
                "remapped_rows_correctable": rows.correctable if rows else None,
                "remapped_rows_uncorrectable": rows.uncorrectable if rows else None,
                "remap_pending": rows.pending if rows else None,
                "remap_failure": rows.failure if rows else None,
                "retired_pages": pages.single_bit + pages.double_bit if pages else None,
                "recovery_action": g.recovery_action.value,
                "matmul_tflops": tflops.get(g.index),
            }
        )
    if facts.deep is not None:
        for entry, gpu in zip(out, facts.machine.gpus, strict=True):
            entry.update(deep_figures(facts, gpu.index))
    return out


def deep_figures(facts: Facts, index: int) -> dict[str, Any]:
    """A GPU's figures from the deep tests (check --level 2-4), for `gpudiag report` to compare across the
    fleet: null where a test did not run or measured nothing."""
    deep = facts.deep
    assert deep is not None
    memtest = next((g for g in deep.memtest.gpus if g.gpu_index == index), None) if deep.memtest else None
    stress = next((g for g in deep.stress.gpus if g.gpu_index == index), None) if deep.stress else None
    links = deep.links
    pcie = next((g for g in links.pcie or () if g.gpu_index == index), None) if links else None
    copies = {c.direction: c.gbps for c in pcie.copies} if pcie else {}
    d2d = next((g.gbps for g in links.d2d or () if g.gpu_index == index), None) if links else None
    peers = [p.gbps for p in (links.peers or ()) if p.src_gpu == index and p.gbps is not None] if links else []
    allreduce = deep.allreduce
    largest = allreduce.largest if allreduce is not None and not allreduce.error else None
    return {
        "memtest_gbps": memtest.gbps if memtest else None,
        "memtest_mismatches": memtest.mismatches if memtest else None,
        "stress_tflops": stress.tflops_sustained if stress else None,
        "h2d_gbps": copies.get("h2d"),
        "d2h_gbps": copies.get("d2h"),
        "d2d_gbps": d2d,
        "peer_min_gbps": min(peers) if peers else None,
        "allreduce_busbw_gbps": largest.busbw_gbps(allreduce.ranks)
        if largest is not None and allreduce is not None and index in allreduce.gpu_indices
        else None,
    }


def diagnostics_json(facts: Facts) -> dict[str, Any]:
    """Everything the deep tests found: per phase its figures, or why it did not run."""
    import msgspec

    deep = facts.deep
    assert deep is not None
    data: dict[str, Any] = msgspec.to_builtins(deep, str_keys=True)
    if deep.allreduce is not None:
        for size, shown in zip(deep.allreduce.sizes, data["allreduce"]["sizes"], strict=True):
            shown["algbw_gbps"] = size.algbw_gbps
            shown["busbw_gbps"] = size.busbw_gbps(deep.allreduce.ranks)
    return data


def to_junit(facts: Facts, results: list[CheckResult], strict: bool, notes: list[str] | None = None) -> str:
    """One test case per check result (per GPU where the check is per GPU), for CI systems."""
    from junit_xml import TestCase, TestSuite, to_xml_report_string

    cases = []
    for r in results:
        name = f"{r.id}[{r.target}]" if r.target else r.id
        case = TestCase(name, classname=f"gpudiag.check.{r.id.split('.')[0]}", stdout=r.finding)
        message = r.finding + (f" (fix: {r.fix})" if r.fix else "")
        if r.status is Status.FAIL or (strict and r.status is Status.WARN):
            case.add_failure_info(message=message, failure_type=r.status.value)
        elif r.status is Status.SKIP:
            case.add_skipped_info(message=r.finding)
        cases.append(case)
    for note in notes or []:
        case = TestCase("gpudiag.could_not_run", classname="gpudiag.check")
        case.add_error_info(message=note)
        cases.append(case)
    if nothing_checked(results):  # a suite of skips is green in CI: say that it verified nothing
        case = TestCase("gpudiag.nothing_checked", classname="gpudiag.check")
        case.add_error_info(message=NOTHING_CHECKED)
        cases.append(case)
    suite = TestSuite("gpudiag check", cases, hostname=facts.machine.host.hostname)
    return str(to_xml_report_string([suite]))
