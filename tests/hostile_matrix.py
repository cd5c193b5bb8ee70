"""The hostile matrix: every read-only command x every example machine x hostile environments.

Counts, per command and per environment, what must never happen: a traceback, an internal error
(exit 70), an exit code outside gpudiag/exitcodes.py, a raw control character (C0/C1, DEL, bidi
override, a byte that is not UTF-8 or another non-printable character) on stdout, stderr or in a
file the command writes (``memory --textfile``), ``--json`` or XML output that does not parse, a CSV
cell a spreadsheet would run as a formula (one that starts with ``=``, ``+``, ``-``, ``@``, a tab or
a CR and is not a number), and padding at the end of a line of output into a pipe. docs/hostile-matrix.md
holds the latest full run, written by this script::

    python -m tests.hostile_matrix                          # the full matrix; exit 1 on any problem
    python -m tests.hostile_matrix --write docs/hostile-matrix.md
    python -m tests.hostile_matrix --machines hostile-strings,a100-mig --commands list,memory

Runs go in-process, where a process would run the line: the plain front, else Typer (on
CliRunner's streams). A non-UTF-8 locale is an output stream whose
encoding cannot write every character (the runner's charset), as under ``LANG=en_US.ISO-8859-1``
or ``PYTHONIOENCODING=ascii``; ``--processes`` runs each command as a real process instead
(minutes more), with those variables set for real.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from gpudiag.exitcodes import ExitCode

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTED = {int(code) for code in ExitCode}
IN_PROCESS = "in-process (the plain front or Typer, as a process would run the line)"
HEADER = "<!-- written by `python -m tests.hostile_matrix --write docs/hostile-matrix.md`; do not edit -->"

Args = Callable[[str, Path, "Environment"], list[str]]  # (machine, its work dir, env) -> argv after --replay NAME


@dataclass(frozen=True)
class Command:
    label: str
    args: Args
    kind: str = ""  # "csv", "xml": what the output must be (JSON: "--json" in the label)
    output: str = ""  # a file the command writes in the machine's work dir, judged as its output too
    layout: str = "\n"  # the characters the output lays itself out with (XML's tabs)

    @property
    def json(self) -> bool:
        return "--json" in self.label


COMMANDS = [
    Command("list", lambda m, d, e: ["list"]),
    Command("list --json", lambda m, d, e: ["list", "--json"]),
    Command("list -q", lambda m, d, e: ["list", "-q"]),
    Command("list -q -x", lambda m, d, e: ["list", "-q", "-x"], kind="xml", layout="\n\t"),
    Command(
        "list --query",
        lambda m, d, e: [
            "list",
            "--query",
            "index,name,serial,vbios_version,uuid,memory.used,power.draw",
            "--format",
            "csv",
        ],
        kind="csv",
    ),
    Command(
        "list --query-compute-apps",
        lambda m, d, e: ["list", "--query-compute-apps", "pid,process_name,gpu_name,used_memory", "--format", "csv"],
        kind="csv",
    ),
    Command("pmon --format csv", lambda m, d, e: ["pmon", "--count", "1", "--format", "csv"], kind="csv"),
    Command("dmon --format csv", lambda m, d, e: ["dmon", "--count", "1", "--format", "csv"], kind="csv"),
    Command("stat --json", lambda m, d, e: ["stat", "--json"]),
    Command("topo --json", lambda m, d, e: ["topo", "--json"]),
    Command("nvlink --json", lambda m, d, e: ["nvlink", "--json"]),
    Command("mig --json", lambda m, d, e: ["mig", "--json"]),
    Command("memory", lambda m, d, e: ["memory"]),
    Command("memory --json", lambda m, d, e: ["memory", "--json"]),
    Command(
        "memory --textfile",
        lambda m, d, e: ["memory", "--textfile", str(d / "textfile")],
        output="textfile/gpudiag_memory.prom",
    ),
    Command("exporter --once", lambda m, d, e: ["exporter", "--once"]),
    Command("exporter --once --compat dcgm", lambda m, d, e: ["exporter", "--once", "--compat", "dcgm"]),
    Command("visible", lambda m, d, e: ["visible"]),
    Command("visible --json", lambda m, d, e: ["visible", "--json"]),
    # A replay reads its recorded environment: the environment's CUDA_VISIBLE_DEVICES reaches `visible` here.
    Command("visible --value", lambda m, d, e: ["visible", "--value", e.env.get("CUDA_VISIBLE_DEVICES", "1,0")]),
    Command("check --quick --no-torch", lambda m, d, e: ["check", "--quick", "--no-torch"]),
    Command("check --json", lambda m, d, e: ["check", "--quick", "--no-torch", "--json"]),
    Command("snapshot -o", lambda m, d, e: ["snapshot", "-o", str(d / "snapshot.json")]),
    Command("report", lambda m, d, e: ["report", str(d / "nodes")]),
    Command("report --json", lambda m, d, e: ["report", "--json", str(d / "nodes")]),
]


@dataclass(frozen=True)
class Environment:
    label: str
    env: dict[str, str]
    charset: str = "utf-8"  # the encoding of the output streams


ENVIRONMENTS = [
    Environment("COLUMNS=120", {"COLUMNS": "120"}),
    Environment("COLUMNS=0", {"COLUMNS": "0"}),
    Environment("COLUMNS=1", {"COLUMNS": "1"}),
    Environment("COLUMNS=39", {"COLUMNS": "39"}),
    Environment("COLUMNS=99999999", {"COLUMNS": "99999999"}),
    Environment("COLUMNS=²", {"COLUMNS": "²"}),
    Environment("LINES=0 COLUMNS=abc", {"LINES": "0", "COLUMNS": "abc"}),
    Environment("TERM=dumb", {"TERM": "dumb"}),
    Environment("NO_COLOR=1", {"NO_COLOR": "1"}),
    Environment("CUDA_VISIBLE_DEVICES=0,ESC[2J1", {"CUDA_VISIBLE_DEVICES": "0,\x1b[2J1"}),
    Environment("CUDA_VISIBLE_DEVICES=GPU-RLO", {"CUDA_VISIBLE_DEVICES": "GPU-\u202e,-1", "CUDA_DEVICE_ORDER": "x\n"}),
    Environment("LANG=en_US.ISO-8859-1", {"LANG": "en_US.ISO-8859-1", "LC_ALL": "en_US.ISO-8859-1"}, "latin-1"),
    Environment("PYTHONIOENCODING=ascii", {"PYTHONIOENCODING": "ascii"}, "ascii"),
]

PROBLEMS = (
    "traceback",
    "exit 70",
    "undocumented exit",
    "raw control",
    "bad JSON",
    "bad XML",
    "formula cell",
    "trailing blanks",
    "timeout",
)
FORMULA_STARTS = frozenset("=+-@\t\r")


@dataclass
class Tally:
    runs: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)  # the first few problems, to reproduce


def judge(command: Command, code: int | None, out: str, err: str) -> list[str]:
    """The problems of one run (none, normally)."""
    if code is None:
        return ["timeout"]
    found = []
    if "Traceback" in out + err:
        found.append("traceback")
    if code == ExitCode.INTERNAL:
        found.append("exit 70")
    elif code not in DOCUMENTED:
        found.append("undocumented exit")
    if any(not c.isprintable() and c not in command.layout for c in out) or any(
        not c.isprintable() and c != "\n" for c in err
    ):
        found.append("raw control")
    if command.json and out.strip():
        try:
            json.loads(out)
        except ValueError:
            found.append("bad JSON")
    if command.kind == "xml" and out.strip():
        try:
            ElementTree.fromstring(out)
        except ElementTree.ParseError:
            found.append("bad XML")
    if command.kind == "csv" and formula_cells(out):
        found.append("formula cell")
    if any(line.endswith(" ") for line in out.splitlines()):
        found.append("trailing blanks")
    return found


def formula_cells(text: str) -> list[str]:
    """The cells of a CSV output a spreadsheet would run as a formula: those that start (after blanks)
    with =, +, -, @, a tab or a CR and are not numbers (``-5``, ``-5 W``) nor dmon's and pmon's ``-``."""
    found = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        for cell in row:
            if cell.lstrip(" ")[:1] in FORMULA_STARTS and cell != "-" and not _number(cell.split(" ")[0]):
                found.append(cell)
    return found


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def prepare(machine: str, work: Path) -> Path:
    """The machine's work directory, with the node files a fleet would send for it."""
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    directory = work / machine
    nodes = directory / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (directory / "textfile").mkdir(exist_ok=True)
    for name, args in (
        ("check.json", ["check", "--quick", "--no-torch", "--json"]),
        ("memory.json", ["memory", "--json"]),
        ("snapshot.json", ["snapshot"]),
    ):
        result = CliRunner().invoke(app, ["--replay", machine, *args])
        (nodes / name).write_text(result.stdout)
    return directory


