"""`gpudiag report` over `check --level 2-4` files: the deep figures of every node's GPUs compared
within each GPU model, the node and the GPU that fall clearly below the median named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import nodefiles, outliers, report
from tests.conftest import Cli

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


def node_file(host: str, model: str, gpus: int = 8, slow: dict[int, float] | None = None, **figures: float) -> bytes:
    """A `check --level 3 --json` document: every GPU at ``figures``, some GPUs' stress slower."""
    entries: list[dict[str, Any]] = []
    for index in range(gpus):
        entry: dict[str, Any] = {"index": index, "name": model, "uuid": f"GPU-{host}-{index}"}
        entry |= {"stress_tflops": (slow or {}).get(index, figures.get("stress_tflops", 675.0))}
        entry |= {k: v for k, v in figures.items() if k != "stress_tflops"}
        entries.append(entry)
    doc = {
        "schema": "gpudiag.check/1",
        "host": host,
        "slurm_node": None,
        "verdict": "READY",
        "could_not_run": [],
        "versions": {},
        "checks": [{"id": "nvml.init", "status": "PASS"}],  # a file that verified nothing is never READY
        "gpus": entries,
    }
    return json.dumps(doc).encode()


def fleet() -> list[nodefiles.NodeFile]:
    deep = {"memtest_gbps": 2400.0, "peer_min_gbps": 370.0, "allreduce_busbw_gbps": 420.0}
    files = [nodefiles.parse(node_file(f"h{i}", H100, **deep), f"h{i}.json") for i in range(1, 7)]
    files.append(nodefiles.parse(node_file("h7", H100, slow={3: 520.0}, **deep), "h7.json"))
    a100 = {"memtest_gbps": 1500.0, "peer_min_gbps": 265.0, "allreduce_busbw_gbps": 230.0, "stress_tflops": 300.0}
    files += [nodefiles.parse(node_file(f"a{i}", A100, **a100), f"a{i}.json") for i in range(1, 5)]
    return files


def test_a_check_file_gives_its_slowest_gpus_deep_figures_and_which_gpu() -> None:
    node = nodefiles.parse(node_file("h7", H100, slow={3: 520.0}, memtest_gbps=2400.0), "h7.json")
    assert node.metrics["stress_tflops"] == 520.0 and node.figure_gpus["stress_tflops"] == 3
    assert node.metrics["memtest_gbps"] == 2400.0
    plain = nodefiles.parse(json.dumps({**json.loads(node_file("x", H100)), "gpus": [{"index": 0}]}).encode(), "x")
    assert plain.figure_gpus == {} and "stress_tflops" not in plain.metrics  # a level-1 file: nothing new


def test_a_straggler_node_is_named_with_its_gpu_against_its_own_models_median() -> None:
    built = report.build(fleet())
    found = [(o.host, o.figure.name, o.gpu, o.model) for o in built.outliers]
    assert found == [("h7", "stress_tflops", 3, f"8× {H100}")]  # the A100 nodes are not slow H100s
    assert built.stats[f"stress_tflops{outliers.MODEL_SEP}8× {H100}"][0] == pytest.approx(675.0)
    assert built.stats[f"stress_tflops{outliers.MODEL_SEP}8× {A100}"][0] == pytest.approx(300.0)


def test_one_model_keeps_the_plain_figure_name() -> None:
    only_h100 = [f for f in fleet() if f.host.startswith("h")]
    built = report.build(only_h100)
    assert "stress_tflops" in built.stats and [o.host for o in built.outliers] == ["h7"]


def test_report_shows_the_gpu_and_the_model(cli: Cli, tmp_path: Path) -> None:
    for f in fleet():
        (tmp_path / f.path).write_bytes(node_file(f.host, A100 if f.host.startswith("a") else H100))
    (tmp_path / "h7.json").write_bytes(node_file("h7", H100, slow={3: 520.0}))
    code, out, _ = cli("report", str(tmp_path))
    assert code == ExitCode.OK  # an outlier is a lead, not a failure
    assert f"sustained GEMM      1  h7  520 TFLOP/s on GPU 3 (fleet median of 8× {H100} nodes 675 TFLOP/s)" in out
    code, out, _ = cli("report", "--json", str(tmp_path))
    data = json.loads(out)
    assert data["outliers"]["found"] == [
        {"node": "h7", "figure": "stress_tflops", "value": 520.0, "median": 675.0, "model": f"8× {H100}", "gpu": 3}
    ]
    assert data["outliers"]["fleet"][f"stress_tflops @ 8× {H100}"]["unit"] == "TFLOP/s"
