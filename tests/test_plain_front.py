"""The machine-readable outputs of `memory`, `visible`, `stat`, `topo`, `nvlink`, `mig` (`--json`),
and of `dmon` and `pmon` (`--json` or `--format` with `-c N`) run without typer or rich
(cli.plain_front) and print what their Typer commands print: the same bytes on stdout and stderr
and the same exit code, for many command lines, errors included, and every example machine (slow);
whatever the front is not sure of is left to Typer (`list`'s lines: tests/test_list_fast.py). None
of these paths, `list`'s included, imports typer, rich or click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import typer

from gpudiag import argv
from gpudiag.cli import plain_front
from gpudiag.cli.app import COMMANDS, build_app
from gpudiag.replay.fixtures import example_names
from tests.front_compare import assert_same

ROOT = Path(__file__).resolve().parent.parent
QUICK = ("h100x8-healthy", "gpu-lost", "no-driver", "a100-mig", "hostile-strings", "h100x8-nvswitch", "zero-gpus")

# Command lines (after the example's `--replay NAME`) the front runs: outputs and usage errors.
FORMS: tuple[tuple[str, ...], ...] = (
    ("memory", "--json"),
    ("memory", "--json", "--id", "0"),
    ("memory", "-i", "1,0", "--json"),
    ("memory", "--id=0", "--json"),
    ("memory", "--json", "--id", "x,,y"),
    ("memory", "--json", "--id", "99"),
    ("visible", "--json"),
    ("visible", "--json", "--value", "1,0"),
    ("visible", "--value=GPU-nope,0", "--json"),
    ("visible", "--json", "--unset"),
    ("visible", "--json", "--order", "pci_bus_id"),
    ("visible", "--json", "--order=sideways"),
    ("visible", "--json", "--value", "1", "--unset"),
    ("visible", "--json", "--select", "1"),
    ("visible", "--select=0,1", "--json"),
    ("visible", "--json", "--select", "99"),
    ("stat", "--json"),
    ("stat", "--json", "-c", "-p", "-P"),
    ("stat", "--json", "--no-processes", "--id", "0"),
    ("stat", "--show-power", "--json", "-i", "1"),
    ("stat", "--show-cmd", "--show-pid", "--json", "--id=0,1"),
    ("stat", "--json", "--id", "x,,y"),
    ("topo", "--json"),
    ("topo", "--json", "-m"),
    ("topo", "--json", "-p2p", "r"),
    ("topo", "--p2pstatus=n", "--json"),
    ("topo", "--json", "--matrix", "-p2p", "r"),
    ("topo", "--json", "-p2p", "z"),
    ("nvlink", "--json"),
    ("nvlink", "--json", "-e"),
    ("nvlink", "--json", "-gt", "d"),
    ("nvlink", "--json", "--getthroughput=x"),
    ("nvlink", "--json", "-s", "-e"),
    ("nvlink", "--json", "--status", "-i", "0"),
    ("mig", "--json"),
    ("mig", "--json", "-lgi"),
    ("mig", "--json", "--list-compute-instances", "-i", "0"),
    ("mig", "--json", "-lgip", "--id=1"),
    ("mig", "--json", "-lgi", "-lci"),
    ("dmon", "--json", "-c", "1"),
    ("dmon", "-c", "1", "--format", "csv"),
    ("dmon", "--count=1", "--format=csv,noheader,nounit", "-s", "pucvmet", "-o", "DT", "-i", "0"),
    ("dmon", "--json", "-c", "2", "-d", "0.1", "--select", "um"),
    ("dmon", "--json", "-c", "1", "-s", "xyz"),
    ("dmon", "--json", "-c", "1", "-o", "T"),
    ("dmon", "--json", "-c", "0"),
    ("dmon", "--json", "-c", "1", "-d", "0.01"),
    ("pmon", "--json", "-c", "1"),
    ("pmon", "-c", "1", "--format", "csv", "-s", "um"),
    ("pmon", "--json", "-c", "1", "--delay=11"),
    ("pmon", "--json", "-c", "1", "-i", "x,,y"),
    ("--debug", "stat", "--json"),
    ("visible", "--json", "--debug", "--color", "never"),
)
# Command lines Typer must take: help, tables, watches, forms click reads in its own way, its errors.
TYPER_LINES: tuple[tuple[str, ...], ...] = (
    ("memory",),
    ("memory", "--json", "--watch"),
    ("memory", "--json", "--count", "1"),
    ("memory", "--json", "--textfile", "/tmp"),
    ("memory", "--help"),
    ("memory", "--json", "-h"),
    ("memory", "--json", "--id"),
    ("memory", "--json", "-i0"),
    ("visible",),
    ("visible", "--json", "--probe"),
    ("visible", "--json", "--value"),
    ("visible", "--json", "--value", "-1"),
    ("visible", "--json", "--json"),
    ("visible", "--json", "--unset=1"),
    ("stat",),
    ("stat", "--json", "--watch"),
    ("stat", "--json", "-cp"),
    ("stat", "--json", "--interval", "2"),
    ("stat", "--json", "--count", "1"),
    ("topo",),
    ("topo", "-m"),
    ("topo", "--json", "-p2p"),
    ("nvlink", "-e"),
    ("nvlink", "--json", "-gt"),
    ("nvlink", "--json", "extra"),
    ("mig", "-lgi"),
    ("mig", "--json", "--no-such-option"),
    ("mig", "--json", "--", "-lgi"),
    ("dmon", "--json"),
    ("dmon", "-c", "1"),
    ("dmon", "--json", "-c", "x"),
    ("dmon", "--json", "-c", "1.5"),
    ("dmon", "--json", "-c", "1", "-d", "soon"),
    ("dmon", "--json", "-c", "1", "-f", "/tmp/dmon.log"),
    ("pmon", "--format", "csv"),
    ("pmon", "--json", "-c", "-1"),
    ("--color", "pink", "stat", "--json"),
    ("--version", "topo", "--json"),
)
# Each command's options that only Typer runs (a watch, files, help), by Request field.
TYPER_ONLY: dict[str, set[str]] = {
    "list": {"watch", "interval", "count"},
    "memory": {
        "watch",
        "interval",
        "count",
        "log",
        "until_free",
        "timeout",
        "alert_free_below",
        "alert_oom_within",
        "postmortem",
        "torch_snapshot",
        "plot",
        "output",
        "prometheus",
        "bind",
        "textfile",
    },
    "visible": {"probe"},
    "stat": {"watch", "interval", "count"},
    "topo": set(),
    "nvlink": set(),
    "mig": set(),
    "dmon": {"filename"},
    "pmon": {"filename"},
}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUDIAG_REPLAY", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")


# The quick loop's share: every third form, each on one example (every form on every example: slow).
QUICK_FORMS = FORMS[::3]


@pytest.mark.parametrize("form", QUICK_FORMS, ids=" ".join)
def test_output_and_exit_code_are_the_typer_commands(
    form: tuple[str, ...], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "a100-mig" if "mig" in form else QUICK[QUICK_FORMS.index(form) % len(QUICK)]
    assert_same(["--replay", name, *form], capfd, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", example_names())
def test_every_example_prints_what_the_typer_command_prints(
    name: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for form in FORMS:
        assert_same(["--replay", name, *form], capfd, monkeypatch)


def test_global_options_after_the_command_and_the_live_machine(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same(["stat", "--replay", "gpu-lost", "--json"], capfd, monkeypatch)
    assert_same(["visible", "--replay=a100-mig", "--json", "--select", "0"], capfd, monkeypatch)
    assert_same(["--replay", "/nonexistent/machine.json", "memory", "--json"], capfd, monkeypatch)  # a usage error
    # No NVIDIA library here (on a GPU machine, the driver's answer): the same line and exit code.
    assert_same(["topo", "--json"], capfd, monkeypatch)
    assert_same(["mig", "--json"], capfd, monkeypatch)
    assert_same(["visible", "--json"], capfd, monkeypatch)
    assert_same(["memory", "--json"], capfd, monkeypatch)
    assert_same(["stat", "--json"], capfd, monkeypatch)
    assert_same(["dmon", "--json", "-c", "1"], capfd, monkeypatch)


@pytest.mark.parametrize("args", TYPER_LINES, ids=" ".join)
def test_what_the_front_is_not_sure_of_is_typers(args: tuple[str, ...]) -> None:
    assert plain_front.read(argv.read(["--replay", "h100x8-healthy", *args]), {}) is None


def _typer_options(command_name: str) -> dict[str, tuple[str, bool]]:
    command = typer.main.get_command(build_app(only=command_name)).commands[command_name]  # type: ignore[attr-defined]
    return {
        opt: (param.name, not param.is_flag)
        for param in command.params
        if param.param_type_name == "option"
        for opt in param.opts + param.secondary_opts
    }


@pytest.mark.parametrize("command_name", sorted(plain_front.FRONTS))
def test_each_table_is_its_typer_commands_options(command_name: str) -> None:
    """Every option a front takes is its Typer command's, under the same name and arity, a value
    taken as click's plain string, or the number the front converts as click does; the ones left
    out are Typer's."""
    front = plain_front.FRONTS[command_name]
    typer_options = _typer_options(command_name)
    only_typer = TYPER_ONLY[command_name]
    assert {k: v for k, v in typer_options.items() if v[0] not in only_typer} == front.options
    assert {v[0] for v in typer_options.values()} - {v[0] for v in front.options.values()} == only_typer
    command = typer.main.get_command(build_app(only=command_name)).commands[command_name]  # type: ignore[attr-defined]
    for param in command.params:
        if param.name in {field for field, _ in front.options.values()} and not param.is_flag:  # type: ignore[attr-defined]
            number = front.numbers.get(param.name)  # type: ignore[arg-type]
            kind = {None: "StringParamType", int: "IntParamType", float: "FloatParamType"}[number]
            assert type(param.type).__name__ == kind, (command_name, param.name)
    assert set(front.modes) <= {field for field, _ in front.options.values()}


