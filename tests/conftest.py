"""Shared test helpers: example machines, a CLI runner at a fixed width, and the `gpu` marker.

Tests marked ``gpu`` run only where NVML initialises and sees at least one GPU; everywhere
else they are skipped with the reason, so CI without a GPU stays green and says why.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from gpudiag.model import Machine
from gpudiag.replay import fixtures

# Replays show the local time their snapshot was taken (as nvidia-smi shows its own): in UTC here, so
# that rendered output is the same on every machine that runs the tests.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture
def machine() -> Callable[[str], Machine]:
    """A loader of example machines by name (or snapshot path): ``machine("a100-mig")``."""

    def load(name: str) -> Machine:
        return fixtures.load(name)[0]

    return load


class Cli:
    """Runs `gpudiag --color never ARGS` at a fixed width and fails on any traceback.

    Returns ``(exit_code, stdout, stderr)``. ``cli.replay(NAME, ARGS)`` is the same with
    ``--replay NAME`` in front, for running a command against an example machine.
    """

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, width: int = 120, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        from gpudiag.cli.app import app

        result = self.runner.invoke(app, ["--color", "never", *args], env={"COLUMNS": str(width), **(env or {})})
        assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    def replay(
        self, name: str, *args: str, width: int = 120, env: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        return self("--replay", name, *args, width=width, env=env)


@pytest.fixture
def cli() -> Cli:
    return Cli()


@functools.cache
def gpu_unavailable_reason() -> str:
    """Why real-GPU tests cannot run here, or "" when NVML works and sees a GPU.

    Asked once per session, and only when a `gpu`-marked test was collected.
    """
    try:
        import pynvml
    except ImportError as exc:
        return f"pynvml cannot be imported: {exc}"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML does not initialise: {exc}"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:
        return f"NVML cannot count GPUs: {exc}"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return "" if count > 0 else "NVML sees no GPU"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_tests:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a real NVIDIA GPU: {reason}")
        for item in gpu_tests:
            item.add_marker(skip)
