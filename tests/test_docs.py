"""The README and the reference pages keep up with the code: exit codes, commands, set-up commands, CI."""

from __future__ import annotations

import re
from pathlib import Path

from gpudiag.cli.app import COMMANDS
from gpudiag.exitcodes import markdown_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
EXIT_CODES = (ROOT / "docs" / "exit-codes.md").read_text()
SNAPSHOT = (ROOT / "docs" / "commands" / "snapshot.md").read_text()


def test_exit_code_table_matches_the_code() -> None:
    assert markdown_table() in EXIT_CODES
    assert "(docs/exit-codes.md)" in README


def test_every_command_is_documented() -> None:
    """The landing page names every command, and links each one's page, which exists."""
    for name in COMMANDS:
        assert f"gpudiag {name}" in README or f"`{name}`" in README, name
    pages = sorted(set(re.findall(r"\]\((docs/commands/[a-z-]+\.md)\)", README)))
    linked = " ".join((ROOT / page).read_text() for page in pages)
    for name in COMMANDS:
        assert f"gpudiag {name}" in linked or f"`{name}`" in linked, name


def test_the_readme_is_a_landing_page() -> None:
    """What, install, the two commands, an example per command and links: the manual is in docs/."""
    assert len(README.encode()) <= 40 * 1024


def _readme_one_liner() -> str:
    block = re.search(r"Run the tests on a fresh machine.*?\n```\n(.*?)\n```", README, re.S)
    assert block, "README: no 'Run the tests on a fresh machine' block"
    return block.group(1).strip()


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = ci.strip().splitlines()[-1]  # the README's test command: CI's last line
    assert test_command.startswith("python -m pytest")
    assert "pip install --quiet torch==2.13.0" in ci
    assert _readme_one_liner().endswith(f"pip install torch==2.13.0 && pip install -e '.[dev]' && {test_command}")


def test_the_test_command_needs_only_the_dev_extra() -> None:
    """`-n` comes from pytest-xdist: the dev extra that the one-liner installs must bring it."""
    extra = re.search(r"^dev = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.S | re.M)
    assert extra, "pyproject.toml: no dev extra"
    dev = {name.lower() for name in re.findall(r'^\s*"([A-Za-z0-9_.-]+)', extra.group(1), re.M)}
    assert " -n " in _readme_one_liner() and "pytest-xdist" in dev


def test_changelog_has_an_unreleased_or_versioned_entry() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog")
    assert "## [" in changelog


def test_the_changelog_has_a_section_per_release_in_keep_a_changelog_form() -> None:
    """Unreleased first, then each release, newest first (the package's version among them), each
    with Keep a Changelog's kinds of change only."""
    from gpudiag import __version__

    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(.+?)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert [name for name, _ in releases[:1]] == ["Unreleased"]
    versions = [tuple(int(n) for n in name.split(".")) for name, _ in releases[1:]]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert all(date for _, date in releases[1:])
    assert f"## [{__version__}] - " in changelog or __version__ not in {n for n, _ in releases}
    assert len(re.findall(r"^## ", changelog, re.M)) == len(releases)
    kinds = set(re.findall(r"^### (.+)$", changelog, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds


def test_every_example_machine_is_listed() -> None:
    from gpudiag.replay.fixtures import example_names

    for name in example_names():
        assert f"| `{name}` |" in SNAPSHOT, name
