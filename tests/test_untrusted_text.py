"""Text from outside gpudiag never reaches a terminal as a control (issue 23).

Process command lines and users, GPU and board names, host and node names, replay and node files
and environment values may carry escape sequences (OSC 52 writes the clipboard, CSI 2J clears the
screen), bidi overrides and newlines. Human output shows them as Python escapes (``\\x1b``,
``\\u202e``, ``\\n``), CSV quotes as RFC 4180 says where needed, JSON keeps the exact text in its own
escapes. Every command runs here on ``hostile-strings``, an example machine full of such text, and
a real process with such a command line is read through the live host layer (psutil).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gpudiag.cli.app import COMMANDS
from gpudiag.cli.common import make_console
from gpudiag.exitcodes import ExitCode
from gpudiag.render import list_view, memory_view
from gpudiag.render.printable import (
    csv_field,
    guard,
    json_document,
    printable,
    spreadsheet_text,
    strip_trailing_blanks,
)
from gpudiag.replay import fixtures
from gpudiag.sources import collect
from tests.conftest import Cli, SkippingClock

HOSTILE = "hostile-strings"
OSC52 = "\x1b]52;c;cm0gLXJmIH4vCg==\x07"
# What rich itself writes with --color always: colours, and a live view's cursor moves. The hostile
# machine's sequences (OSC 52, OSC 0, CSI 2J/H, 8-bit CSI) are none of these; with --color never
# nothing at all is allowed.
RICH_CONTROLS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[[0-9]*[AK]|\r")
DOCUMENTED = {int(code) for code in ExitCode}


def raw_controls(text: str, layout: str = "\n") -> list[str]:
    """Characters a terminal would act on, or that hide or reorder text: none may be printed (but the
    ``layout`` gpudiag writes itself: line breaks, and the tabs of nvidia-smi's `topo` and `nvlink`)."""
    return sorted({c for c in text if not c.isprintable() and c not in layout})


# Commands laid out with tabs, as nvidia-smi's: their outside text is escaped, tabs in it too.
TABBED = ("topo", "nvlink")


# --- the rule itself -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("python train.py", "python train.py"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        (OSC52, "\\x1b]52;c;cm0gLXJmIH4vCg==\\x07"),
        ("two\nlines\r\ttab", "two\\nlines\\r\\ttab"),
        ("\x9b31m\x7f", "\\x9b31m\\x7f"),  # 8-bit CSI, DEL
        ("\u202egnp.exe\u2066\u200b\u00ad\ufeff", "\\u202egnp.exe\\u2066\\u200b\\xad\\ufeff"),  # bidi, invisible
        ("\udcff", "\\udcff"),  # a byte psutil could not decode (surrogateescape)
        ("\U000e0041", "\\U000e0041"),  # a tag character
        ("é 中 …", "é 中 …"),  # printable non-ASCII stays as it is
        ("C:\\path", "C:\\path"),  # a backslash is not escaped: --json has the exact text
    ],
)
def test_printable_writes_what_a_terminal_would_act_on_as_its_escape(text: str, shown: str) -> None:
    assert printable(text) == shown


@given(st.text())
def test_printable_output_is_always_printable_and_idempotent(text: str) -> None:
    shown = printable(text)
    assert shown.isprintable()
    assert printable(shown) == shown
    if text.isprintable():
        assert shown is text  # the ordinary case costs one C-level check


@given(st.text())
def test_guard_keeps_line_breaks_and_escapes_every_other_control(text: str) -> None:
    kept = guard(text)
    assert raw_controls(kept) == []
    assert kept.count("\n") == text.count("\n")


@given(st.lists(st.text(), min_size=1, max_size=6))
def test_csv_fields_read_back_with_the_csv_module(values: list[str]) -> None:
    assume(values != [""])  # a record of one empty field is a blank line in any CSV
    line = ", ".join(csv_field(v) for v in values)
    assert "\n" not in line and raw_controls(line) == []
    assert next(csv.reader(io.StringIO(line), skipinitialspace=True)) == [printable(v) for v in values]