def run_in_process(argv: list[str], environment: Environment) -> tuple[int | None, str, str]:
    """The command as a user's process runs it, without a process: a line the plain front takes
    (:mod:`gpudiag.cli.plain_front`, as :mod:`gpudiag.entry` asks it first) runs there, any other
    through Typer."""
    from typer.testing import CliRunner

    from gpudiag import argv as command_line
    from gpudiag.cli import plain_front
    from gpudiag.cli.app import app

    unset: dict[str, str | None] = dict.fromkeys(("COLUMNS", "LINES", "NO_COLOR", "GPUDIAG_REPLAY", "GPUDIAG_DEBUG"))
    runner = CliRunner(charset=environment.charset)
    decode = environment.charset
    with runner.isolation(env={**unset, **environment.env}) as (out, err, _):
        found = plain_front.read(command_line.read(argv), os.environ)
        if found is not None:
            escaped = ""
            try:
                code = plain_front.run(found)
            except BaseException as exc:  # whatever escapes is the finding
                code, escaped = 1, f"\nTraceback (escaped the command): {exc!r}"
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue().decode(decode, "replace"), err.getvalue().decode(decode, "replace") + escaped
    result = runner.invoke(app, argv, env={**unset, **environment.env})
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += f"\nTraceback (escaped the command): {result.exception!r}"
    return result.exit_code, result.stdout, stderr


