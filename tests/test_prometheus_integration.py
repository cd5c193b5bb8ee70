"""The real parts: Prometheus scraping `gpudiag exporter` (both families, attribution from a fake
kubelet, gzip), node_exporter reading `--textfile` output, and `promtool check metrics`.

Two more exporters run inside the test process on replayed machines the tests change under them
(a GPU lost mid-run, a finding whose text changes), so that what Prometheus stores is checked
across the change, not only in one scrape.

Marked ``prometheus``; skipped when Debian's ``prometheus`` / ``prometheus-node-exporter``
binaries are absent (`.ci/run` installs them). Every daemon started here is stopped, also when a
test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.prometheus

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
MIG_3G = "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"
EXAMPLE_8 = "h100x8-training-64procs"
H100_GPU0 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b3000"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gpudiag(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpudiag", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def wait_http(url: str, proc: subprocess.Popen[Any], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args!r} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer in {seconds} s")
        time.sleep(0.1)


@dataclass
class Stack:
    prometheus: str  # base URL
    textfile_dir: Path
    exporters: dict[str, str]  # job -> the /metrics URL Prometheus scrapes
    live: dict[str, Any]  # job -> the MachineSource of an in-process exporter (its machine can change)

    def metadata(self, metric: str) -> list[dict[str, Any]]:
        """What Prometheus learnt of a metric from the scraped # TYPE and # HELP lines."""
        url = f"{self.prometheus}/api/v1/metadata?{urllib.parse.urlencode({'metric': metric})}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response)["data"].get(metric, []))

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus}/api/v1/query?query={urllib.parse.quote(promql)}"
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def label_values(self, label: str, metric: str) -> list[str]:
        url = f"{self.prometheus}/api/v1/label/{label}/values?{urllib.parse.urlencode({'match[]': metric})}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return sorted(json.load(response)["data"])

    def until(self, promql: str, count: int, seconds: float = 30) -> list[dict[str, Any]]:
        """Poll until the query returns ``count`` series (scrapes arrive every second)."""
        deadline = time.monotonic() + seconds
        while True:
            result = self.query(promql)
            if len(result) >= count or time.monotonic() > deadline:
                return result
            time.sleep(0.25)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    if not (PROMETHEUS and NODE_EXPORTER):
        pytest.skip("prometheus and prometheus-node-exporter are not installed (apt-get install them)")
    pytest.importorskip("grpc")
    from gpudiag.export.exporter import Exporter, Server
    from gpudiag.sources import open_source
    from tests.test_export_attribution import FakeKubelet

    procs: list[subprocess.Popen[Any]] = []
    servers: list[Any] = []
    sources: list[Any] = []
    kubelet = None
    with tempfile.TemporaryDirectory(prefix="gpx") as tmp:
        root = Path(tmp)
        try:
            sock = root / "kubelet.sock"
            kubelet = FakeKubelet(
                sock,
                [
                    ("vision", "resnet-7f9c", [("train", "nvidia.com/mig-3g.20gb", [MIG_3G])]),
                    ("ml", "llm-0", [("trainer", "nvidia.com/gpu", [H100_GPU0])]),
                ],
            )
            native, dcgm, node = free_port(), free_port(), free_port()
            textfiles = root / "textfile"
            textfiles.mkdir()
            for example, args in (("h100x8-training-64procs", ["memory"]), ("a100-ecc-errors", ["check", "--quick"])):
                subprocess.run(
                    gpudiag("--replay", example, *args, "--textfile", str(textfiles)), env=env(), check=False
                )
            common = ["exporter", "--kubelet-socket", str(sock), "--hostname", "gpu-node-7"]
            procs.append(subprocess.Popen(gpudiag("--replay", "a100-mig", *common, "--port", str(native)), env=env()))
            procs.append(
                subprocess.Popen(
                    gpudiag("--replay", "h100x8-training-64procs", *common, "--port", str(dcgm), "--compat", "dcgm"),
                    env=env(),
                )
            )
            procs.append(
                subprocess.Popen(
                    [
                        NODE_EXPORTER,
                        f"--web.listen-address=127.0.0.1:{node}",
                        "--collector.disable-defaults",
                        "--collector.textfile",
                        f"--collector.textfile.directory={textfiles}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            live: dict[str, Any] = {}
            for job, example, compat in (("live-native", "a100-ecc-errors", "native"),
                                         ("live-dcgm", EXAMPLE_8, "dcgm")):  # fmt: skip
                sources.append(open_source(example))
                live[job] = sources[-1]
                servers.append(Server(Exporter(sources[-1], compat=compat, hostname="gpu-node-8"), "127.0.0.1", 0))
            prom_port = free_port()
            jobs = {
                "gpudiag": native,
                "dcgm": dcgm,
                "node": node,
                **{j: srv.port for j, srv in zip(live, servers, strict=True)},
            }
            config = {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [
                    {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
                    for job, port in jobs.items()
                ],
            }
            (root / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
            procs.append(
                subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={root / 'prometheus.yml'}",
                        f"--storage.tsdb.path={root / 'data'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=root,
                )
            )
            for port, proc in zip((native, dcgm, node, prom_port), procs, strict=True):
                path = "/-/ready" if port == prom_port else "/metrics"
                wait_http(f"http://127.0.0.1:{port}{path}", proc)
            urls = {job: f"http://127.0.0.1:{port}/metrics" for job, port in jobs.items()}
            stack = Stack(f"http://127.0.0.1:{prom_port}", textfiles, urls, live)
            up = stack.until("up == 1", len(jobs))
            assert len(up) == len(jobs), up
            yield stack
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for server in servers:
                server.shutdown()
            for source in sources:
                source.close()
            if kubelet is not None:
                kubelet.stop()


def test_prometheus_scrapes_the_native_family_with_pod_attribution(stack: Stack) -> None:
    (sample,) = stack.until('gpudiag_process_gpu_memory_bytes{pid="20817"}', 1)
    labels = sample["metric"]
    assert (labels["pod"], labels["namespace"], labels["container"]) == ("resnet-7f9c", "vision", "train")
    assert labels["job"] == "gpudiag" and labels["gpu_instance"] == "1"
    assert float(sample["value"][1]) == 4294967296
    mig = stack.until('gpudiag_mig_memory_used_bytes{profile="3g.20gb"}', 1)
    assert len(mig) == 1
    assert stack.until('gpudiag_gpu_info{job="gpudiag"}', 1)[0]["metric"]["name"] == "NVIDIA A100-SXM4-40GB"
    assert stack.until('gpudiag_check_status{check="health.ecc"} == 0', 1)


DASHBOARD_12239 = json.loads((Path(__file__).parent / "data" / "dcgm_dashboard_12239.json").read_text())


def grafana_regex(values: list[str]) -> str:
    """A multi-value variable as Grafana writes it into a Prometheus query: each value with the regex's
    special characters escaped, several as an alternation."""
    import re

    escaped = [re.sub(r"([\\.^$*+?()\[\]{}|])", r"\\\\\1", v) for v in values]
    return escaped[0] if len(escaped) == 1 else f"({'|'.join(escaped)})"


def test_every_panel_of_the_dcgm_dashboard_fills_on_the_h100_node(stack: Stack) -> None:
    """Grafana dashboard 12239 (tests/data/dcgm_dashboard_12239.json: its panels' expressions and
    template variables as NVIDIA publishes them) against what Prometheus scraped from `--compat dcgm`
    on the 8x H100 example: its variables resolved as Grafana does (``$instance`` the subprocess
    exporter, ``$gpu`` "All"), every panel returns series, the Tensor Core one too (GPM, measured from
    the second scrape on)."""
    instance = urllib.parse.urlparse(stack.exporters["dcgm"]).netloc
    assert len(DASHBOARD_12239["panels"]) == 8
    (temperature,) = [v for v in DASHBOARD_12239["variables"] if v["name"] == "gpu"]
    assert temperature["query"] == "label_values(DCGM_FI_DEV_GPU_TEMP, gpu)"
    stack.until(f'DCGM_FI_DEV_GPU_TEMP{{instance="{instance}"}}', 8)
    gpus = stack.label_values("gpu", "DCGM_FI_DEV_GPU_TEMP")
    assert gpus == [str(i) for i in range(8)]
    variables = {"$instance": grafana_regex([instance]), "$gpu": grafana_regex(gpus)}
    filled = {}
    for panel in DASHBOARD_12239["panels"]:
        expr = panel["expr"]
        for name, value in variables.items():
            expr = expr.replace(name, value)
        want = 1 if expr.startswith(("avg(", "sum(")) else 8  # the gauges aggregate; the graphs: a line per GPU
        result = stack.until(expr, want)
        assert len(result) == want, (panel["title"], expr, result)
        filled[panel["title"]] = [float(r["value"][1]) for r in result]
    assert set(filled) == {p["title"] for p in DASHBOARD_12239["panels"]}
    assert all(0 < v <= 1 for v in filled["Tensor Core Utilization"])  # a ratio, as DCGM's
    assert sorted(filled["GPU SM Clocks"])[0] == 1.98e9


def test_prometheus_scrapes_the_dcgm_family_as_the_dashboard_queries_it(stack: Stack) -> None:
    # The dashboard's own queries and template variables (grafana/dcgm-exporter-dashboard.json), with
    # its $instance variable set to the subprocess exporter (the in-process ones are other instances).
    instance = urllib.parse.urlparse(stack.exporters["dcgm"]).netloc
    temps = stack.until(f'DCGM_FI_DEV_GPU_TEMP{{instance=~"{instance}", gpu=~".*"}}', 8)
    assert len(temps) == 8
    assert {t["metric"]["gpu"] for t in temps} == {str(i) for i in range(8)}
    (power,) = stack.until(f'sum(DCGM_FI_DEV_POWER_USAGE{{instance=~"{instance}", gpu=~".*"}})', 1)
    assert float(power["value"][1]) > 0
    (clock,) = stack.until(f'DCGM_FI_DEV_SM_CLOCK{{instance="{instance}", gpu="0"}} * 1000000', 1)
    assert float(clock["value"][1]) == 1.98e9
    (used,) = stack.until(f'DCGM_FI_DEV_FB_USED{{instance="{instance}", gpu="0"}}', 1)
    labels = used["metric"]
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3" and labels["UUID"] == H100_GPU0
    assert labels["Hostname"] == labels["hostname"] == "gpu-node-7" and labels["device"] == "nvidia0"
    assert (labels["pod"], labels["namespace"], labels["container"]) == ("llm-0", "ml", "trainer")
    # Grafana's label_values(DCGM_FI_DEV_GPU_TEMP, gpu) and (..., instance): the dashboard's variables.
    assert stack.label_values("gpu", "DCGM_FI_DEV_GPU_TEMP") == [str(i) for i in range(8)]
    assert instance in stack.label_values("instance", "DCGM_FI_DEV_GPU_TEMP")


def test_node_exporter_reads_the_textfile_output(stack: Stack) -> None:
    (failed,) = stack.until('gpudiag_check_status{job="node", check="health.ecc"} == 2', 1)
    assert set(failed["metric"]) == {"__name__", "job", "instance", "check", "gpu", "uuid"}
    (why,) = stack.until('gpudiag_check_reason_info{job="node", check="health.ecc"}', 1)
    assert "uncorrected ECC" in why["metric"]["reason"]
    assert stack.until('gpudiag_check_exit_code{job="node"} == 1', 1)
    assert len(stack.until('gpudiag_process_gpu_memory_bytes{job="node"}', 64)) == 64
    # node_exporter says whether it could parse the files at all.
    (error,) = stack.until("node_textfile_scrape_error", 1)
    assert float(error["value"][1]) == 0


def promtool_lines(text: str) -> tuple[int, list[str]]:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


@pytest.mark.parametrize("example", ["h100x8-training-64procs", "a100-mig", "gpu-lost", "no-driver"])
def test_promtool_accepts_both_families(example: str) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    native = subprocess.run(
        gpudiag("--replay", example, "exporter", "--once"), capture_output=True, text=True, env=env(), check=True
    ).stdout
    assert promtool_lines(native) == (0, [])
    dcgm = subprocess.run(
        gpudiag("--replay", example, "exporter", "--once", "--compat", "dcgm"),
        capture_output=True,
        text=True,
        env=env(),
        check=True,
    ).stdout
    code, lines = promtool_lines(dcgm)
    # Only the lint notes that dcgm-exporter's own names and labels draw (modelName, *_COUNTER, its
    # counters without _total): kept on purpose, since the dashboards and rules query exactly these.
    dcgm_own = (
        "label names should be written in 'snake_case' not 'camelCase'",
        "should not include type 'counter'",
        'counter metrics should have "_total" suffix',
    )
    assert all(line.endswith(dcgm_own) for line in lines), lines
    assert code in (0, 3)  # 3: lint notes only, no parse error


PROMETHEUS_ACCEPT = (  # what this Prometheus sends (2.x, scrape_protocols unset)
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def scraped(url: str) -> tuple[dict[str, str], str]:
    """A scrape as Prometheus makes it: its Accept header, gzip accepted."""
    import gzip

    request = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=5) as response:
        headers, body = dict(response.headers), response.read()
    assert headers.get("Content-Encoding") == "gzip", headers
    return headers, gzip.decompress(body).decode()


@pytest.mark.parametrize(
    ("job", "counter"),
    [
        ("gpudiag", "gpudiag_gpu_ecc_errors_total"),
        ("dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
        ("dcgm", "DCGM_FI_DEV_POWER_VIOLATION"),
        ("dcgm", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        ("dcgm", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"),  # a rate between scrapes: there from the second one
    ],
)
def test_counters_are_typed_on_the_scraped_text_and_prometheus_takes_them_as_counters(
    stack: Stack, job: str, counter: str
) -> None:
    headers, text = scraped(stack.exporters[job])
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert f"# TYPE {counter} counter\n" in text
    typed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert {line.split("{")[0].split(" ")[0] for line in text.splitlines() if not line.startswith("#")} <= typed
    # Prometheus itself: the type it recorded from the gzipped scrapes, and the samples under the same name.
    deadline = time.monotonic() + 30
    while not (metadata := stack.metadata(counter)) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert {m["type"] for m in metadata} == {"counter"}, metadata
    assert stack.until(f'rate({counter}{{job="{job}"}}[1m]) >= 0', 1)


def test_a_gpu_lost_mid_run_shows_as_lost_in_both_families(stack: Stack) -> None:
    from gpudiag.replay.fixtures import load
    from tests.test_export_exporter import lose

    native, dcgm = stack.live["live-native"], stack.live["live-dcgm"]
    a100, h100 = load("a100-ecc-errors")[0], load(EXAMPLE_8)[0]
    assert stack.until('gpudiag_gpu_lost{job="live-native", gpu="0"} == 0', 1)
    assert len(stack.until('DCGM_FI_DEV_GPU_TEMP{job="live-dcgm"}', 8)) == 8
    assert len(stack.until('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{job="live-dcgm"}', 8)) == 8
    native.lib.set_machine(lose(a100, 0))
    dcgm.lib.set_machine(lose(h100, 3))
    try:
        (lost,) = stack.until('gpudiag_gpu_lost{job="live-native", gpu="0"} == 1', 1)
        assert lost["metric"]["uuid"] == a100.gpus[0].uuid.value  # the GPU it was, not an empty label
        (lost,) = stack.until('gpudiag_gpu_lost{job="live-dcgm", gpu="3"} == 1', 1)
        assert lost["metric"]["UUID"] == h100.gpus[3].uuid.value and lost["metric"]["Hostname"] == "gpu-node-8"
        assert stack.until('gpudiag_check_status{job="live-native", check="nvml.gpu_lost", gpu="0"} == 2', 1)
        # The lost GPU's readings stop rather than stay at their last value (its profiling figures too).
        for metric in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
            deadline = time.monotonic() + 30
            while len(stack.query(f'{metric}{{job="live-dcgm"}}')) != 7 and time.monotonic() < deadline:
                time.sleep(0.25)
            assert len(stack.query(f'{metric}{{job="live-dcgm"}}')) == 7, metric
    finally:
        native.lib.set_machine(a100)
        dcgm.lib.set_machine(h100)


def test_check_status_stays_one_series_while_the_finding_changes(stack: Stack) -> None:
    import msgspec

    from gpudiag.replay.fixtures import load

    source = stack.live["live-native"]
    base = load("a100-ecc-errors")[0]
    assert stack.until('gpudiag_check_reason_info{job="live-native", check="health.ecc"}', 1)
    gpu = base.gpus[0]
    for more in (5, 9):  # two more findings, each with its own text
        errors = msgspec.structs.replace(
            gpu.ecc_errors, volatile_uncorrected=gpu.ecc_errors.volatile_uncorrected.map(lambda n, m=more: n + m)
        )
        source.lib.set_machine(msgspec.structs.replace(base, gpus=(msgspec.structs.replace(gpu, ecc_errors=errors),)))
        want = f"{gpu.ecc_errors.volatile_uncorrected.get(0) + more} uncorrected"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = stack.query('gpudiag_check_reason_info{job="live-native", check="health.ecc"}')
            if found and want in found[0]["metric"]["reason"]:
                break
            time.sleep(0.25)
        else:
            raise AssertionError(f"no reason with {want!r}: {found}")
    source.lib.set_machine(base)
    window = '{job="live-native", check="health.ecc"}[10m]'
    (status,) = stack.query(f"count_over_time(gpudiag_check_status{window})")
    assert set(status["metric"]) == {"job", "instance", "check", "gpu", "uuid"}  # one series all along
    assert len(stack.query(f"count_over_time(gpudiag_check_reason_info{window})")) >= 3  # the text did change
    assert stack.query(f"max_over_time(gpudiag_check_status{window}) == 2")
