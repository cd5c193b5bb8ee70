"""bench-transfer rendering at a fixed width: tables, peer matrices, the sweep chart, JSON, CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from rich.console import Console

from gpudiag.bench import report
from gpudiag.bench.plan import make_plan
from gpudiag.bench.stats import GB, bandwidth
from gpudiag.render import bench_view
from gpudiag.replay.fixtures import load
from tests.test_bench_report import V100_HEALTHY, simulate


def text_of(renderable: Any, width: int = 120) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined, no-any-return]


def rendered(example: str, modes: str, rates: dict[str, float], sizes: str | None = None, **kw: Any) -> str:
    unit = kw.pop("unit", bench_view.DECIMAL)
    rows, outcome, gpus = simulate(example, modes, rates, sizes=sizes, **kw)
    found = report.findings(rows, outcome)
    plan = make_plan(modes, sizes, False, 4, 3, None)
    notes = report.notes(rows, outcome, False, any(m.is_peer for m in plan.modes))
    return text_of(bench_view.render(rows, outcome, gpus, found, notes, plan, unit))


def test_a_trained_down_link_reads_as_such_at_120_columns() -> None:
    out = rendered("h100-pcie-gen2-trained-down", "h2d_pinned,h2d_pageable,d2d", {}, default_rate=6.4e9)
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 120
    assert "cuda:0 (GPU 0)   NVIDIA H100 PCIe   Gen5 x16   1           local" in out
    row = next(line for line in lines if line.startswith("h2d_pinned "))
    assert row.split()[:8] == ["h2d_pinned", "256MiB", "6.4", "6.4-6.4", "0.0%", "Gen2", "x16", "50.0-57.5"]
    assert row.rstrip().endswith("50.0-57.5 / 63.0   below expected")
    assert lines[lines.index(row) + 1].strip() == "behaves like Gen2 x16"  # the detail on its own line
    pageable = next(line for line in lines if line.startswith("h2d_pageable "))
    assert pageable.split()[:3] == ["h2d_pageable", "256MiB", "6.4"] and "not judged: 100% of pinned" in pageable
    d2d = next(line for line in lines if line.startswith("d2d "))
    assert d2d.split()[:3] == ["d2d", "512MiB", "6.4"] and "740-870 / 1000   below expected" in d2d
    flat = " ".join(out.split())
    assert "Likely cause: the link runs at Gen2 x16 under load (capable of Gen5 x16): it trained down." in flat
    assert "peer modes need" not in out
    assert "Units: GB/s = 10^9 bytes/s. Bytes counted:" in out
    conventions = {
        line.split(":")[0].strip(): line.split(":", 1)[1].strip() for line in lines if "bytes copied" in line
    }
    assert conventions["h2d_pageable, h2d_pinned"] == "bytes copied, one direction"
    assert conventions["d2d"].startswith("bytes copied, counted once")


def test_peer_matrices_mark_copies_without_peer_access() -> None:
    rates = {"peer": 9.0e9, "peer_bidir": 8.5e9}
    out = rendered("a100x2-pcie-one-at-x8", "peer,peer_bidir", rates, peer_access=False)
    assert "peer 256MiB, GB/s, from row to column (medians)" in out
    assert "peer_bidir 256MiB, GB/s, sum of both directions (medians)" in out
    assert "cuda:0        -     9.0*" in out and "cuda:1     9.0*        -" in out
    assert "cuda:0        -    17.0*" in out and "cuda:1    17.0*        -" in out  # one pair, shown both ways
    assert "* no peer access between these GPUs: CUDA stages the copy through host memory" in out
    assert "Mode " not in out  # no per-GPU tables: only peer modes were asked for
    with_access = rendered("h100x8-healthy", "peer", {"peer": 380e9})
    assert "cuda:7      380      380      380      380      380      380      380        -" in with_access
    assert "*" not in with_access.split("Method:")[0]


def test_the_sweep_chart_shows_where_bandwidth_saturates() -> None:
    sizes = "4KiB,64KiB,1MiB,16MiB,256MiB"
    rows, outcome, gpus = simulate("v100-pcie-gen3-x16", "h2d_pinned_async", {}, sizes=sizes)
    # Replace the flat fake rates with a latency-bound curve: rate = size / (5 us + size / 12 GB/s).
    curved = []
    for row in rows:
        seconds = 5e-6 + row.task.nbytes / 12e9
        bw = bandwidth(row.task.nbytes, [seconds])
        curved.append(report.Row(**{**vars(row), "bandwidth": bw}))
    chart = bench_view.SweepChart(curved, bench_view.DECIMAL)
    out = text_of(chart, width=80)
    lines = out.splitlines()
    assert lines[0] == "h2d_pinned_async cuda:0  peak 12.0 GB/s, >= 90% of it from 1MiB"
    bars = [line.count("█") for line in lines[1:6]]
    assert bars == sorted(bars) and bars[0] < 5 and bars[-1] == 80 - 8 - 2 - 10
    assert lines[5].startswith("  256MiB ") and lines[5].rstrip().endswith("12.0")
    assert max(len(line) for line in lines) <= 80
    plan = make_plan("h2d_pinned_async", None, True, 4, 3, None)
    full = text_of(bench_view.render(curved, outcome, gpus, [], [], plan))
    assert "Bandwidth by size (GB/s)" in full


def test_json_is_versioned_numeric_and_states_conventions() -> None:
    rows, outcome, gpus = simulate("a100x2-pcie-one-at-x8", "h2d_pinned,d2d,peer_bidir", {"h2d_pinned": 12.3e9})
    found = report.findings(rows, outcome)
    plan = make_plan("h2d_pinned,d2d,peer_bidir", None, False, 4, 3, None)
    data = json.loads(json.dumps(bench_view.to_json(rows, outcome, gpus, found, ["a note"], plan)))
    assert data["schema"] == "gpudiag.bench-transfer/1" and data["complete"] is True
    assert data["method"] == {
        "warmup_copies": 4,
        "samples": 3,
        "copies_per_sample": 4,
        "statistic": "median of samples",
        "rates": "bytes per second (GB/s = 1e9 bytes/s)",
    }
    d1 = data["devices"][1]
    assert d1 | {"uuid": "-"} == d1 | {
        "cuda_device": 1,
        "gpu_index": 1,
        "uuid": "-",
        "name": "NVIDIA A100 80GB PCIe",
        "numa_node": 1,
        "host_memory_placement": "local",
        "pcie_max_gen": 4,
        "pcie_max_width": 16,
    }
    pinned = next(r for r in data["results"] if r["cuda_device"] == 1 and r["mode"] == "h2d_pinned")
    assert (
        pinned["median_bytes_per_s"] == pytest.approx(12.3e9)
        and pinned["samples_bytes_per_s"] == [pytest.approx(12.3e9)] * 3
    )
    assert (pinned["pcie_under_load_gen"], pinned["pcie_under_load_width"]) == (4, 8)
    assert (pinned["behaves_like_pcie_gen"], pinned["behaves_like_pcie_width"]) == (4, 8)
    assert pinned["verdict"] == "below_expected" and pinned["timing"] == "wall_clock_per_call"
    assert pinned["limit_bytes_per_s"] == pytest.approx(31.5 * GB, rel=2e-3)
    assert pinned["likely_cause"].startswith("the link runs at Gen4 x8")
    bidir = next(r for r in data["results"] if r["mode"] == "peer_bidir")
    assert bidir["counted_bytes_per_copy"] == 2 * bidir["size_bytes"] and "sum of both" in bidir["byte_counting"]
    assert data["peer_access"][0] == {"from_cuda_device": 0, "to_cuda_device": 1, "peer_access": True}
    assert {f["severity"] for f in data["findings"]} == {"warning"} and data["notes"] == ["a note"]
    for result in data["results"]:
        for key, value in result.items():
            if key.endswith(("_bytes_per_s", "_bytes", "_gen", "_width", "_percent")) and value is not None:
                values = value if isinstance(value, list) else [value]
                assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values), key


def test_csv_has_one_row_per_figure_in_the_chosen_unit() -> None:
    rows, _, _ = simulate("v100-pcie-gen3-x16", "host,d2d", V100_HEALTHY)
    for unit, header, pinned_value in (
        (bench_view.DECIMAL, "median_gb_per_s", "12.200"),
        (bench_view.BINARY, "median_gib_per_s", "11.362"),
    ):
        parsed = list(csv.DictReader(io.StringIO(bench_view.to_csv(rows, unit))))
        assert len(parsed) == len(rows) == 7
        pinned = next(r for r in parsed if r["mode"] == "h2d_pinned")
        assert pinned[header] == pinned_value and pinned["verified"] == "true" and pinned["verdict"] == "healthy"
        assert pinned["pcie_gen_under_load"] == "3" and pinned["peer_cuda_device"] == ""


def test_gib_and_errors_render() -> None:
    out = rendered("v100-pcie-gen3-x16", "h2d_pinned,d2d", V100_HEALTHY, unit=bench_view.BINARY, corrupt=("d2d",))
    assert "GiB/s" in out and "Units: GiB/s = 2^30 bytes/s" in out and "11.4" in out
    assert "DATA MISMATCH" in out
    failed = rendered("v100-pcie-gen3-x16", "d2h_pinned", {}, fail={"d2h_pinned": "CUDA error: unknown error"})
    assert "error: RuntimeError: CUDA error: unknown error" in " ".join(failed.split())
    assert load("v100-pcie-gen3-x16")[0].gpus[0].name.get("?") in failed
