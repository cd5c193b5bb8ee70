"""docs/commands/check.md keeps up with the code: its example output is real, its table of checks
is written from their declarations, every check id, option and exit code is documented, and the
exit-code table matches the command's."""

from __future__ import annotations

from pathlib import Path

from gpudiag.checks.rules import CHECK_IDS
from gpudiag.exitcodes import ExitCode
from tests import check_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "commands" / "check.md"
TEXT = DOC.read_text()


def test_the_table_of_checks_is_the_declarations() -> None:
    assert check_table.written(TEXT) == TEXT, "the table of checks is stale: run python -m tests.check_table"


def test_every_check_id_is_documented() -> None:
    for check_id in CHECK_IDS:
        assert f"`{check_id}`" in TEXT, check_id


def test_every_option_is_documented() -> None:
    import typer.main

    from gpudiag.cli.app import build_app

    group = typer.main.get_command(build_app(only="check"))
    command = group.commands["check"]  # type: ignore[attr-defined]
    options = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
    assert "--require-torch" in options
    for opt in options:
        if opt != "--help":
            assert f"`{opt}" in TEXT, opt


def test_exit_codes_are_documented() -> None:
    for code in (ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE, ExitCode.CHECK_INCOMPLETE, ExitCode.NOTHING_CHECKED):
        assert f"\n| {int(code)} |" in TEXT, code


def test_each_levels_time_is_the_one_measured_or_says_it_is_an_estimate() -> None:
    """The docs' table, the --level option and --help give each level's time from one place, and a time
    that was not measured says so (level 2: 50 s on one H200, docs/hardware/h200-driver580/runs/level2.json)."""
    import re

    from gpudiag.checks.deep.levels import LEVEL_HELP, LEVELS

    rows = dict(re.findall(r"^\| (\d) \| .*? \| ([^|]+?) \| [^|]+ \|$", TEXT, re.M))
    option = next(line for line in TEXT.splitlines() if line.startswith("| `--level N` |"))
    for number in (2, 3, 4):
        takes = LEVELS[number].takes
        assert rows[str(number)] == takes and f"({takes})" in option and f"({takes})" in LEVEL_HELP
        assert takes.endswith("estimated") or "measured" in takes
    assert LEVELS[2].takes == "50 s, measured on one H200"
