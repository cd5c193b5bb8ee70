"""The table of checks in docs/commands/check.md, written from the checks' declarations.

Each check's row comes from its ``@check(...)``: id, what it judges (``title``, after the level
that runs it), when it fails or warns (``fails``), its scope and whether the exporter judges it.
``tests/test_check_docs.py`` compares; after declaring or changing a check::

    python -m tests.check_table            # rewrite the table in place
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpudiag.checks.deep.levels import MAX_LEVEL
from gpudiag.checks.rules import CHECKS

DOC = Path(__file__).resolve().parent.parent / "docs" / "commands" / "check.md"
BEGIN = "<!-- the table of checks: `python -m tests.check_table` writes it from their declarations -->\n"
END = "<!-- end of the table of checks -->\n"


def table() -> str:
    rows = ["| id | what | FAIL / WARN when | scope | exporter |", "| --- | --- | --- | --- | --- |"]
    for c in CHECKS:
        level = "" if c.level == 1 else f"level {c.level}{'+' if c.level < MAX_LEVEL else ''}: "
        cells = (f"`{c.id}`", level + c.title, c.fails, c.scope.value, "✓" if c.exporter else "")
        assert not any("|" in cell or "\n" in cell for cell in cells), c.id  # one row, five cells
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def written(text: str) -> str:
    """``text`` (the page) with its table of checks as the declarations say."""
    head, found, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not found or not end:
        raise ValueError(f"{DOC} has no {BEGIN.strip()} … {END.strip()}")
    return head + BEGIN + "\n" + table() + "\n" + END + tail


def main() -> int:
    text = DOC.read_text()
    new = written(text)
    if new != text:
        DOC.write_text(new)
    print(f"{DOC}: {'table of checks rewritten' if new != text else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
