"""A slice of the hostile matrix (tests/hostile_matrix.py) in every run, and its page kept honest."""

from __future__ import annotations

import re
from pathlib import Path

from tests import hostile_matrix as matrix

PAGE = Path(__file__).resolve().parent.parent / "docs" / "hostile-matrix.md"
SLICE_COMMANDS = (
    "list",
    "list --query-compute-apps",
    "pmon --format csv",
    "memory",
    "exporter --once",
    "check --json",
    "report",
)
SLICE_ENVIRONMENTS = ("COLUMNS=0", "COLUMNS=99999999", "CUDA_VISIBLE_DEVICES=0,ESC[2J1", "PYTHONIOENCODING=ascii")


def test_a_slice_of_the_matrix_finds_nothing() -> None:
    commands = [c for c in matrix.COMMANDS if c.label in SLICE_COMMANDS]
    environments = [e for e in matrix.ENVIRONMENTS if e.label in SLICE_ENVIRONMENTS]
    assert len(commands) == len(SLICE_COMMANDS) and len(environments) == len(SLICE_ENVIRONMENTS)
    tallies = matrix.run(["hostile-strings", "a100-mig"], commands, environments)
    runs, problems = matrix.total(tallies)
    examples = [e for t in tallies.values() for e in t.examples]
    assert runs == 2 * len(commands) * len(environments)
    assert not problems, examples


def test_the_judge_sees_each_problem() -> None:
    plain = matrix.COMMANDS[0]
    as_json = next(c for c in matrix.COMMANDS if c.json)
    assert matrix.judge(plain, 0, "GPU  Name\n", "") == []
    assert matrix.judge(plain, 70, "", "gpudiag: internal error") == ["exit 70"]
    assert matrix.judge(plain, 42, "", "") == ["undocumented exit"]
    assert matrix.judge(plain, 0, "x\x1b]52;c;eA==\x07\n", "") == ["raw control"]
    assert matrix.judge(plain, 0, "", "\u202e") == ["raw control"]
    assert matrix.judge(plain, 0, "GPU  \n", "") == ["trailing blanks"]
    assert matrix.judge(as_json, 0, "{", "") == ["bad JSON"]
    as_xml = next(c for c in matrix.COMMANDS if c.kind == "xml")
    assert matrix.judge(as_xml, 0, "<a>\n\t<b>x</b>\n</a>\n", "") == []  # XML's tabs are its layout
    assert matrix.judge(as_xml, 0, "<a><b></a>\n", "") == ["bad XML"]
    as_csv = next(c for c in matrix.COMMANDS if c.kind == "csv")
    assert matrix.judge(as_csv, 0, "0, -5 W, -, '=1+1, \"'+x,y\"\n", "") == []  # numbers, pmon's -, neutralised
    assert matrix.judge(as_csv, 0, '0, =HYPERLINK("x")\n', "") == ["formula cell"]
    assert matrix.judge(as_csv, 0, '0, "@SUM(1+1)"\n', "") == ["formula cell"]
    assert matrix.judge(plain, 1, "", "Traceback (most recent call last):") == ["traceback"]
    assert matrix.judge(plain, None, "", "") == ["timeout"]


def test_the_page_is_the_scripts_and_reports_no_problem() -> None:
    text = PAGE.read_text()
    assert text.startswith(matrix.HEADER)
    for command in matrix.COMMANDS:
        assert f"| `{command.label}` |" in text, command.label
    for problem in matrix.PROBLEMS:
        assert re.search(rf"^\| {re.escape(problem)} \| 0 \|$", text, re.M), problem
