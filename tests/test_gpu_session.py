"""The GPU session of issue 35 (benchmarks/device_session.py, bench_gpu_targets.py, bench_exporter --live),
tried here so that a typo does not spend a lent GPU machine's minutes: the verdicts, the line without a
GPU, the steps' command lines (dry run); their replay forms under ``slow``."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str) -> types.ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))  # the scripts import each other as a script would
    return importlib.import_module(name)


targets = _load("bench_gpu_targets")
session = _load("device_session")


def _target(label: str) -> object:
    return next(t for t in targets.TARGETS if t.label.startswith(label))


def test_a_ratio_target_is_met_at_its_limit_and_over_it_above() -> None:
    list_vs_smi = _target("`list` <=")
    assert targets.judge(list_vs_smi, {"gpudiag list": 0.150, "nvidia-smi": 0.100}).ok is True
    over = targets.judge(list_vs_smi, {"gpudiag list": 0.151, "nvidia-smi": 0.100})
    assert (over.ok, over.word(), over.shown()) == (False, "OVER", "1.51x")


def test_a_difference_target_is_in_seconds_and_shown_in_milliseconds() -> None:
    check = _target("`check` <=")
    met = targets.judge(check, {"gpudiag check": 5.60, "torch import + CUDA start": 5.19})
    assert (met.ok, met.shown()) == (True, "+410 ms")
    assert targets.judge(check, {"gpudiag check": 5.97, "torch import + CUDA start": 5.19}).word() == "OVER"


def test_a_side_that_did_not_run_gives_no_verdict_not_a_pass() -> None:
    verdict = targets.judge(_target("`list --query`"), {"gpudiag list --query": 0.05, "nvidia-smi --query-gpu": None})
    assert (verdict.value, verdict.ok, verdict.word()) == (None, None, "n/a")


def test_a_failed_case_has_no_median() -> None:
    ran = targets.Case("a", ["a"], walls=[0.3, 0.1, 0.2], cpus=[0.1, 0.1, 0.4])
    failed = targets.Case("b", ["b"], walls=[0.1], error="exit 2: boom")
    assert targets.medians([ran, failed]) == {"a": 0.2, "b": None}
    assert targets.medians([ran], cpu=True) == {"a": 0.1}


def test_the_heavy_commands_run_in_rounds_spread_over_the_run() -> None:
    assert targets.heavy_rounds_of(15, 5) == {0, 3, 6, 9, 12}
    assert targets.heavy_rounds_of(3, 5) == {0, 1, 2}
    assert targets.heavy_rounds_of(4, 0) == set()


def test_the_table_says_each_verdict() -> None:
    smi = targets.Case("nvidia-smi", ["nvidia-smi"], walls=[0.100], cpus=[0.05])
    table = targets.Case("gpudiag list", ["list"], walls=[0.200], cpus=[0.08])
    text = targets.render([smi, table], [targets.judge(_target("`list` <="), targets.medians([smi, table]))], {}, 1)
    assert "| `gpudiag list` | 200 | 200 | 80 | 1 |  |" in text
    assert "| `list` <= 1.5x `nvidia-smi` | 2.00x | 1.60x | OVER |" in text


def test_a_command_that_fails_or_hangs_is_recorded_not_measured() -> None:
    failing = targets.Case("failing", ["sh", "-c", "echo first >&2; echo it broke >&2; exit 2"])
    targets.run_once(failing, timeout_s=30)
    assert (failing.walls, failing.exits, failing.error) == ([], [2], "exit 2: it broke")
    hanging = targets.Case("hanging", ["sh", "-c", "sleep 30"])
    targets.run_once(hanging, timeout_s=0.1)
    assert hanging.error == "killed after 0.1 s" and not hanging.walls


def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """No nvidia-smi on PATH, also on a machine that has one."""
    monkeypatch.setattr(targets.shutil, "which", lambda name: None)


def test_without_a_gpu_it_says_so_in_one_line_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_gpu(monkeypatch)
    assert targets.gpu_absent() == "nvidia-smi is not on PATH"
    code = targets.main([str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == targets.NO_GPU == 3
    assert re.fullmatch(r"bench_gpu_targets: no GPU here \(.+\): nothing measured\n", err), err
    assert not (tmp_path / "out").exists()


def test_nvml_call_costs_times_each_call_once_when_every_source_shares_one_library() -> None:
    """Live, every source is the one pynvml module: wrapping its lookup again counted each call twice."""
    costs = _load("nvml_call_costs")
    lib = types.SimpleNamespace(_nvmlGetFunctionPointer_cache={})
    lib._nvmlGetFunctionPointer = lambda name: lambda: 0
    stats: dict[str, list[float]] = costs.defaultdict(lambda: [0, 0.0, 0.0])
    costs._timed(lib, stats)
    costs._timed(lib, stats)  # a second source of the same library
    lib._nvmlGetFunctionPointer("nvmlDeviceGetCount")()
    assert stats["nvmlDeviceGetCount"][0] == 1


def test_the_live_exporter_passes_only_a_node_as_full_as_the_targets() -> None:
    exporter = _load("bench_exporter")
    assert exporter.live_verdict(12.2, 1, 0)[1] == 1  # the H200's figure: over on one GPU is over
    assert exporter.live_verdict(3.0, 1, 0)[1] == exporter.LIVE_UNDECIDED == 4  # 8 GPUs would cost more
    assert exporter.live_verdict(3.0, 8, 63)[1] == 4
    assert exporter.live_verdict(5.0, 8, 64) == ("OK (5.00 ms)", 0)


def _options(script: Path) -> set[str]:
    return set(re.findall(r"add_argument\(\s*\"(--[a-z-]+)\"", script.read_text()))


def test_the_session_dry_run_names_every_step_within_the_device_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert session.main([str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert [line.split(" ")[0] for line in out.splitlines()[:-1]] == [
        "preflight",
        "acceptance",
        "targets",
        "call-costs",
        "exporter",
    ]
    assert sum(s.limit_s for s in session.steps(tmp_path)) <= 570  # the device tool's 600 s, less the archive
    for step in session.steps(tmp_path) + session.steps(tmp_path, "h200-driver580-idle"):
        scripts = [Path(arg) for arg in step.argv if arg.endswith(".py")]
        if step.argv[1] == "-m":
            scripts = [ROOT / (step.argv[2].replace(".", "/") + ".py")]
        for script in scripts:  # a typo in a path or an option would cost the session
            assert script.is_file(), step
            used = {arg for arg in step.argv if arg.startswith("--")}
            assert used <= _options(script), (step.name, used - _options(script))
    assert not list(tmp_path.iterdir())  # nothing run, nothing written


def test_the_session_says_no_gpu_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_gpu(monkeypatch)
    assert session.main([str(tmp_path / "s")]) == 3
    assert re.fullmatch(r"device_session: no GPU here \(.+\): nothing run\n", capsys.readouterr().err)


def test_a_step_that_hangs_is_killed_at_its_limit_and_the_summary_says_so(tmp_path: Path) -> None:
    step = session.Step("hang", ["sh", "-c", "echo started; sleep 30"], 0.3, session._last(3))
    code, seconds, text = session.run_step(step, tmp_path)
    assert code == 124 and seconds < 10 and text.startswith("started")
    assert "killed at its limit of 0.3 s" in (tmp_path / "hang.log").read_text()
    assert "## hang (killed at its limit; all of it in hang.log)" in session.summary_of([(step, code, seconds, text)])


def test_an_unknown_step_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as ended:
        session.main([str(tmp_path), "--only", "target"])
    assert ended.value.code == 2


@pytest.mark.slow
def test_bench_gpu_targets_runs_gpudiags_commands_on_a_replay(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_gpu_targets.py"), str(tmp_path), "--replay", "h200-driver580-idle",
         "--rounds", "1", "--heavy-rounds", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "gpu-targets.json").read_text())
    assert record["schema"] == targets.SCHEMA and record["rounds"] == 1
    ran = {name: case for name, case in record["cases"].items()}
    assert set(ran) == {c.name for c in targets.cases("x")} and all(c["walls_s"] for c in ran.values())
    assert "| `list --json` <= `list` |" in (tmp_path / "gpu-targets.md").read_text()


@pytest.mark.slow
def test_the_session_runs_the_live_exporter_step_on_a_replay_and_archives_it(tmp_path: Path) -> None:
    import tarfile

    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "device_session.py"), str(tmp_path / "s"), "--replay",
         "h200-driver580-idle", "--only", "exporter", "--archive", str(tmp_path / "s.tgz")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # a step that did not pass
    assert "| exporter | 4 |" in done.stdout  # one GPU under the target: not a pass for a node of 8
    assert "fewer than the target's" in done.stdout
    assert "a running `gpudiag exporter`, 100 scrapes over HTTP" in done.stdout
    with tarfile.open(tmp_path / "s.tgz") as tar:
        assert {"s/summary.md", "s/exporter.log"} <= set(tar.getnames())
