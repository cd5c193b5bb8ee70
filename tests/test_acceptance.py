"""The hardware acceptance (``python -m tests.acceptance``): offline against every capture in
docs/hardware, online on any machine with NVIDIA GPUs (marked ``gpu``). ``pytest -m acceptance`` runs
both; the online run's own logic (a crash is a FAIL, level 2 runs once, the time budget) is tested here
on CPU with its commands stood in for."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpudiag.replay.fixtures import example_names
from tests import acceptance
from tests.conftest import Cli
from tests.hardware import compare

pytestmark = pytest.mark.acceptance
CAPTURE = acceptance.CAPTURE


def _in_process(*args: str, replay: str | None = None, env: Any = None) -> subprocess.CompletedProcess[str]:
    """gpudiag run in this process (a replay needs no child): the offline run in seconds."""
    code, out, err = Cli()(*(["--replay", replay] if replay else []), *args, width=160)
    return subprocess.CompletedProcess(list(args), code, out, err)


def _captures() -> list[Any]:
    return [pytest.param(c, id=c.folder) for c in acceptance.CAPTURES]


def test_every_capture_folder_is_compared() -> None:
    """A capture added to docs/hardware joins the acceptance (and names its example machines)."""
    folders = {p.name for p in acceptance.HARDWARE.iterdir() if p.is_dir()}
    assert folders == {c.folder for c in acceptance.CAPTURES}
    for c in acceptance.CAPTURES:
        assert {c.idle, c.busy} <= set(example_names()), c


@pytest.mark.parametrize("capture", _captures())
def test_offline_each_capture_matches_nvidia_smi_but_for_moments_and_what_nvml_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: acceptance.Capture
) -> None:
    monkeypatch.setattr(acceptance, "gpudiag", _in_process)
    results = acceptance.compare_bundle(acceptance.Bundle(tmp_path, True, capture))
    summary = compare.summary(results)
    assert [d for r in results for d in r.failures] == [], summary
    by_check = {r.check.removeprefix(f"{capture.folder}: "): r for r in results}
    q = by_check["-q (labels and values)"]
    assert q.compared >= 200
    kinds = {d.where: d.kind for d in q.differences}
    # Every label of nvidia-smi -q is there in its order; the values differ only where the GPU moved
    # between the two reads, or where nvidia-smi reads outside NVML.
    assert set(kinds.values()) <= {compare.MOMENT, compare.NOT_IN_NVML}
    assert {w for w, k in kinds.items() if k == compare.NOT_IN_NVML} == {"GPU Part Number", "Sparse Operation Mode"}
    xml = [r for name, r in by_check.items() if name.startswith("-q -x")]
    assert len(xml) == 2 and all(r.compared >= 480 for r in xml)
    query = by_check["--query-gpu (every field)"]
    assert query.compared == 214
    assert {d.kind for d in query.differences} <= {compare.MOMENT, *(kind for kind, _ in capture.offline_only.values())}
    truth = capture.cuda_truth or acceptance.cuda_truth(capture.path / "cuda-visible-devices-truth.tsv")
    assert by_check["visible (against CUDA)"].compared == len(truth) >= 17
    assert by_check["check"].failures == [] and (tmp_path / "gpudiag-list-q.txt").exists()


@pytest.mark.slow  # the per-capture tests above are the quick gate; this runs them all again
def test_the_offline_run_covers_every_capture_in_one_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acceptance, "gpudiag", _in_process)
    results = acceptance.run(tmp_path, offline=True)
    summary = (tmp_path / "acceptance-summary.txt").read_text()
    for c in acceptance.CAPTURES:
        assert f"{c.folder}: -q (labels and values)" in summary
        assert (tmp_path / c.folder / "gpudiag-list-q.xml").exists()
    # The H200's capture recorded the reference crashing: offline that is named, not hidden.
    (bench,) = [r for r in results if r.check == "h200-driver580: bench-transfer (against a plain copy loop)"]
    assert bench.skipped.startswith("the capture holds no figures: reference_copy.py said ") and "UsageError" in (
        bench.skipped
    )


def test_a_value_that_differs_for_no_reason_fails_the_acceptance() -> None:
    """The comparison can fail: a changed value nvidia-smi does not explain is a DIFF, a missing
    label too."""
    smi = (CAPTURE / "nvidia-smi-q.txt").read_text()
    assert compare.compare_q(smi, smi).differences == []
    changed = smi.replace("Persistence Mode                                   : Enabled", "Persistence Mode : Disabled")
    failures = compare.compare_q(smi, changed).failures
    assert [(d.where, d.nvidia_smi, d.gpudiag) for d in failures] == [("Persistence Mode", "Enabled", "Disabled")]
    dropped = "\n".join(line for line in smi.splitlines() if "Product Brand" not in line)
    assert [d.where for d in compare.compare_q(smi, dropped).failures] == ["Product Brand"]
    xml = (CAPTURE / "nvidia-smi-q.xml").read_text()
    assert compare.compare_xml(xml, xml.replace("<c2c_mode>Disabled", "<c2c_mode>Enabled")).failures
    assert compare.same("N/A", "N/A (not supported)") and not compare.same("0", "N/A (not supported)")


def test_moment_to_moment_fields_are_listed_with_their_reason() -> None:
    smi = (CAPTURE / "nvidia-smi-q.txt").read_text()
    warmer = smi.replace("GPU Current Temp                               : 35 C", "GPU Current Temp : 41 C")
    (moved,) = compare.compare_q(smi, warmer).differences
    assert (moved.kind, moved.reason) == (compare.MOMENT, "temperature")


def _done(code: int = 0, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], code, out, err)


def test_online_a_reference_that_crashes_is_a_fail_with_its_error(tmp_path: Path) -> None:
    """On the H200 the bench comparison was SKIPPED as "no CUDA device" while reference_copy.py had
    crashed (runs/reference-copy-unpatched.txt): on a GPU machine no figures is a FAIL, saying why."""
    shutil.copy(acceptance.HARDWARE / "h200-driver580" / "reference-copy.txt", tmp_path / "reference-copy.txt")
    result = acceptance.check_bench(acceptance.Bundle(tmp_path, offline=False))
    assert not result.skipped
    (failure,) = result.failures
    assert failure.reason.startswith("gpudiag.errors.UsageError: size '268435456' needs a unit")
    (tmp_path / "reference-copy.txt").unlink()  # never written: a FAIL too
    assert acceptance.check_bench(acceptance.Bundle(tmp_path, offline=False)).failures[0].reason == (
        "reference-copy.txt was not written"
    )
    shutil.copy(CAPTURE / "reference-copy.txt", tmp_path / "reference-copy.txt")  # the H100's figures
    passed = acceptance.check_bench(acceptance.Bundle(tmp_path, offline=False))
    assert passed.compared == 1 and passed.differences == [] and not passed.skipped


def test_online_the_h200s_own_bundle_compares_as_its_live_run_did_and_its_crash_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/hardware/h200-driver580 is what capture.sh wrote on the H200: compared as a GPU machine's
    bundle, it gives the DIFFs its live run gave (acceptance-summary.txt there: gpudiag's output then),
    and the reference's crash, SKIPPED there, is a FAIL."""
    bundle = tmp_path / "bundle"
    shutil.copytree(acceptance.HARDWARE / "h200-driver580", bundle)

    def gpudiag(*args: str, replay: str | None = None, env: Any = None) -> subprocess.CompletedProcess[str]:
        if args[0] == "visible":  # CUDA's answers against gpudiag's prediction for the same GPU
            return _in_process(*args, replay="h200-driver580-idle")
        return _done(out='{"exit_code": 0}')

    monkeypatch.setattr(acceptance, "gpudiag", gpudiag)
    monkeypatch.setattr(acceptance.subprocess, "run", lambda argv, **kwargs: _done(out="4 passed\n"))
    results = acceptance.compare_bundle(acceptance.Bundle(bundle, offline=False), {})
    live = (bundle / "acceptance-summary.txt").read_text()
    recorded = sorted(line.split("] ", 1)[1] for line in live.splitlines() if line.startswith("  [DIFF]"))
    found = [d for r in results for d in r.failures]
    assert (
        sorted(
            f"{d.check}: {d.where}: nvidia-smi {d.nvidia_smi!r}, gpudiag {d.gpudiag!r}"
            for d in found
            if d.check != "bench-transfer (against a plain copy loop)"
        )
        == recorded
    )
    (bench,) = [r for r in results if r.check.startswith("bench-transfer")]
    assert "SKIP  bench-transfer" in live and bench.failures and not bench.skipped


