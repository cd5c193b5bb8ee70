"""Property-based fuzzing of the whole command line (issue 23): argv, environment, replay files.

Every command and every option (read from the Typer app, so a new one is fuzzed without a word
here), with values that are right, wrong or hostile, junk words after them, a hostile environment
(CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, COLUMNS, LINES, TERM, NO_COLOR, GPUDIAG_REPLAY) and
mutated example machines as replay files. For every run:

- no traceback, and an exit code from gpudiag/exitcodes.py that is not 70 (a bug);
- the output of ``--json`` parses (as one document, or JSON Lines for a watch);
- no raw control character, bidi override or other non-printable character reaches stdout or
  stderr (with ``--color always``, only rich's own colour and cursor codes).

Runs go in-process through typer's CliRunner (milliseconds each); a few go through real
processes, with byte strings in argv that are not UTF-8 and non-UTF-8 output encodings.

Budget: the ``ci`` profile (default) is derandomised and runs a few seconds; ``GPUDIAG_FUZZ=nightly``
runs hundreds of times more examples with fresh randomness (``GPUDIAG_FUZZ_EXAMPLES=N`` overrides
the count)::

    GPUDIAG_FUZZ=nightly python -m pytest tests/test_fuzz.py -q
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiag.cli.app import COMMANDS
from gpudiag.exitcodes import ExitCode
from gpudiag.replay.fixtures import EXAMPLES_DIR, example_names

_BUDGETS = {"ci": (8, True), "nightly": (1000, False)}  # examples per test, derandomised
for _name, (_examples, _fixed) in _BUDGETS.items():
    settings.register_profile(
        f"gpudiag-fuzz-{_name}",
        max_examples=int(os.environ.get("GPUDIAG_FUZZ_EXAMPLES", _examples)),
        derandomize=_fixed,
        database=None if _fixed else settings.default.database,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
PROFILE = os.environ.get("GPUDIAG_FUZZ", "ci")
FUZZ = settings.get_profile(f"gpudiag-fuzz-{PROFILE}")
ALLOWED = {int(code) for code in ExitCode} - {int(ExitCode.INTERNAL)}
RICH_CONTROLS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[[0-9]*[AK]|\r")
EXAMPLES = example_names()

# --- text ------------------------------------------------------------------------------------

# What outside text may hold: controls (C0, DEL, C1), escape sequences, bidi and zero-width
# characters, newlines, shell and CSV syntax, non-ASCII letters, undecodable bytes (surrogateescape).
HOSTILE_PIECES = [
    "\x1b]52;c;cm0gLXJmIH4vCg==\x07",
    "\x1b[2J\x1b[H",
    "\x1b[8m",
    "\x9b31m",
    "\x07",
    "\x00",
    "\r",
    "\n",
    "\t",
    "\x7f",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\udcff",
    '"',
    ",",
    "'",
    "$(id)",
    "`id`",
    ";",
    "[0-3]",
    "é",
    "中",
    "９",
    "²",
    "…",
]
hostile_text = st.lists(st.sampled_from(HOSTILE_PIECES) | st.text(max_size=6), max_size=6).map("".join)


def _argv_safe(text: str) -> str:
    """What a real argv or environment value can hold: no NUL, surrogates only as undecodable bytes."""
    return "".join(c for c in text if c != "\x00" and not ("\ud800" <= c <= "\udc7f" or "\udd00" <= c <= "\udfff"))


argv_text = hostile_text.map(_argv_safe)
numbers = st.sampled_from(["0", "1", "2", "-1", "3.5", "1e308", "inf", "nan", "-0", "9" * 30, "0x10", "٣", ""])
sizes = st.sampled_from(["0", "20GiB", "512MiB", "1.5G", "20GB", "1024B", "80", "-1GiB", "1e400GiB", "GiB", "nanGiB"])
query_fields = st.lists(
    st.sampled_from(["index", "name", "uuid", "serial", "memory.used", "clocks.sm", "power.draw", "bogus", ""]),
    min_size=1,
    max_size=4,
).map(",".join)

# --- argv: every option of every command, from the app -----------------------------------------


@functools.cache
def _commands() -> dict[str, Any]:
    import typer

    from gpudiag.cli.app import app

    group: Any = typer.main.get_command(app)
    return dict(group.commands)


# Options left out (and why), or given values that keep a run short and on this machine.
LEFT_OUT = {
    ("memory", "--prometheus"),  # binds a TCP port
    ("memory", "--bind"),
    ("exporter", "--port"),  # exporter runs with --once only: it never serves
    ("exporter", "--bind"),
    ("visible", "--probe"),  # starts torch in a child (seconds)
    ("check", "--python"),  # starts that interpreter's torch
    ("drain", "--execute"),  # would run scontrol
}
BY_NAME: dict[str, st.SearchStrategy[str]] = {
    "--count": st.sampled_from(["1", "2", "0", "-1", "x", "1.5"]),
    "--interval": st.sampled_from(["0.1", "0.05", "0", "-1", "nan", "inf", "x", "1e-300"]),
    "--delay": st.sampled_from(["0.1", "0.05", "0", "-1", "nan", "inf", "x", "11"]),
    "--options": st.sampled_from(["D", "T", "DT", "X", ""]) | argv_text,
    "--p2pstatus": st.sampled_from(["r", "w", "n", "a", "p", "x", ""]),
    "--getthroughput": st.sampled_from(["d", "r", "x", ""]),
    "--timeout": st.sampled_from(["0.1", "0", "-1", "nan", "inf", "x"]),
    "--deadline": st.sampled_from(["0", "-1", "nan", "1e308", "x"]),  # a real one is appended (_bounds)
    "--until-free": sizes,
    "--alert-free-below": sizes,
    "--min-free": sizes,
    "--id": st.sampled_from(["0", "1", "0,1", "", "0,,1", "GPU-", "00000000:00:1B.0", "99", "-1"]) | argv_text,
    "--query": query_fields,
    "--query-compute-apps": st.sampled_from(["pid,process_name,used_memory", "gpu_uuid,name", "bogus", ""]),
    "--format": st.sampled_from(["csv", "csv,noheader", "csv,nounits,noheader", "xml", "csv,bogus", ""]),
    "--color": st.sampled_from(["auto", "always", "never", "sometimes"]),
    "--mode": st.sampled_from(["prolog", "health-check", "epilog", ""]),
    "--compat": st.sampled_from(["native", "dcgm", "both", "other"]),
    "--order": st.sampled_from(["PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id", ""]) | argv_text,
    "--select": st.sampled_from(["0", "1", "0,1", "GPU-", "MIG-", "9"]) | argv_text,
    "--value": st.sampled_from(["0", "1,0", "-1", "", "GPU-", "0,0"]) | argv_text,
    "--only": st.sampled_from(["health", "env", "nvml.init", "bogus"]),
    "--skip": st.sampled_from(["health", "compat", "bogus"]),
}


def _value(command: str, option: Any, scratch: Path) -> st.SearchStrategy[str]:
    name = option.opts[0]
    if name in BY_NAME:
        return BY_NAME[name]
    kind = option.type.name
    if kind in ("file", "directory", "path"):  # a place in a scratch directory, or a hostile name there
        return st.sampled_from(["out.json", "log.csv", "log.jsonl", "log.txt", "dir", "missing/x.json"]).map(
            lambda leaf: str(scratch / leaf)
        ) | argv_text.map(lambda leaf: str(scratch / ("f-" + leaf.replace("/", "_"))))
    if kind in ("integer", "float"):
        return numbers
    return argv_text


@st.composite
def argvs(draw: st.DrawFn, scratch: Path, nodes: Path) -> list[str]:
    """A command line: global options, a command, some of its options with values, junk words."""
    commands = _commands()
    command = draw(st.sampled_from(sorted(COMMANDS)))
    head: list[str] = []
    if draw(st.booleans()):
        head += ["--color", draw(BY_NAME["--color"])]
    if draw(st.integers(0, 9)) == 0:
        head.append("--debug")
    words: list[str] = []
    options = [p for p in commands[command].params if p.param_type_name == "option"]
    for option in (
        draw(st.lists(st.sampled_from(options), max_size=5, unique_by=lambda p: p.opts[0])) if options else []
    ):
        name = option.opts[0]
        if (command, name) in LEFT_OUT:
            continue
        words.append(draw(st.sampled_from(option.opts)))
        if not option.is_flag:
            words.append(draw(_value(command, option, scratch)))
    if command in ("report", "drain"):
        words += draw(
            st.lists(st.sampled_from([str(nodes), str(nodes / "b.json"), str(scratch), "missing"]), max_size=2)
        )
    junk = st.sampled_from(["--", "-", "--bogus", "-x", "--json", "--help", "0"]) | argv_text
    words += draw(st.lists(junk, max_size=2))
    return [*head, command, *words, *_bounds(command, words)]


def _bounds(command: str, words: list[str]) -> list[str]:
    """Appended last (click keeps an option's last value): a watch ends after 2 quick samples, an
    exporter prints once, check and snapshot never start torch."""
    if command in ("list", "memory") and {"--watch", "-w", "--log", "--until-free", "--alert-free-below"} & set(words):
        return ["--count", "2", "--interval", "0.1"]
    if command in ("dmon", "pmon"):  # a replay plays its series: two quick samples at most
        return ["--count", "2", "--delay", "0.1"]
    if command == "stat" and {"--watch", "-w"} & set(words):
        return ["--count", "2", "--interval", "0.1"]
    if command == "exporter":
        return ["--once", "--no-kubelet"]
    if command == "check" and "--mode" in words:  # its deadline ends the process: never this one
        return ["--no-torch", "--deadline", "3600"]
    if command in ("check", "snapshot"):
        return ["--no-torch"]
    return []


# --- environment and replays ------------------------------------------------------------------


def environments(replays: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "CUDA_VISIBLE_DEVICES": st.sampled_from(["0", "1,0", "-1", "", "GPU-", "0,0", "MIG-"]) | argv_text,
            "CUDA_DEVICE_ORDER": st.sampled_from(["PCI_BUS_ID", "FASTEST_FIRST", ""]) | argv_text,
            "COLUMNS": st.sampled_from(["0", "1", "39", "40", "80", "1000", "99999999", "-5", "²", "abc", ""]),
            "LINES": st.sampled_from(["0", "3", "50", "99999999", "x"]),
            "TERM": st.sampled_from(["dumb", "xterm-256color", "", "vt100"]) | argv_text,
            "NO_COLOR": st.sampled_from(["1", "", "0"]),
            "GPUDIAG_REPLAY": replays,
        },
    ).map(lambda env: {k: _argv_safe(v) for k, v in env.items()})


JSON_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | hostile_text
    | st.just([])
    | st.just({})
    | st.just({"unavailable": "not_supported"})
)
MUTATIONS = ("replace", "delete", "empty-list", "duplicate-gpu", "truncate", "bad-utf8", "string-everywhere")


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*path, i))
    return found


@st.composite
def mutated_replays(draw: st.DrawFn, scratch: Path) -> str:
    """An example machine with one thing wrong, written to a file: the loader must refuse it in one
    line (exit 2) or every command must cope with it."""
    name = draw(st.sampled_from(EXAMPLES))
    data = json.loads(Path(EXAMPLES_DIR, f"{name}.json").read_text())
    mutation = draw(st.sampled_from(MUTATIONS))
    raw: bytes
    if mutation in ("replace", "delete", "empty-list", "string-everywhere"):
        paths = [p for p in _paths(data) if p]
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if mutation == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        elif mutation == "delete":
            del parent[path[-1]]
        elif mutation == "empty-list":
            parent[path[-1]] = []
        else:  # every string under this path becomes hostile text
            text = draw(hostile_text)
            parent[path[-1]] = _strings(copy.deepcopy(parent[path[-1]]), text)
        raw = json.dumps(data).encode()
    elif mutation == "duplicate-gpu" and data.get("gpus"):
        data["gpus"].append(copy.deepcopy(data["gpus"][0]))
        raw = json.dumps(data).encode()
    else:
        raw = json.dumps(data).encode()
        if mutation == "truncate":
            raw = raw[: draw(st.integers(0, len(raw)))]
        elif mutation == "bad-utf8":
            at = draw(st.integers(0, len(raw)))
            raw = raw[:at] + b"\xff\xfe" + raw[at:]
    path_out = Path(tempfile.mkstemp(suffix=".json", dir=scratch)[1])
    path_out.write_bytes(raw)
    return str(path_out)


def _strings(node: Any, text: str) -> Any:
    if isinstance(node, str):
        return node + text
    if isinstance(node, dict):
        return {k: _strings(v, text) for k, v in node.items()}
    if isinstance(node, list):
        return [_strings(v, text) for v in node]
    return node


# --- the properties -----------------------------------------------------------------------------


def check_run(args: list[str], code: int, out: str, err: str, exception: BaseException | None = None) -> None:
    where = f"gpudiag {' '.join(map(repr, args))}: exit {code}\n{err[-2000:]}"
    assert exception is None or isinstance(exception, SystemExit), f"{where}\n{exception!r}"
    assert "Traceback" not in out + err, where
    assert code in ALLOWED, where
    shown = RICH_CONTROLS.sub("", out) if "always" in args else out
    assert [c for c in shown if not c.isprintable() and c != "\n"] == [], where
    assert [c for c in err if not c.isprintable() and c != "\n"] == [], where
    wants_json = "--json" in args and not {"--help", "-h", "--version"} & set(args)
    if wants_json and out.strip() and code != ExitCode.USAGE:
        try:
            json.loads(out)
        except ValueError:
            for line in out.splitlines():  # a watch: JSON Lines
                json.loads(line)


def _run(args: list[str], env: dict[str, str]) -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    # --debug sets GPUDIAG_DEBUG in this process for good: every run starts without it.
    names = ("GPUDIAG_REPLAY", "GPUDIAG_DEBUG", "COLUMNS", "LINES", "NO_COLOR")
    unset: dict[str, str | None] = dict.fromkeys(names)
    result = CliRunner().invoke(app, args, env={**unset, "PATH": "/nonexistent", **env})  # no scontrol here
    check_run(args, result.exit_code, result.stdout, result.stderr, result.exception)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def nodes(scratch: Path) -> Path:
    from tests import fleet_files

    directory = scratch / "nodes"
    fleet_files.write(directory, "a.json", fleet_files.check("hostile-strings", "gpu-node\x1b[2J01"))
    fleet_files.write(directory, "b.json", fleet_files.check("h100x8-healthy", "gpu02"))
    fleet_files.write(directory, "c.json", b'{"schema": "gpudiag.check/1", "verdict": \x1b')
    return directory


REPLAYS = st.sampled_from(["", "missing-example", *EXAMPLES])

# The strategies need the module's scratch directory and node files: each test builds its @given inside.


def test_any_command_line_on_the_hostile_machine(scratch: Path, nodes: Path) -> None:
    @FUZZ
    @given(argvs(scratch, nodes), environments(REPLAYS))
    def run(args: list[str], env: dict[str, str]) -> None:
        _run(["--replay", "hostile-strings", *args], env)

    run()


def test_any_command_line_with_the_environment_choosing_the_machine(scratch: Path, nodes: Path) -> None:
    """No --replay: GPUDIAG_REPLAY names an example, a mutated file, junk, or nothing (this machine)."""

    @FUZZ
    @given(argvs(scratch, nodes), environments(REPLAYS | mutated_replays(scratch)))
    def run(args: list[str], env: dict[str, str]) -> None:
        if "bench-transfer" in args and not env.get("GPUDIAG_REPLAY"):
            args = ["--replay", "v100x4-tutorial", *args]  # never measure this machine
        _run(args, env)

    run()


def test_every_command_on_a_mutated_replay_file(scratch: Path) -> None:
    readers = [["list"], ["list", "--json"], ["list", "-q"], ["memory"], ["memory", "--json"], ["visible"]]
    readers += [["check", "--quick", "--no-torch"], ["snapshot"], ["list", "--query", "index,name,serial"]]

    @FUZZ
    @given(mutated_replays(scratch), st.sampled_from(readers))
    def run(replay: str, args: list[str]) -> None:
        _run(["--color", "never", "--replay", replay, *args], {})

    run()


@pytest.mark.slow
def test_real_processes_with_bytes_argv_and_narrow_encodings() -> None:
    """Through the entry point, as a shell runs it: argv with bytes that are not UTF-8, and output
    encodings that cannot write every character (PYTHONIOENCODING=ascii or latin-1; the C locale)."""

    @settings(FUZZ, max_examples=max(2, FUZZ.max_examples // 4))
    @given(
        st.sampled_from([["list"], ["memory"], ["check", "--quick", "--no-torch"], ["list", "-q"], ["visible"]]),
        st.sampled_from(["hostile-strings", "a100-mig", "v100x4-tutorial"]),
        st.sampled_from([b"--id", b"--bogus", b"-q"]),
        st.binary(max_size=8).filter(lambda b: b"\x00" not in b),
        st.sampled_from([{}, {"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"}, {"LC_ALL": "C"}]),
    )
    def run(args: list[str], machine: str, option: bytes, value: bytes, env: dict[str, str]) -> None:
        argv = [sys.executable.encode(), b"-m", b"gpudiag", b"--replay", machine.encode(), *map(str.encode, args)]
        argv += [option, value] if option != b"-q" else []
        result = subprocess.run(
            argv,
            env={**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "GPUDIAG_REPLAY": "", **env},
            capture_output=True,
            timeout=120,
        )
        out, err = (_decode(stream, env.get("PYTHONIOENCODING", "utf-8")) for stream in (result.stdout, result.stderr))
        check_run([a.decode("utf-8", "surrogateescape") for a in argv[3:]], result.returncode, out, err)

    run()


def _decode(output: bytes, encoding: str) -> str:
    """What a process wrote, as text: UTF-8 when it is (click writes UTF-8 to a stream it finds
    declared ASCII), else the stream's own encoding (Latin-1 bytes)."""
    try:
        return output.decode("utf-8")
    except UnicodeDecodeError:
        return output.decode(encoding, "surrogateescape")


# --- what the fuzzer found, kept as plain cases ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("schema-object.json", b'{"schema": {"a": 1}}', ExitCode.REPORT_UNREADABLE),  # was exit 70
        ("schema-list.json", b'{"schema": ["gpudiag.check/1"]}', ExitCode.REPORT_UNREADABLE),
        ("node\x1b]52;c;eA==\x07 \n.json", b"", ExitCode.REPORT_UNREADABLE),  # hostlist cannot hold the name
    ],
)
def test_report_on_node_files_the_fuzzer_found(tmp_path: Path, name: str, content: bytes, expected: int) -> None:
    (tmp_path / name).write_bytes(content)
    for args in (["report", str(tmp_path)], ["report", "--json", str(tmp_path)], ["drain", str(tmp_path)]):
        from typer.testing import CliRunner

        from gpudiag.cli.app import app

        result = CliRunner().invoke(app, args, env={"PATH": "/nonexistent"})
        check_run(args, result.exit_code, result.stdout, result.stderr, result.exception)
        if args[0] == "report":
            assert result.exit_code == expected, result.stderr


def test_a_replay_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    path = tmp_path / "latin1.json"
    path.write_bytes(b"\xff\xfe{}")
    result = CliRunner().invoke(app, ["--replay", str(path), "list"])
    assert result.exit_code == ExitCode.USAGE and len(result.stderr.splitlines()) == 1, result.stderr
