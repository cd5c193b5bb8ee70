"""`memory --textfile`, `check --textfile` and `check --npd`: one-shot outputs for node agents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpudiag.checks import CheckResult, Status
from gpudiag.exitcodes import ExitCode
from gpudiag.export import textfile
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
    assert {"check": "health.ecc", "gpu": "0", "uuid": "GPU-dead0bad-0000-4000-8000-00000000a100"} in ecc
    why = [dict(ls) for (name, ls), v in got.items() if name == "gpudiag_check_reason_info" and v == 1]
    (ecc_why,) = [w for w in why if w["check"] == "health.ecc" and w["gpu"] == "0"]
    assert "uncorrected ECC" in ecc_why["reason"]
    failing = {dict(ls)["check"] for (name, ls), v in got.items() if name == "gpudiag_check_status" and v >= 1}
    assert {w["check"] for w in why} == failing  # a reason for each warning and failure, none for a pass


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


def fake_pci(root: Path, functions: dict[str, tuple[str, str]]) -> Path:
    """A /sys/bus/pci/devices tree: address -> (vendor, class)."""
    for address, (vendor, device_class) in functions.items():
        (root / address).mkdir(parents=True)
        (root / address / "vendor").write_text(vendor + "\n")
        (root / address / "class").write_text(device_class + "\n")
    return root


def test_nvidia_gpus_are_counted_on_the_pci_bus(tmp_path: Path) -> None:
    from gpudiag.export import pci

    assert pci.nvidia_gpus(tmp_path / "absent") is None  # no sysfs: nobody knows
    cpu_node = fake_pci(
        tmp_path / "cpu", {"0000:00:00.0": ("0x8086", "0x060000"), "0000:02:00.1": ("0x10de", "0x040300")}
    )
    assert pci.nvidia_gpus(cpu_node) == 0  # an NVIDIA HDMI audio function is not a GPU
    gpu_node = fake_pci(
        tmp_path / "gpu", {"0000:18:00.0": ("0x10de", "0x030200"), "0000:3b:00.0": ("0x10de", "0x030000")}
    )
    assert pci.nvidia_gpus(gpu_node) == 2


def test_npd_says_unknown_on_a_node_without_gpus_and_a_problem_on_one_without_a_driver() -> None:
    from gpudiag.replay.fixtures import load

    no_driver = load("no-driver")[0]
    healthy = load("h100x8-healthy")[0]
    assert textfile.gpu_absent(no_driver, 0) is True  # nothing on the bus either: a CPU-only node
    assert textfile.gpu_absent(no_driver, 2) is False  # GPUs on the bus, no driver: a problem
    assert textfile.gpu_absent(no_driver, None) is False  # cannot tell: the checks' verdict stands
    assert textfile.gpu_absent(healthy, 0) is False  # NVML sees GPUs: they are there
    failed = [CheckResult("nvml.init", "Driver and NVML", Status.FAIL, "driver not loaded")]
    assert textfile.npd_verdict(failed, strict=False, notes=[], no_gpu=True) == (textfile.NO_GPU, 2)
    assert textfile.npd_verdict(failed, strict=False, notes=[])[1] == 1


def test_npd_on_this_machine_is_unknown_without_gpus_on_the_bus(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live path: with no NVIDIA GPU on the (fake) PCI bus and none that NVML sees, NPD hears
    "unknown"; where NVML does see GPUs (a GPU machine), the checks' verdict stands."""
    from gpudiag.export import pci
    from tests.conftest import gpu_unavailable_reason

    monkeypatch.setattr(pci, "PCI_DEVICES", fake_pci(tmp_path, {"0000:00:00.0": ("0x8086", "0x060000")}))
    code, out, _ = cli(*NPD_CHECKS, "--npd")
    if gpu_unavailable_reason():
        assert (code, out) == (2, textfile.NO_GPU + "\n")
    else:
        assert code in (0, 1) and out != textfile.NO_GPU + "\n"
