"""`list`'s machine-readable outputs run without typer or rich (cli.plain_front), and print what the
Typer command prints: the same bytes on stdout and stderr and the same exit code, for every
example machine and many command lines, errors included; whatever the fast path is not sure
of is left to Typer. (That these paths import neither typer nor rich: tests/test_plain_front.py.)"""

from __future__ import annotations

import os

import pytest
import typer

from gpudiag import argv
from gpudiag.cli import plain_front
from gpudiag.cli.app import build_app
from gpudiag.replay.fixtures import example_names
from tests.front_compare import assert_same

QUICK = ("h100x8-healthy", "gpu-lost", "no-driver", "a100-mig", "hostile-strings")

# Command lines (after the example's `--replay NAME`) the fast path runs: outputs and usage errors.
FORMS: tuple[tuple[str, ...], ...] = (
    ("list", "--query", "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu", "--format", "csv"),
    ("list", "--query-gpu=name,pci.bus_id,clocks.sm", "--format=csv,noheader,nounits"),
    ("list", "--query", "name,memory.used"),
    ("list", "--query", "name", "--json"),
    ("list", "--query", "name,inforom.checksum_validation", "--format", "csv", "-i", "0"),
    ("list", "--json"),
    ("list", "--json", "--no-processes", "--id", "0,1"),
    ("list", "--json", "-q"),
    ("list", "-q"),
    ("list", "-q", "-d", "MEMORY,ECC"),
    ("list", "-q", "-x"),
    ("list", "--details", "--xml-format", "--id=1"),
    ("list", "-L"),
    ("list", "--list-gpus", "--json"),
    ("list", "--query-compute-apps", "pid,process_name,used_memory", "--format", "csv"),
    ("list", "--query-retired-pages", "gpu_uuid,retired_pages.address,retired_pages.cause"),
    ("list", "--query-remapped-rows", "gpu_bus_id,remapped_rows.pending", "--json"),
    ("list", "--query-supported-clocks", "memory,graphics", "--format", "csv,noheader"),
    ("--debug", "list", "--json"),
    ("list", "--json", "--debug", "--color", "never"),
    # usage errors the command itself reports (exit 2, one line)
    ("list", "--query", "name,no.such.field"),
    ("list", "--query", "name", "--format", "tsv"),
    ("list", "--query", "name", "--format", "csv,sideways"),
    ("list", "--json", "--format", "csv"),
    ("list", "-q", "--query", "name"),
    ("list", "--json", "-x"),
    ("list", "-q", "-x", "--json"),
    ("list", "-q", "-x", "-d", "MEMORY"),
    ("list", "-q", "-d", "NOSUCHSECTION"),
    ("list", "--json", "--id", "99"),
    ("list", "--json", "--id", "x,,y"),
    ("list", "--query-compute-apps", "pid,nope"),
)
# Command lines Typer must take: help, tables, watches, forms click reads in its own way, its errors.
TYPER_LINES: tuple[tuple[str, ...], ...] = (
    ("list",),
    ("list", "--no-processes"),
    ("list", "--help"),
    ("list", "--json", "-h"),
    ("--help",),
    ("--version", "list", "--json"),
    ("list", "--json", "--watch"),
    ("list", "--json", "--count", "2"),
    ("list", "--json", "--interval", "1"),
    ("list", "-qx"),
    ("list", "-q", "-x", "-i0"),
    ("list", "-i=0", "--json"),
    ("list", "--json=1"),
    ("list", "--json", "--json"),
    ("list", "--query", "name", "--query-gpu", "uuid"),
    ("list", "--query"),
    ("list", "--query", "--json"),
    ("list", "--id", "--json"),
    ("list", "--query", ""),
    ("list", "--json", "extra"),
    ("list", "--json", "--", "-q"),
    ("list", "--json", "--no-such-option"),
    ("list", "--json", "-"),
    ("--color", "pink", "list", "--json"),
    ("--color=", "list", "--json"),
    ("--debug=1", "list", "--json"),
    ("--replay", "list", "--json"),
    ("--debug", "--debug", "list", "--json"),
    ("--replay", "a", "--replay", "b", "list", "--json"),
    ("check", "--json"),
    ("memory", "--json", "--watch"),
)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUDIAG_REPLAY", raising=False)
    monkeypatch.setenv("COLUMNS", "120")


@pytest.mark.parametrize("form", FORMS, ids=" ".join)
def test_output_and_exit_code_are_the_typer_commands(
    form: tuple[str, ...], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = QUICK[FORMS.index(form) % len(QUICK)]  # every form on one example here; all of them when slow
    assert_same(["--replay", name, *form], capfd, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", example_names())
def test_every_example_prints_what_the_typer_command_prints(
    name: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for form in FORMS:
        assert_same(["--replay", name, *form], capfd, monkeypatch)


def test_global_options_after_the_command_and_the_environments_replay(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same(["list", "--replay", "gpu-lost", "--json"], capfd, monkeypatch)
    assert_same(["list", "--replay=gpu-lost", "-L"], capfd, monkeypatch)
    assert_same(["--replay", "/nonexistent/machine.json", "list", "--json"], capfd, monkeypatch)  # a usage error
    assert_same(["--replay", "no-such-example", "list", "-q", "-x"], capfd, monkeypatch)
    monkeypatch.setenv("GPUDIAG_REPLAY", "a100-mig")
    found = plain_front.read(argv.read(["list", "--json"]), dict(os.environ))
    assert found is not None and found.replay == "a100-mig"
    found = plain_front.read(argv.read(["--replay", "gpu-lost", "list", "--json"]), dict(os.environ))
    assert found is not None and found.replay == "gpu-lost"  # the option outranks the variable
    found = plain_front.read(argv.read(["--replay=", "list", "--json"]), dict(os.environ))
    assert found is not None and found.replay is None  # `--replay ""` is the live machine, as in click


def test_the_live_machine_without_nvml(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVIDIA library here (and, on a GPU machine, the driver's answer): the same line and exit code."""
    assert_same(["list", "--query", "name,uuid", "--format", "csv"], capfd, monkeypatch)  # fields that hold still
    assert_same(["list", "-L"], capfd, monkeypatch)


@pytest.mark.parametrize("args", TYPER_LINES, ids=" ".join)
def test_what_the_fast_path_is_not_sure_of_is_typers(args: tuple[str, ...]) -> None:
    assert plain_front.read(argv.read(["--replay", "h100x8-healthy", *args]), {}) is None


def test_a_completion_request_is_typers() -> None:
    line = argv.read(["list", "--json"])
    assert plain_front.read(line, {"_GPUDIAG_COMPLETE": "bash_complete"}) is None
    assert plain_front.read(line, {}) is not None


def test_its_options_are_the_typer_commands() -> None:
    """Every option the fast path takes is the Typer command's, under the same names and with the
    same arity; the ones it leaves out are the watch's and help."""
    command = typer.main.get_command(build_app(only="list")).commands["list"]  # type: ignore[attr-defined]
    typer_options = {
        opt: (param.name, not param.is_flag) for param in command.params for opt in param.opts + param.secondary_opts
    }
    assert {k: v for k, v in typer_options.items() if v[0] not in ("watch", "interval", "count")} == plain_front.FRONTS[
        "list"
    ].options
    assert {v[0] for v in typer_options.values()} - {v[0] for v in plain_front.FRONTS["list"].options.values()} == {
        "watch",
        "interval",
        "count",
    }