def test_csv_quotes_only_where_a_value_needs_it() -> None:
    assert [csv_field(v) for v in ("NVIDIA H100 80GB HBM3", "345 MHz", "[N/A]")] == [
        "NVIDIA H100 80GB HBM3",
        "345 MHz",
        "[N/A]",
    ]
    assert [csv_field(v) for v in ('say "hi"', "a,b", " lead")] == ['"say ""hi"""', '"a,b"', '" lead"']


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c, max_size=3)))
def test_msgspec_json_becomes_printable_json_meaning_the_same(value: Any) -> None:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(value, ensure_ascii=False)):
        return  # msgspec cannot encode lone surrogates at all
    document = msgspec.json.format(msgspec.json.encode({"v": value}), indent=2).decode()
    safe = json_document(document)
    assert raw_controls(safe) == [] and safe.isascii()
    assert json.loads(safe) == {"v": value}


def test_json_dumps_keeps_the_exact_text_in_json_escapes() -> None:
    text = f"x{OSC52}\u202e\n\udcff"
    document = json.dumps({"command": text})
    assert raw_controls(document) == [] and json.loads(document)["command"] == text


def test_no_json_writer_turns_off_json_escapes() -> None:
    """Every JSON document but report's comes from json.dumps with ensure_ascii on: ASCII only."""
    package = Path(__file__).resolve().parent.parent / "gpudiag"
    assert [p.name for p in package.rglob("*.py") if "ensure_ascii" in p.read_text()] == []


