"""Shared test helpers: example machines, a CLI runner at a fixed width, and the markers.

Tests marked ``gpu`` run only where NVML initialises and sees at least one GPU; everywhere
else they are skipped with the reason, so CI without a GPU stays green and says why.

Tests marked ``slow`` take seconds each or start something big: real daemons (every ``slurm`` and
``prometheus`` test is ``slow`` too), real signals, interpreters that import torch, pip installs,
and sweeps over every example beyond :data:`QUICK_EXAMPLES`. ``python -m pytest -n auto -m "not
slow"`` leaves them out for a quick loop; CI runs everything. Slow tests run first, so that under
pytest-xdist a long test never starts last.
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from typer.testing import CliRunner

from gpudiag.model import Machine
from gpudiag.replay import fixtures

pytest.register_assert_rewrite("tests.golden")  # its comparisons show a diff, as a test's own do

# typer's CliRunner.invoke turns the Typer app into its click command at every call: ten commands,
# each option read from its annotations, a third of what a replayed command costs in a test. The
# app does not change while the tests run (gpudiag itself builds it once per process), so each
# app is turned into a command once. typer.testing imports get_command under this name.
assert callable(typer.testing._get_command), "typer.testing no longer has _get_command: update this"
typer.testing._get_command = functools.cache(typer.testing._get_command)


# The examples that a sweep over every example machine runs on in the quick loop (-m "not slow"):
# the kinds of machine the probe and the renderers branch on most. The full suite sweeps them all.
QUICK_EXAMPLES = (
    "h100x8-training-64procs",  # 8 GPUs and 64 processes: the widest tables
    "a100-mig",  # MIG instances and their processes
    "no-driver",  # NVML does not start: one line and an exit code
)


def every_example() -> list[Any]:
    """Every shipped example as a test parameter; those outside QUICK_EXAMPLES are ``slow``."""
    names = fixtures.example_names()
    assert set(QUICK_EXAMPLES) <= set(names), set(QUICK_EXAMPLES) - set(names)
    return examples_among(names)


def examples_among(names: Iterable[str]) -> list[Any]:
    """These examples as test parameters (a sweep over some of them: those with a recorded series,
    say); those outside QUICK_EXAMPLES are ``slow``."""
    names = list(names)
    assert set(QUICK_EXAMPLES) & set(names), "a sweep keeps at least one quick example in the quick loop"
    return [pytest.param(name, marks=() if name in QUICK_EXAMPLES else pytest.mark.slow) for name in names]


def skip_without_torch() -> None:
    """Skip unless torch is installed, without importing it: tests that need torch run it in a child,
    and an import here would cost each worker seconds."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (a CPU build will do)")


# Replays show the local time their snapshot was taken (as nvidia-smi shows its own): in UTC here, so
# that rendered output is the same on every machine that runs the tests.
os.environ["TZ"] = "UTC"
time.tzset()

# The torch children the tests start (CPU stand-ins for GPUs: tiny tensors, a few hundred steps) run
# one thread each, unless told otherwise: two workers on two cores already fill the machine, and
# OpenMP's extra threads spin while they wait (a 200-step CPU training loop: 7.3 CPU-s at 2 threads,
# 4.8 at 1). What they test is gpudiag's handling of its children, not torch's parallel speed.
os.environ.setdefault("OMP_NUM_THREADS", "1")


class SkippingClock:
    """The time module as a module under test uses it, whose sleeps pass at once (and its monotonic
    clock moves on by them)."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def sleep(self, seconds: float) -> None:
        self.skipped += seconds


@pytest.fixture(autouse=True)
def _gpm_waits_on_a_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read of a GPU with GPM waits the sampling window between its two samples (0.1 s): hundreds of
    reads in the suite would wait for nothing but the fake's counters. The window is unchanged."""
    from gpudiag.probe import gpm

    monkeypatch.setattr(gpm, "time", SkippingClock())