def test_a_gpudiag_output_that_crashed_is_a_fail_with_its_error(tmp_path: Path) -> None:
    """On the H200, gpudiag as on main ended every detail view in exit 70 (runs/unpatched-*): such an
    output in the bundle fails the acceptance, whatever its comparison says."""
    runs = acceptance.HARDWARE / "h200-driver580" / "runs"
    shutil.copy(runs / "unpatched-gpudiag-list-q.txt", tmp_path / "gpudiag-list-q.txt")
    (tmp_path / "gpudiag-list.txt").write_text("GPU  Name ...\n")
    result = acceptance.check_outputs(acceptance.Bundle(tmp_path, offline=False))
    assert result.compared == 2
    (failure,) = result.failures
    assert failure.where == "gpudiag-list-q.txt"
    assert failure.reason.startswith("gpudiag: internal error: ValueError: invalid literal for int()")
    (tmp_path / "gpudiag-check.txt").write_text("Traceback (most recent call last):\n  ...\nKeyError: 'x'\n")
    crashed = acceptance.check_outputs(acceptance.Bundle(tmp_path, offline=False)).failures
    assert {d.where: d.reason for d in crashed}["gpudiag-check.txt"] == "KeyError: 'x'"


def test_online_a_run_captures_compares_and_times_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m tests.acceptance OUTDIR` on a GPU machine, its commands stood in for: capture.sh
    writes the bundle (the H200's, its gpudiag -q, -q -x and --query-gpu files standing as nvidia-smi's
    own, a reference within 5 %), then every comparison, the deep part and the time: exit 0, no SKIP."""
    h200 = acceptance.HARDWARE / "h200-driver580"

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "bash":  # capture.sh OUTDIR
            out = Path(argv[2])
            shutil.copytree(h200, out, dirs_exist_ok=True)
            for ours, theirs in (
                ("gpudiag-list-q.txt", "nvidia-smi-q.txt"),
                ("gpudiag-list-q.xml", "nvidia-smi-q.xml"),
                ("gpudiag-list-q-busy.xml", "nvidia-smi-q-busy.xml"),
                ("gpudiag-query-gpu-all.csv", "nvidia-smi-query-gpu-all.csv"),
            ):
                (out / ours).write_text((out / theirs).read_text())
            (out / "reference-copy.txt").write_text("largest difference 0.4% (target: within 5%)\n")
            return _done()
        return _done(out="4 passed\n")

    def gpudiag(*args: str, replay: str | None = None, env: Any = None) -> subprocess.CompletedProcess[str]:
        if args[0] == "visible":
            return _in_process(*args, replay="h200-driver580-idle")
        return _done(out='{"exit_code": 0}')

    monkeypatch.setattr(acceptance.subprocess, "run", run)
    monkeypatch.setattr(acceptance, "gpudiag", gpudiag)
    monkeypatch.setattr(acceptance, "has_gpu", lambda: True)
    assert acceptance.main([str(tmp_path)]) == 0, (tmp_path / "acceptance-summary.txt").read_text()
    summary = (tmp_path / "acceptance-summary.txt").read_text()
    assert (
        "PASS  time (at most 360 s on one GPU)" in summary
        and "[note] time (at most 360 s on one GPU): capture.sh" in summary
    )
    assert "SKIP" not in summary


def test_online_level_2_runs_once_and_the_deep_tests_read_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acceptance and tests/test_deep_gpu.py both ran `check --level 2`: now the acceptance runs it once
    and hands the deep tests its exit status, JSON and time."""
    ran: list[tuple[str, ...]] = []

    def gpudiag(*args: str, replay: str | None = None, env: Any = None) -> subprocess.CompletedProcess[str]:
        ran.append(args)
        return _done(out='{"verdict": "READY", "exit_code": 0}' if "--level" in args else "READY")

    handed: list[dict[str, str]] = []

    def pytest_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[-1] == "tests/test_deep_gpu.py"
        handed.append(kwargs["env"])
        return _done(
            out="4 passed, 1 skipped\nSKIPPED [1] tests/test_deep_gpu.py:115: one GPU: nothing to all-reduce across\n"
        )

    monkeypatch.setattr(acceptance, "gpudiag", gpudiag)
    monkeypatch.setattr(acceptance.subprocess, "run", pytest_run)
    timings: dict[str, float] = {}
    results = acceptance.check_commands(acceptance.Bundle(tmp_path, offline=False), timings)
    assert [r.check for r in results] == ["check", "check --level 2 (deep)", "tests/test_deep_gpu.py"]
    assert all(r.failures == [] and not r.skipped for r in results), compare.summary(results)
    assert [a for a in ran if "--level" in a] == [("check", "--level", "2", "--json")]
    monkeypatch.setenv(acceptance.LEVEL2_RESULT_ENV, handed[0][acceptance.LEVEL2_RESULT_ENV])
    shared = acceptance.shared_level_2()
    assert shared is not None and shared[:2] == (0, {"verdict": "READY", "exit_code": 0})
    assert set(timings) == {"check", "check --level 2 (deep)", "tests/test_deep_gpu.py"}
    monkeypatch.delenv(acceptance.LEVEL2_RESULT_ENV)
    assert acceptance.shared_level_2() is None  # run alone, the deep test runs level 2 itself


def test_online_a_deep_test_that_skips_did_not_pass() -> None:
    skipped = "SKIPPED [1] tests/test_deep_gpu.py:31: torch cannot use CUDA here\n4 skipped\n"
    (failure,) = acceptance.check_deep_tests(_done(out=skipped)).failures
    assert (failure.where, failure.reason) == ("skipped", "torch cannot use CUDA here")
    allowed = "SKIPPED [1] tests/test_deep_gpu.py:115: one GPU: nothing to all-reduce across\n"
    assert acceptance.check_deep_tests(_done(out=allowed)).failures == []
    (crashed,) = acceptance.check_deep_tests(_done(1, "", "E   RuntimeError: CUDA error\n")).failures
    assert crashed.reason == "E   RuntimeError: CUDA error"


def test_online_the_whole_run_must_fit_in_six_minutes() -> None:
    assert sum(acceptance.PART_BUDGETS_S.values()) <= acceptance.BUDGET_S == 360
    fits = acceptance.check_time({"capture.sh": 100.0, "check --level 2 (deep)": 50.0})
    assert fits.failures == [] and fits.notes == [
        "capture.sh 100 s of its 120 s",
        "check --level 2 (deep) 50 s of its 85 s",
    ]
    slow = acceptance.check_time({"capture.sh": 300.0, "tests/test_deep_gpu.py": 100.0})
    assert [(d.where, d.gpudiag) for d in slow.failures] == [("whole run", "400 s")]
    assert "capture.sh 300 s of its 120 s (over its share)" in compare.summary([slow])


@pytest.mark.gpu
@pytest.mark.slow
def test_on_this_gpu_machine_gpudiag_matches_the_machine_itself(tmp_path: Path) -> None:
    """The whole acceptance on real hardware: capture at one moment, then compare (at most 6 minutes on one
    GPU; about 4 estimated)."""
    assert acceptance.main([str(tmp_path)]) == 0, (tmp_path / "acceptance-summary.txt").read_text()
