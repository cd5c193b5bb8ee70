"""The real parts: Prometheus scraping `gpudiag exporter` (both families, attribution from a fake
kubelet), node_exporter reading `--textfile` output, and `promtool check metrics`.

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
    from tests.test_fleet_attribution import FakeKubelet

    procs: list[subprocess.Popen[Any]] = []
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
            prom_port = free_port()
            jobs = {"gpudiag": native, "dcgm": dcgm, "node": node}
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
            stack = Stack(f"http://127.0.0.1:{prom_port}", textfiles)
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


def test_prometheus_scrapes_the_dcgm_family_as_the_dashboard_queries_it(stack: Stack) -> None:
    # The dashboard's own queries and template variables (grafana/dcgm-exporter-dashboard.json).
    temps = stack.until('DCGM_FI_DEV_GPU_TEMP{instance=~".*", gpu=~".*"}', 8)
    assert len(temps) == 8
    assert {t["metric"]["gpu"] for t in temps} == {str(i) for i in range(8)}
    (power,) = stack.until('sum(DCGM_FI_DEV_POWER_USAGE{instance=~".*", gpu=~".*"})', 1)
    assert float(power["value"][1]) > 0
    (clock,) = stack.until('DCGM_FI_DEV_SM_CLOCK{gpu="0"} * 1000000', 1)
    assert float(clock["value"][1]) == 1.98e9
    (used,) = stack.until('DCGM_FI_DEV_FB_USED{gpu="0"}', 1)
    labels = used["metric"]
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3" and labels["UUID"] == H100_GPU0
    assert labels["Hostname"] == labels["hostname"] == "gpu-node-7" and labels["device"] == "nvidia0"
    assert (labels["pod"], labels["namespace"], labels["container"]) == ("llm-0", "ml", "trainer")
    # Grafana's label_values(DCGM_FI_DEV_GPU_TEMP, gpu) and (..., instance): the dashboard's variables.
    assert stack.label_values("gpu", "DCGM_FI_DEV_GPU_TEMP") == [str(i) for i in range(8)]
    assert len(stack.label_values("instance", "DCGM_FI_DEV_GPU_TEMP")) == 1


def test_node_exporter_reads_the_textfile_output(stack: Stack) -> None:
    (failed,) = stack.until('gpudiag_check_status{job="node", check="health.ecc"} == 2', 1)
    assert "uncorrected ECC" in failed["metric"]["reason"]
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
    # Only the lint notes that dcgm-exporter's own names and labels draw (modelName, *_COUNTER):
    # kept on purpose, since the dashboards query exactly these.
    dcgm_own = ("label names should be written in 'snake_case' not 'camelCase'", "should not include type 'counter'")
    assert all(line.endswith(dcgm_own) for line in lines), lines
    assert code in (0, 3)  # 3: lint notes only, no parse error