@pytest.fixture(autouse=True)
def _no_debug_setting_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--debug` sets GPUDIAG_DEBUG in the process (its children inherit it); in-process CLI tests
    share one process, so each test starts without it and leaves none behind for the next."""
    from gpudiag.errors import DEBUG_ENV

    monkeypatch.setenv(DEBUG_ENV, "")  # recorded: the value before the test comes back after it
    monkeypatch.delenv(DEBUG_ENV)


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


@pytest.fixture(scope="session")
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


ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the main process, before any xdist worker starts
        # As the benchmarks do: with PYTHONDONTWRITEBYTECODE=1 (our machines, CI) nothing writes
        # bytecode, and every interpreter the tests start (hundreds) would compile gpudiag again.
        for package in ("gpudiag", "tests"):
            compileall.compile_dir(ROOT / package, quiet=1)
    # Started in the background of a non-interactive shell (`pytest &`, `nohup`), the suite inherits
    # SIGINT ignored, and so would every child it starts; gpudiag rightly keeps an ignored signal
    # ignored (edge.py), so the tests that send a child SIGINT would wait out their timeouts. Children
    # start as from a terminal instead; test_signals.py tests the ignored case on purpose.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Keep pytest's cache of rewritten test modules even under PYTHONDONTWRITEBYTECODE=1: rewriting
    the assertions of every test module costs each process ~6 s of CPU, the cache makes it ~0."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


# Whether collecting the tests imported torch (tests/test_layers.py holds it false): torch costs
# every collecting worker seconds, so modules ask for it with importlib.util.find_spec instead.
TORCH_IMPORTED_BY_COLLECTION: list[bool] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    TORCH_IMPORTED_BY_COLLECTION.append("torch" in sys.modules)


# Modules whose tests share one costly start, each run by one worker under ``--dist loadgroup``: the
# Slurm cluster and the Prometheus stack start once per module, the peers' replays and the layer
# rules' parse of every module are made once. pytest-xdist's own grouping (the xdist_group marker)
# renames items, which pytest 9.2's read-only node ids ignore: loadgroup quietly became plain load.
ONE_WORKER_MODULES = frozenset(
    {"tests/test_slurm.py", "tests/test_prometheus_integration.py", "tests/test_peers.py", "tests/test_layers.py"}
)


# Modules run whole with a module of ONE_WORKER_MODULES, as one unit: the size limits read the syntax
# trees the layer rules parsed (tests/source_trees.py: ~0.6 CPU-s a parse of gpudiag).
RUN_WITH = {"tests/test_sizes.py": "tests/test_layers.py"}


# The tests that import torch into the worker itself (every other torch runs in a child): one unit,
# so that one worker pays torch's import (~2.5 CPU-s and ~300 MB), not each. Prefixes of node ids.
TORCH_IN_THE_WORKER = (
    "tests/test_deep_children.py::test_every_pattern_passes_on_good_memory_and_counts_what_it_moved",
    "tests/test_deep_children.py::test_a_stuck_bit_is_found_with_its_address_and_bit[",
    "tests/test_track.py::test_with_the_real_cpu_torch_it_publishes_no_devices_and_initialises_nothing",
)


def work_unit(nodeid: str) -> str:
    """The unit a worker is given whole: a module of :data:`ONE_WORKER_MODULES` (with those that
    :data:`RUN_WITH` it), the tests of
    :data:`TORCH_IN_THE_WORKER`, else the test."""
    module = nodeid.split("::", 1)[0]
    module = RUN_WITH.get(module, module)
    if module in ONE_WORKER_MODULES:
        return module
    return "torch in the worker" if nodeid.startswith(TORCH_IN_THE_WORKER) else nodeid


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown where xdist is not loaded (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own scheduler for the mode asked
    from tests.unit_scheduling import UnitScheduling

    return UnitScheduling(config, log, work_unit)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the markers added here count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = {item: {mark.name for mark in item.iter_markers()} for item in items}  # one walk up each item's parents
    for item, names in marked.items():
        if names & {"slurm", "prometheus"}:  # real daemons
            item.add_marker(pytest.mark.slow)
            names.add("slow")
    items.sort(key=lambda item: "slow" not in marked[item])  # stable: slow first
    gpu_tests = [item for item in items if "gpu" in marked[item]]
    if not gpu_tests:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a real NVIDIA GPU: {reason}")
        for item in gpu_tests:
            item.add_marker(skip)


@pytest.hookimpl(trylast=True)  # after every parametrize: the cases and their ids are made
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Under ``-m "not slow"`` (the quick loop), the cases of a sweep marked ``slow`` are not made into
    tests only for `-m` to deselect them: ~1,700 of them, ~0.3 CPU-s in each process that collects.
    Their ids are made first, so the cases left keep the names they have in the whole suite."""
    calls = getattr(metafunc, "_calls", None)  # pytest's list of cases, one test each
    if metafunc.config.option.markexpr != "not slow" or not isinstance(calls, list):
        return
    quick = [call for call in calls if not any(mark.name == "slow" for mark in call.marks)]
    if quick:  # with none left pytest would make one unparametrized test instead
        calls[:] = quick
