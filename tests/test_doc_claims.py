"""Claims in README.md and docs/ that drifted from the code once (issue 23), now checked against it."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# A metric name as the docs write it, with shell-style alternatives inside: gpudiag_gpu_memory_{used,free}_bytes.
# Braces at the end of a name are its labels (gpudiag_gpu_clock_hertz{clock}); a dot after it, a file name.
_DOC_NAME = re.compile(r"\bgpudiag_(?:[a-z0-9_]|\{[a-z0-9_,]+\}(?=[a-z0-9_]))+(?![a-z0-9_.{])")


def _expand(name: str) -> list[str]:
    match = re.search(r"\{([^}]*)\}", name)
    if match is None:
        return [name]
    return [e for alt in match.group(1).split(",") for e in _expand(name[: match.start()] + alt + name[match.end() :])]


def _names_in_code() -> set[str]:
    names = set()
    for path in (ROOT / "gpudiag").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r"^gpudiag_[a-z0-9_]+$", node.value))
    return names


@pytest.mark.slow
def test_every_metric_name_in_the_docs_is_one_the_code_exports() -> None:
    exported = _names_in_code()
    unknown = {}
    for document in DOCUMENTS:
        for match in _DOC_NAME.finditer(document.read_text()):
            for name in _expand(match.group()):
                # prometheus-client writes a counter's samples with _total
                if name not in exported and name.removesuffix("_total") not in exported:
                    unknown[name] = document.relative_to(ROOT)
    assert unknown == {}


def test_the_list_page_counts_the_nvml_calls_bench_nvml_calls_counts() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_nvml_calls
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    page = " ".join((ROOT / "docs" / "commands" / "list.md").read_text().split())
    claimed = re.search(
        r"\(`list` (\d+), `--query name,memory.used` (\d+), `list -q` (\d+), `check --quick --no-torch` (\d+), "
        r"`list --json` (\d+), `snapshot` (\d+) ",
        page,
    )
    assert claimed is not None, "docs/commands/list.md's NVML call counts moved: update this test"

    def calls(*args: str) -> int:
        return sum(bench_nvml_calls.count_calls("h100x8-healthy", list(args)).values())

    counted = (
        calls("list"),
        calls("list", "--query", "name,memory.used", "--format", "csv"),
        calls("list", "-q"),
        calls("check", "--no-torch", "--quick"),
        calls("list", "--json"),
        calls("snapshot"),  # also GPM's samples (list --json does not wait for GPM's window)
    )
    assert tuple(map(int, claimed.groups())) == counted


def test_memory_says_what_a_piped_watch_writes() -> None:
    """A watch into a pipe writes text blocks; JSON Lines only with --json (memory.md said otherwise)."""
    for document in DOCUMENTS:
        text = " ".join(document.read_text().split())
        assert "or with `--json`, it writes one JSON object per sample" not in text, document
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    args = ["--replay", "a100-mig", "memory", "--watch", "--count", "2", "--interval", "0.1"]
    piped = CliRunner().invoke(app, args).stdout
    assert not piped.lstrip().startswith("{") and "Used / Total" in piped
    lines = CliRunner().invoke(app, [*args, "--json"]).stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith('{"schema": "gpudiag.memory/2"') for line in lines)