@pytest.mark.parametrize("command_name", sorted(plain_front.FRONTS))
def test_a_request_built_from_some_options_is_the_one_the_typer_command_builds(command_name: str) -> None:
    """The front builds the Request from the options written; the Typer command (request_of) from
    every parameter: each field's default is its parameter's, so the two are the same Struct."""
    front = plain_front.FRONTS[command_name]
    request: Any = plain_front.named(front.request)
    command = typer.main.get_command(build_app(only=command_name)).commands[command_name]  # type: ignore[attr-defined]
    params = {param.name: param.default for param in command.params}
    fields = msgspec.structs.fields(request)
    assert {f.name for f in fields} <= set(params)
    for field in fields:
        assert field.default == params[field.name], (command_name, field.name)


def test_every_front_is_a_command() -> None:
    assert set(plain_front.FRONTS) <= set(argv.COMMANDS) == set(COMMANDS)


_SCRIPT = """
import sys
from gpudiag.entry import main
for line in sys.argv[1:]:
    sys.argv = ["gpudiag", *line.split()]
    try:
        main()
    except SystemExit as stop:
        assert stop.code in (0, None), (line, stop.code)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("typer", "rich", "click"))
print("LOADED", loaded, file=sys.stderr)
"""


def test_machine_readable_paths_import_neither_typer_nor_rich() -> None:
    lines = [
        "--replay h100x8-healthy list --query index,name,memory.used,memory.total,utilization.gpu --format csv",
        "--replay h100x8-healthy list --json",
        "--replay h100x8-healthy list -q -x",
        "--replay h100x8-healthy list -q",
        "--replay h100x8-healthy list -L --json",
        "--replay h100x8-training-64procs list --query-compute-apps pid,used_memory --format csv",
        "--replay h100x8-training-64procs memory --json",
        "--replay h100x8-healthy visible --json --value 1,0",
        "--replay h100x8-healthy visible --json --select 1",
        "--replay h100x8-healthy stat --json -c -p -P",
        "--replay h100x8-nvswitch topo --json",
        "--replay h100x8-nvswitch nvlink --json",
        "--replay a100-mig mig --json",
        "--replay h100x8-healthy dmon --json -c 1",
        "--replay h100x8-training-64procs pmon -c 1 --format csv",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GPUDIAG_REPLAY", None)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *lines], capture_output=True, text=True, env=env, cwd="/", timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr, done.stderr
    for schema in ("memory/2", "visible/1", "stat/1", "topo/1", "nvlink/1", "mig/1"):
        assert f'"schema": "gpudiag.{schema}"' in done.stdout, schema
    assert '{"schema":"gpudiag.dmon/1"' in done.stdout and "#gpu, pid, type" in done.stdout
    assert done.stdout.count("<?xml") == 1 and done.stdout.count('"schema": "gpudiag.machine/1"') == 1