@pytest.mark.parametrize("label", ["eve" + OSC52 + "\u202e", "caf\udce9 two\nlines", 'a "quoted" \\ value\udcff'])
def test_exposition_escapes_outside_text_as_prometheus_reads_it_back(label: str) -> None:
    """Label values and HELP in the exposition: printable UTF-8 whatever the text (a lone surrogate
    too: it made the old renderer raise UnicodeEncodeError), read back by Prometheus' parser as the
    text printable() shows."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpudiag.export.exposition import RowMetric, TextRenderer

    family = RowMetric("m", "help " + label, "gauge", ["user"])
    family.add_row((label,), 1.0)
    text = TextRenderer().render([family]).decode("utf-8")
    assert raw_controls(text) == []
    (read,) = text_string_to_metric_families(text)
    assert read.samples[0].labels["user"] == printable(label)
    assert read.documentation == "help " + printable(label)


def test_trailing_blanks_go_only_at_line_ends_and_colour_codes_stay() -> None:
    assert strip_trailing_blanks("a   \nb c  \n  tail  ") == "a\nb c\n  tail  "
    styled = "GPU \x1b[1m  \x1b[0m\nx"
    assert strip_trailing_blanks(styled) == "GPU\x1b[1m\x1b[0m\nx"


# --- every command on the hostile machine ----------------------------------------------------


def _node_files(directory: Path, cli: Cli) -> Path:
    """Node files as a fleet would send them, from the hostile machine, with hostile node names."""
    directory.mkdir()
    _, check, _ = cli.replay(HOSTILE, "check", "--json", "--no-torch", "--quick")
    (directory / "hostile.json").write_text(check)
    _, memory, _ = cli.replay(HOSTILE, "memory", "--json")
    (directory / "memory.json").write_text(memory)
    _, healthy, _ = cli.replay("h100x8-healthy", "check", "--json", "--no-torch", "--quick")
    data = json.loads(healthy)
    data["slurm_node"] = "gpu\nfake-node READY"
    (directory / "b.json").write_text(json.dumps(data))
    del data["slurm_node"], data["host"]  # no name inside: the file's name is the node's
    (directory / f"node{OSC52}\u202e7.json").write_text(json.dumps(data))
    return directory


def walk(nodes: Path) -> list[list[str]]:
    """Every command, each of its outputs, on the hostile machine (report and drain on its node files)."""
    return [
        ["list"],
        ["list", "--no-processes"],
        ["list", "--json"],
        ["list", "--details"],
        ["list", "--query", "index,name,serial,vbios_version,uuid,pci.bus_id,memory.used", "--format", "csv"],
        ["list", "--query-compute-apps", "pid,process_name,gpu_name,used_memory", "--format", "csv"],
        ["list", "--watch", "--count", "2", "--interval", "0.1"],
        ["list", "--watch", "--count", "2", "--interval", "0.1", "--query", "name", "--format", "csv"],
        ["memory"],
        ["memory", "--json"],
        ["memory", "--watch", "--count", "2", "--interval", "0.1"],
        ["memory", "--watch", "--count", "2", "--interval", "0.1", "--json"],
        ["visible"],
        ["visible", "--json"],
        ["visible", "--value", "GPU-\x1b[2J,0"],
        ["visible", "--select", "0"],
        ["visible", "--select", "0", "--json"],
        ["check", "--quick", "--no-torch"],
        ["check", "--quick", "--no-torch", "--json"],
        ["check", "--quick", "--no-torch", "--npd"],
        ["check", "--mode", "health-check"],
        ["check", "--quick", "--no-torch", "--require-gpu", "H100\x1b[2J"],
        ["snapshot"],
        ["examples"],
        ["exporter", "--once"],
        ["bench-transfer"],  # the live machine only: a usage error on a replay
        ["report", str(nodes)],
        ["report", "--json", str(nodes)],
        ["report", "--brief", str(nodes)],
        ["drain", str(nodes)],
        ["dmon", "--count", "2", "--delay", "0.1"],
        ["dmon", "--count", "1", "--json"],
        ["pmon", "--count", "2", "--delay", "0.1", "-s", "um"],
        ["pmon", "--count", "1", "--json", "--format", "csv"],
        ["pmon", "--count", "1", "--format", "csv"],
        ["topo"],
        ["topo", "-p2p", "r"],
        ["topo", "--json"],
        ["nvlink"],
        ["nvlink", "-e"],
        ["nvlink", "--json"],
        ["mig"],
        ["mig", "--json"],
        ["stat", "-c", "-p"],
        ["stat", "--json"],
        ["stat", "--watch", "--count", "2", "--interval", "0.1"],
        ["top"],  # not a terminal here: its one line (the screen itself: tests/test_top.py, escaped text)
    ]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _node_files(tmp_path_factory.mktemp("fleet") / "nodes", Cli())


def test_the_walk_covers_every_command(nodes: Path) -> None:
    walked = {args[0] for args in walk(nodes)}
    assert walked == set(COMMANDS), set(COMMANDS) - walked


def _cases() -> Iterator[tuple[str, int]]:
    for position, args in enumerate(walk(Path("NODES"))):
        yield " ".join(args), position


# In colour, the quick loop runs the commands whose tables and panels rich colours most; the full
# suite runs every command in colour too.
QUICK_IN_COLOUR = ("list", "list --details", "memory", "check --quick --no-torch", "topo", "report --brief NODES")


def _colours() -> list[Any]:
    return [
        pytest.param(
            color,
            position,
            id=f"{color}-{name}",
            marks=pytest.mark.slow if color == "always" and name not in QUICK_IN_COLOUR else (),
        )
        for color in ("never", "always")
        for name, position in _cases()
    ]


@pytest.mark.parametrize(("color", "position"), _colours())
def test_no_command_prints_a_raw_control_from_outside_text(
    cli: Cli, nodes: Path, position: int, color: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # drain asks no real scontrol
    from gpudiag.cli import list_watch, monitor_loop, stat_watch

    for module in (list_watch, monitor_loop, stat_watch):  # the output is this test's business, not the waits
        monkeypatch.setattr(module, "time", SkippingClock())
    args = walk(nodes)[position]
    from gpudiag.cli.app import app

    result = cli.runner.invoke(app, ["--color", color, "--replay", HOSTILE, *args], env={"COLUMNS": "120"})
    out, err = result.stdout, result.stderr
    assert "Traceback" not in out + err
    assert result.exit_code in DOCUMENTED and result.exit_code != ExitCode.INTERNAL, (result.exit_code, err)
    layout = "\n\t" if args[0] in TABBED and "--json" not in args else "\n"
    assert raw_controls(RICH_CONTROLS.sub("", out) if color == "always" else out, layout) == [], args
    assert raw_controls(err) == [], args
    if "--json" in args and result.exit_code != ExitCode.USAGE:
        for line in out.splitlines() if "--watch" in args or args[0] in ("dmon", "pmon") else [out]:
            json.loads(line)
    if color == "never":
        assert [line for line in out.splitlines() if line.endswith(" ")] == []  # into a pipe: no padding


def test_list_and_memory_keep_a_command_with_a_newline_on_its_row(cli: Cli) -> None:
    for command in ("list", "memory"):
        _, out, _ = cli.replay(HOSTILE, command, width=200)
        (row,) = [line for line in out.splitlines() if "bash -c 'sleep 1'" in line]
        assert "4343" in row and "\\n  0   4344   C   root   99999MiB   fake row" in row
        assert "\\x1b]52;c;cm0gLXJmIH4vCg==" in out and "\\u202e" in out and "root\\u202etoor" in out
        assert not any(line.lstrip().startswith("0   4344") for line in out.splitlines())


def test_csv_carries_hostile_names_as_single_records(cli: Cli) -> None:
    _, out, _ = cli.replay(HOSTILE, "list", "--query-compute-apps", "pid,process_name,gpu_name", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    machine = fixtures.load(HOSTILE)[0]
    expected = [
        [str(p.pid), spreadsheet_text(p.host.name.get("")), spreadsheet_text(g.name.get(""))]
        for g in machine.gpus
        for p in g.processes.get(())
    ]
    assert rows[1:] == expected and len(out.splitlines()) == len(expected) + 1


def test_json_keeps_the_exact_text(cli: Cli) -> None:
    machine = fixtures.load(HOSTILE)[0]
    commands = {p.pid: p.host.command.value for g in machine.gpus for p in g.processes.get(())}
    _, out, _ = cli.replay(HOSTILE, "list", "--json")
    data = json.loads(out)
    read = {
        p["pid"]: p["host"]["command"] for g in data["gpus"] if isinstance(g["processes"], list) for p in g["processes"]
    }
    assert read == commands
    _, out, _ = cli.replay(HOSTILE, "memory", "--json")
    assert {p["pid"]: p["command"] for p in json.loads(out)["processes"]} == commands
    assert json.loads(out)["host"] == machine.host.hostname


def test_report_json_names_each_hostile_node_name_in_its_files_problem(cli: Cli, nodes: Path) -> None:
    code, out, err = cli("report", "--json", str(nodes))
    assert code in (ExitCode.FAILED, ExitCode.REPORT_UNREADABLE), err
    # A name that is not one node name makes its file unreadable (the node is its file's name):
    # the name itself is kept exactly, in the file's problem.
    problems = "".join(p for node in json.loads(out)["nodes"] for p in node["problems"])
    for name in ("gpu\nfake-node READY", f"node{OSC52}\u202e7", fixtures.load(HOSTILE)[0].host.hostname):
        assert repr(name) in problems


def test_report_json_is_ascii_as_every_other_json_document(cli: Cli, nodes: Path) -> None:
    """Its rule text's "±" and "×" were UTF-8 bytes, which a Latin-1 terminal shows with C1 controls."""
    _, out, _ = cli("report", "--json", str(nodes))
    assert out.isascii() and "\\u00b1" in out
    assert "\u00b1" in json.loads(out)["outliers"]["rule"]