def run_process(argv: list[str], environment: Environment) -> tuple[int | None, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "GPUDIAG_REPLAY")}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gpudiag", *argv],
            env={**env, **environment.env},
            capture_output=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return None, "", ""
    decode = environment.charset
    return result.returncode, result.stdout.decode(decode, "replace"), result.stderr.decode(decode, "replace")


def run(
    machines: Sequence[str],
    commands: Sequence[Command] = COMMANDS,
    environments: Sequence[Environment] = ENVIRONMENTS,
    processes: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[tuple[str, str], Tally]:
    """Every command x machine x environment; tallies keyed by (command, environment)."""
    tallies = {(c.label, e.label): Tally() for c in commands for e in environments}
    runner = run_process if processes else run_in_process
    with tempfile.TemporaryDirectory(prefix="gpudiag-matrix-") as tmp:
        for machine in machines:
            work = prepare(machine, Path(tmp))
            if progress:
                progress(machine)
            for command in commands:
                for environment in environments:
                    argv = ["--replay", machine, *command.args(machine, work, environment)]
                    written = work / command.output if command.output else None
                    if written is not None:
                        written.unlink(missing_ok=True)  # judged: this run's file, never an earlier run's
                    code, out, err = runner(argv, environment)
                    if written is not None and written.exists():  # a byte that is not UTF-8 is a raw control
                        out += written.read_bytes().decode("utf-8", "surrogateescape")
                    tally = tallies[(command.label, environment.label)]
                    tally.runs += 1
                    tally.codes[code if code is not None else -1] += 1
                    for problem in judge(command, code, out, err):
                        tally.problems[problem] += 1
                        if len(tally.examples) < 3:
                            tally.examples.append(f"{environment.label} gpudiag {' '.join(argv)}: {problem}")
    return tallies


def total(tallies: dict[tuple[str, str], Tally]) -> tuple[int, Counter[str]]:
    runs, problems = 0, Counter[str]()
    for tally in tallies.values():
        runs += tally.runs
        problems.update(tally.problems)
    return runs, problems


def markdown(
    tallies: dict[tuple[str, str], Tally],
    machines: Sequence[str],
    commands: Sequence[Command],
    environments: Sequence[Environment],
    seconds: float,
    processes: bool,
) -> str:
    runs, problems = total(tallies)
    lines = [
        HEADER,
        "",
        "# The hostile matrix",
        "",
        "Every read-only command on every example machine (`gpudiag/machines/`, `hostile-strings` among them)",
        "under hostile environments, counting what must never happen: a traceback, an internal error",
        "(exit 70), an exit code outside the exit-code table, a raw control character (C0/C1, DEL, a bidi",
        "override, a byte that is not UTF-8 or another non-printable character) on stdout, on stderr or in",
        "the file `memory --textfile` writes, `--json` or XML output that does not parse, a CSV cell a",
        "spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a CR first, not a number), padding",
        "at the end of a line of output into a pipe, a run that hangs (120 s). A replay reads its recorded",
        "environment, so the environment's `CUDA_VISIBLE_DEVICES` reaches `visible --value`; the output",
        "encodings are the streams' (a Latin-1 locale, `PYTHONIOENCODING=ascii`).",
        "`tests/hostile_matrix.py` writes this page; `tests/test_hostile_matrix.py` runs a slice of it in CI.",
        "",
        f"Latest full run: {len(machines)} machines x {len(commands)} commands x {len(environments)} environments "
        f"= **{runs} runs**, {'real processes' if processes else IN_PROCESS}, "
        f"{seconds:.0f} s on {platform.machine()} ({os.cpu_count()} CPUs), Python {platform.python_version()}.",
        "",
        "| problem | runs |",
        "| --- | --- |",
        *[f"| {name} | {problems[name]} |" for name in PROBLEMS],
        "",
        "## By command",
        "",
        "| command | runs | problems | exit codes |",
        "| --- | --- | --- | --- |",
    ]
    for command in commands:
        group = [tallies[(command.label, e.label)] for e in environments]
        codes: Counter[int] = Counter()
        for tally in group:
            codes.update(tally.codes)
        shown = ", ".join(f"{code}: {n}" for code, n in sorted(codes.items()))
        found = sum(sum(t.problems.values()) for t in group)
        lines.append(f"| `{command.label}` | {sum(t.runs for t in group)} | {found} | {shown} |")
    lines += ["", "## By environment", "", "| environment | output encoding | runs | problems |"]
    lines.append("| --- | --- | --- | --- |")
    for environment in environments:
        group = [tallies[(c.label, environment.label)] for c in commands]
        found = sum(sum(t.problems.values()) for t in group)
        label = environment.label.replace("|", "\\|")
        lines.append(f"| `{label}` | {environment.charset} | {sum(t.runs for t in group)} | {found} |")
    examples = [e for t in tallies.values() for e in t.examples]
    if examples:
        lines += ["", "## First problems found", "", *[f"- `{e!r}`" for e in examples[:20]]]
    lines += ["", "Machines: " + ", ".join(f"`{m}`" for m in machines) + ".", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from gpudiag.replay.fixtures import example_names

    parser = argparse.ArgumentParser(prog="python -m tests.hostile_matrix")
    parser.add_argument("--machines", help="comma-separated example names (default: every one)")
    parser.add_argument("--commands", help="comma-separated command labels, by their first word(s)")
    parser.add_argument("--processes", action="store_true", help="run real processes, not in-process")
    parser.add_argument("--write", type=Path, help="write the markdown report here (docs/hostile-matrix.md)")
    options = parser.parse_args(argv)
    machines = options.machines.split(",") if options.machines else example_names()
    commands = COMMANDS
    if options.commands:
        wanted = options.commands.split(",")
        commands = [c for c in COMMANDS if any(c.label.split()[0] == w or c.label == w for w in wanted)]
    started = time.monotonic()
    tallies = run(machines, commands, ENVIRONMENTS, options.processes, lambda m: print(m, file=sys.stderr))
    seconds = time.monotonic() - started
    runs, problems = total(tallies)
    report = markdown(tallies, machines, commands, ENVIRONMENTS, seconds, options.processes)
    if options.write:
        options.write.write_text(report)
    print(f"{runs} runs, {sum(problems.values())} problems: {dict(problems) or 'none'} ({seconds:.0f} s)")
    for tally in tallies.values():
        for example in tally.examples:
            print(f"  {example!r}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
