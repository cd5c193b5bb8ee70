"""The README keeps up with the code: exit codes, commands, set-up commands, CI."""

from __future__ import annotations

from pathlib import Path

from gpudiag.cli.app import COMMANDS
from gpudiag.exitcodes import markdown_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_exit_code_table_matches_the_code() -> None:
    assert markdown_table() in README


def test_every_command_is_documented() -> None:
    for name in COMMANDS:
        assert f"gpudiag {name}" in README or f"`{name}`" in README, name


def test_ci_runs_the_readme_test_command() -> None:
    test_command = "python -m pytest"
    assert test_command in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\npython -m pytest\n" in ci
    assert "pip install --quiet torch==2.13.0" in ci
    assert "pip install torch==2.13.0 && pip install -e '.[dev]' && python -m pytest" in README


def test_changelog_has_an_unreleased_or_versioned_entry() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog")
    assert "## [" in changelog


def test_every_example_machine_is_listed() -> None:
    from gpudiag.replay.fixtures import example_names

    for name in example_names():
        assert f"| `{name}` |" in README, name
