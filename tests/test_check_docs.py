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
