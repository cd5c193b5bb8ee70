"""Shared test helpers: example machines, a CLI runner at a fixed width."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from gpudiag.model import Machine
from gpudiag.testing import fixtures


@pytest.fixture
def machine() -> Callable[[str], Machine]:
    def load(name: str) -> Machine:
        return fixtures.load(name)[0]

    return load


class Cli:
    """Runs `gpudiag --color never ARGS` at a fixed width and fails on any traceback."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, width: int = 120, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        from gpudiag.cli.app import app

        result = self.runner.invoke(app, ["--color", "never", *args], env={"COLUMNS": str(width), **(env or {})})
        assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def cli() -> Cli:
    return Cli()
