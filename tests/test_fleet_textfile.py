"""`memory --textfile`, `check --textfile` and `check --npd`: one-shot outputs for node agents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpudiag.checks import CheckResult, Status
from gpudiag.exitcodes import ExitCode
from gpudiag.fleet import textfile
from tests.conftest import Cli

NPD_CHECKS = ("check", "--quick", "--no-torch", "--only", "nvml", "--only", "health", "--skip", "health.processes")


def samples(path: Path) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }


def test_memory_textfile_is_written_whole_and_alone(cli: Cli, tmp_path: Path) -> None:
    code, out, err = cli.replay("h100x8-training-64procs", "memory", "--textfile", str(tmp_path))
    assert code == 0 and out == "" and err == ""
    assert [p.name for p in tmp_path.iterdir()] == ["gpudiag_memory.prom"]  # no temporary file left behind
    got = samples(tmp_path / "gpudiag_memory.prom")
    assert sum(1 for name, _ in got if name == "gpudiag_process_gpu_memory_bytes") == 64
    assert sum(1 for name, _ in got if name == "gpudiag_gpu_memory_used_bytes") == 8
    assert any(name == "gpudiag_memory_timestamp_seconds" for name, _ in got)


def test_textfile_write_goes_through_a_temporary_name_in_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[str, str]] = []
    real_rename = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((str(src), str(dst)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    textfile.write(tmp_path, "x.prom", [textfile.stamp("gpudiag_test_timestamp_seconds", "test", 1.0)])
    ((src, dst),) = renames
    assert Path(src).parent == Path(dst).parent == tmp_path
    assert not src.endswith(".prom")  # node_exporter reads *.prom only: it never sees the half-written file
    assert (tmp_path / "x.prom").read_text().endswith("gpudiag_test_timestamp_seconds 1.0\n")


def test_textfile_with_watch_or_missing_directory_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli.replay("v100x4-tutorial", "memory", "--textfile", str(tmp_path), "--count", "2")
    assert code == ExitCode.USAGE and "one sample" in err
    code, _, err = cli.replay("v100x4-tutorial", "memory", "--textfile", str(tmp_path / "nope"))
    assert code == ExitCode.USAGE and "not a directory" in err


def test_check_textfile_has_every_verdict_and_the_exit_code(cli: Cli, tmp_path: Path) -> None:
    code, _, _ = cli.replay("a100-ecc-errors", "check", "--quick", "--no-torch", "--textfile", str(tmp_path))
    assert code == ExitCode.FAILED
    got = samples(tmp_path / "gpudiag_check.prom")
    assert got[("gpudiag_check_exit_code", frozenset())] == 1
    ecc = [dict(ls) for (name, ls), v in got.items() if name == "gpudiag_check_status" and v == 2]
    assert any(e["check"] == "health.ecc" and e["gpu"] == "0" and e["reason"] for e in ecc)


@pytest.mark.parametrize(
    ("example", "code", "start"),
    [
        ("h100x8-healthy", 0, "ok: "),
        ("a100-ecc-errors", 1, "failed: health.ecc(GPU 0)"),
        ("gpu-lost", 1, "failed: nvml.gpu_lost(GPU 2)"),
        ("no-driver", 1, "failed: nvml.init"),
    ],
)
def test_npd_plugin_protocol(cli: Cli, example: str, code: int, start: str) -> None:
    got, out, _ = cli.replay(example, *NPD_CHECKS, "--npd")
    assert got == code
    lines = out.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 80
    assert lines[0].startswith(start)


def test_npd_unknown_when_a_check_could_not_run_and_the_line_is_cut_at_80() -> None:
    passed = [CheckResult("health.ecc", "Health", Status.PASS, "fine", target="GPU 0")]
    line, code = textfile.npd_verdict(passed, strict=False, notes=["the torch probe could not start: " + "x" * 100])
    assert code == 2 and line.startswith("unknown: ") and len(line) == 80 and line.endswith("...")
    many = [CheckResult("health.row_remap", "Health", Status.FAIL, "pending", target=f"GPU {i}") for i in range(64)]
    line, code = textfile.npd_verdict(many, strict=False, notes=[])
    assert code == 1 and len(line) <= 80
    warned = [CheckResult("health.temperature", "Health", Status.WARN, "hot", target="GPU 1")]
    assert textfile.npd_verdict(warned, strict=False, notes=[])[1] == 0
    assert textfile.npd_verdict(warned, strict=True, notes=[]) == ("failed: health.temperature(GPU 1)", 1)


@pytest.mark.parametrize("other", [["--json"], ["--mode", "prolog"]])
def test_npd_and_another_output_contradict(cli: Cli, other: list[str]) -> None:
    code, _, err = cli.replay("h100x8-healthy", "check", "--npd", *other)
    assert code == ExitCode.USAGE and "--npd" in err
