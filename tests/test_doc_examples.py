"""Every example in the README and docs/ is what the command prints; every check id is documented.

Regenerate the examples with ``python -m tests.doc_examples`` (see that module)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpudiag.checks.rules import CHECK_IDS
from tests import doc_examples
from tests.doc_examples import ROOT, Example

EXAMPLES = [example for path in doc_examples.documents() for example in doc_examples.examples(path)]
README = (ROOT / "README.md").read_text()


def test_the_readme_has_examples_and_most_of_them_run() -> None:
    in_readme = [e for e in EXAMPLES if e.path.name == "README.md"]
    assert len(in_readme) >= 6
    assert sum(1 for e in in_readme if not e.not_run) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("example", [e for e in EXAMPLES if not e.not_run], ids=lambda e: e.name)
def test_example_output_is_what_the_command_prints(example: Example) -> None:
    assert doc_examples.run(example) == example.shown, f"stale: run `python -m tests.doc_examples` ({example.name})"


def test_an_example_that_is_not_run_says_why() -> None:
    for example in EXAMPLES:
        if example.not_run:
            assert len(example.not_run.split()) >= 3, example.name


def test_a_stale_block_is_found(tmp_path: object) -> None:
    """The comparison can fail: a block with one character changed is reported stale."""
    example = next(e for e in EXAMPLES if not e.not_run)
    altered = Example(example.path, example.line, example.command, example.shown + "x", "", example.span)
    assert doc_examples.run(altered) != altered.shown


@pytest.mark.parametrize("written", ["", "stale output\n", "output glued to the fence"])
def test_the_writer_puts_the_closing_fence_on_its_own_line(tmp_path: Path, written: str) -> None:
    """A block written with no output yet (or glued by the old writer) gets its fence back on a line
    of its own: glued to the last output line it closed nothing, and the rest rendered as code."""
    page = tmp_path / "page.md"
    page.write_text(f"# T\n\n```\n$ gpudiag --replay v100x4-tutorial stat\n{written}```\n\n## Next\n")
    doc_examples.regenerate(page)
    text = page.read_text()
    assert text.endswith("MB | ubuntu(6252M)\n```\n\n## Next\n"), text
    doc_examples.regenerate(page)
    assert page.read_text() == text


def test_the_fleet_examples_run_on_the_sample_fleet() -> None:
    """`report` and `drain` examples are the sample's output, not text written by hand (the README's
    `drain` example named nodes the sample does not have); `drain` asks the sample's Slurm view."""
    fleet = [e for e in EXAMPLES if re.search(r"\bgpudiag (report|drain)\b", e.command)]
    assert {e.command.split()[1] for e in fleet} == {"report", "drain"}
    assert any(e.path.name == "README.md" and e.command.startswith("gpudiag drain") for e in fleet)
    nodes = sorted(p.stem for p in (ROOT / "docs" / "samples" / "fleet" / "nodes").glob("*.json"))
    for example in fleet:
        assert not example.not_run, example.name
        assert "docs/samples/fleet/nodes/" in example.command, example.name
        if example.command.startswith("gpudiag drain"):
            view = json.loads((ROOT / example.slurm).read_text())
            assert set(nodes) <= set(view), example.name  # Slurm knows every node that wrote a file


def test_every_check_id_is_in_the_pages_the_readme_sends_check_users_to() -> None:
    assert "(docs/commands/check.md)" in README
    check_page = (ROOT / "docs" / "commands" / "check.md").read_text()
    for check_id in CHECK_IDS:
        assert f"`{check_id}`" in check_page, check_id


@pytest.mark.parametrize("path", doc_examples.documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_quote_the_shipped_nhc_and_prolog_settings(path: Path) -> None:
    """Every NHC line the README and docs/ quote is one of deploy/nhc/nhc-gpudiag.conf's (docs/slurm.md,
    the NHC guide, quotes at least one), and the flags they give for the Slurm prolog are the ones the
    shipped script passes."""
    text = path.read_text()
    conf = (ROOT / "deploy" / "nhc" / "nhc-gpudiag.conf").read_text().splitlines()
    quoted = [line for line in text.splitlines() if "check_gpudiag" in line and line.lstrip().startswith("*")]
    if path.relative_to(ROOT).as_posix() == "docs/slurm.md":
        assert quoted
    for line in quoted:
        assert line in conf, line
    prolog = (ROOT / "deploy" / "slurm" / "slurm-prolog.sh").read_text()
    for flag in re.findall(r"`gpudiag check (--mode prolog)", text):
        assert flag in prolog
