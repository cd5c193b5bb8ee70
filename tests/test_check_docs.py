"""docs/readme/check.md keeps up with the code: its example output is real, every check id,
option and exit code is documented, and the exit-code table matches the command's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from gpudiag.checks.rules import CHECK_IDS
from gpudiag.cli.check_cmd import COULD_NOT_RUN
from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "readme" / "check.md"
TEXT = DOC.read_text()


def examples() -> list[tuple[list[str], str]]:
    """Each ``$ gpudiag …`` block: the arguments and the output shown under them."""
    out = []
    for block in re.findall(r"```\n(\$ gpudiag .*?)\n```", TEXT, flags=re.S):
        command, _, shown = block.partition("\n")
        out.append((shlex.split(command)[2:], shown))
    return out


def test_there_are_examples() -> None:
    assert len(examples()) >= 2


@pytest.mark.parametrize(("args", "shown"), examples(), ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_example_output_is_what_the_command_prints(cli: Cli, args: list[str], shown: str) -> None:
    _, out, _ = cli(*args, width=100)
    assert "\n".join(line.rstrip() for line in out.rstrip("\n").splitlines()) == shown


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
    for code in (ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE, COULD_NOT_RUN):
        assert f"\n| {int(code)} |" in TEXT, code