def test_texts_no_replay_can_carry_are_escaped_by_the_renderers_too() -> None:
    """A lost GPU's detail, a container hint and NVML's own message come from the live probe: the
    renderers escape them as they escape everything else."""
    machine = collect(HOSTILE)
    lost = msgspec.structs.replace(machine.gpus[2], state_detail=f"XID 79{OSC52}\nfake: fine")
    host = msgspec.structs.replace(machine.host, container_hint=f"kubepods{OSC52}")
    machine = msgspec.structs.replace(machine, gpus=(*machine.gpus[:2], lost), host=host)
    out = io.StringIO()
    console = make_console(file=out)
    console.width = 120
    console.print(list_view.render(machine, machine.gpus, console, show_processes=True))
    from gpudiag.memory.build import build

    console.print(memory_view.render(build(machine, {}, None)))
    text = out.getvalue()
    assert raw_controls(text) == [] and "XID 79\\x1b]52;c;" in text and "\\nfake: fine" in text


def test_a_one_line_message_stays_one_line(cli: Cli) -> None:
    code, out, err = cli.replay(HOSTILE, "list", "--id", "GPU-\x1b[2J\nfake")
    assert code == ExitCode.USAGE and out == ""
    assert len(err.splitlines()) == 1 and raw_controls(err) == []


