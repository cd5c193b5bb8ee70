"""The hardware acceptance (``python -m tests.acceptance``): offline against the H100 captures here,
online on any machine with NVIDIA GPUs (marked ``gpu``). ``pytest -m acceptance`` runs both."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import acceptance
from tests.conftest import Cli
from tests.hardware import compare

pytestmark = pytest.mark.acceptance
CAPTURE = acceptance.CAPTURE


def _in_process(*args: str, replay: str | None = None, env: Any = None) -> subprocess.CompletedProcess[str]:
    """gpudiag run in this process (a replay needs no child): the offline run in seconds."""
    code, out, err = Cli()(*(["--replay", replay] if replay else []), *args, width=160)
    return subprocess.CompletedProcess(list(args), code, out, err)


def test_offline_the_captured_h100_matches_nvidia_smi_but_for_moments_and_what_nvml_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acceptance, "gpudiag", _in_process)
    results = acceptance.run(tmp_path, offline=True)
    summary = (tmp_path / "acceptance-summary.txt").read_text()
    assert [d for r in results for d in r.failures] == [], summary
    by_check = {r.check: r for r in results}
    q = by_check["-q (labels and values)"]
    assert q.compared >= 200
    kinds = {d.where: d.kind for d in q.differences}
    # Every label of nvidia-smi -q is there in its order; the values differ only where the GPU moved
    # between the two reads, or where nvidia-smi reads outside NVML.
    assert set(kinds.values()) <= {compare.MOMENT, compare.NOT_IN_NVML}
    assert {w for w, k in kinds.items() if k == compare.NOT_IN_NVML} == {"GPU Part Number", "Sparse Operation Mode"}
    xml = [r for r in results if r.check.startswith("-q -x")]
    assert len(xml) == 2 and all(r.compared >= 480 for r in xml)
    query = by_check["--query-gpu (every field)"]
    assert query.compared == 214
    assert {d.kind for d in query.differences} <= {compare.MOMENT, compare.BOARD, compare.NOT_RECORDED}
    assert by_check["visible (against CUDA)"].compared == len(acceptance.CUDA_TRUTH_OFFLINE)
    assert "moment" in summary and (tmp_path / "gpudiag-list-q.txt").exists()


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


@pytest.mark.gpu
@pytest.mark.slow
def test_on_this_gpu_machine_gpudiag_matches_the_machine_itself(tmp_path: Path) -> None:
    """The whole acceptance on real hardware: capture at one moment, then compare (about 5 minutes)."""
    assert acceptance.main([str(tmp_path)]) == 0, (tmp_path / "acceptance-summary.txt").read_text()