# --- a real process, read through the live host layer ----------------------------------------

HOSTILE_ARGV = [OSC52, "\x1b[2J\x1b[H", "\u202egnp.exe", "two\nlines", os.fsdecode(b"\xff\xfe")]


@pytest.fixture
def hostile_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process whose command line carries escape sequences, a bidi override, a newline and
    bytes that are not UTF-8."""
    # argv[0] is a short fixed name: where the checkout lies must not move the hostile text past a
    # view's column cut.
    argv = ["python", "-c", "import time; time.sleep(60)", *HOSTILE_ARGV]
    process = subprocess.Popen(argv, executable=sys.executable)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until /proc shows the new command line, not the fork's
            if Path(f"/proc/{process.pid}/cmdline").read_bytes().count(b"\0") > len(HOSTILE_ARGV):
                break
            time.sleep(0.01)
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_the_host_layer_reads_the_command_line_as_it_is(hostile_process: subprocess.Popen[bytes]) -> None:
    from gpudiag.probe.host import PsutilHost

    host = PsutilHost(in_container=False)(hostile_process.pid)
    command = host.command.value
    assert command is not None and all(arg in command for arg in HOSTILE_ARGV)


@pytest.mark.slow
def test_a_live_process_with_a_hostile_command_line_prints_escaped(
    cli: Cli, hostile_process: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replayed v100x4 machine with its process's PID replaced by the real one, and the replay's
    recorded owners replaced by the live host layer (psutil) that a live run uses."""
    from gpudiag.probe.host import PsutilHost
    from gpudiag.replay import fake_host

    monkeypatch.setattr(fake_host, "RecordedHost", lambda machine: PsutilHost(in_container=False))
    text = Path(fixtures.EXAMPLES_DIR, "v100x4-tutorial.json").read_text().replace("31337", str(hostile_process.pid))
    replay = tmp_path / "live.json"
    replay.write_text(text)
    escaped = [printable(arg) for arg in HOSTILE_ARGV]
    for args in (["list"], ["memory"], ["list", "--query-compute-apps", "pid,process_name", "--format", "csv"]):
        code, out, err = cli.replay(str(replay), *args, width=400)
        assert code == ExitCode.OK, err
        assert raw_controls(out + err) == [], args
        if args[0] in ("list", "memory") and len(args) == 1:
            rows = [line for line in out.splitlines() if re.match(rf"\s+\d\s+{hostile_process.pid}\s", line)]
            shown = escaped if args[0] == "list" else ["\\x1b]52"]  # memory cuts a command at 72 cells
            assert len(rows) == 4 and all(all(e in row for e in shown) for row in rows), rows
    code, out, _ = cli.replay(str(replay), "memory", "--json")
    commands = {p["command"] for p in json.loads(out)["processes"]}
    (command,) = commands
    assert all(arg in command for arg in HOSTILE_ARGV)
    # A snapshot of it replays: the undecodable bytes are JSON's \udcff escapes, which msgspec refuses.
    code, snapshot, _ = cli.replay(str(replay), "snapshot")
    again = tmp_path / "again.json"
    again.write_text(snapshot)
    monkeypatch.undo()
    code, out, err = cli.replay(str(again), "list", width=400)
    assert code == ExitCode.OK, err
    assert all(e in out for e in escaped) and raw_controls(out) == []
