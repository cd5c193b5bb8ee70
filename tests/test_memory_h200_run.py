"""The real H200 training run replayed: each figure from one moment, rates from the tracker's step times.

The run (tests/data/h200-training/, made replayable by tests/h200_training_run.py) kept 2 GiB more per
step at a steady 4 steps/s; NVML was read every 0.5 s and the tracker published every 2 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudiag.cli import memory_cmd
from gpudiag.track import entries
from tests import h200_training_run as run
from tests.conftest import Cli

MiB, GiB = 1024**2, 1024**3
SNAPSHOT = str(run.SNAPSHOT.relative_to(run.ROOT))
OOM_FILE = run.OOM


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture(autouse=True)
def no_tracker_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(entries.DIR_ENV, raising=False)


@pytest.fixture
def instant(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(memory_cmd, "CLOCK", memory_cmd.Clock(clock.now, clock.sleep, clock.now))


def test_the_replayable_run_is_what_the_script_makes_of_the_capture() -> None:
    for path, text in run.files().items():
        assert path.read_text() == text, f"{path} is stale: python -m tests.h200_training_run"


# --- the post-mortem ------------------------------------------------------------------


def test_the_post_mortem_splits_nvml_at_the_oom_by_the_allocator_at_the_oom(cli: Cli) -> None:
    """The allocator held 138.0 GiB at the OOM and NVML 138.6 GiB half a second later: 586 MiB of
    context, not the 12.5 GiB a two-second-old publication beside NVML's figure made of it."""
    code, out, _ = cli("memory", "--postmortem", str(OOM_FILE), width=400)
    holders = next(line for line in out.splitlines() if line.startswith("Largest holders"))
    assert code == 0
    assert holders == (
        "Largest holders on that GPU (NVML 0.5 s after the OOM): PID 456 (this process) 138.6 GiB (its allocator "
        "at the OOM: 138.0 GiB tensors, 0 Bytes cached free; 586.0 MiB context and other)"
    )


def test_a_machine_view_taken_long_after_the_oom_gives_no_context_figure(cli: Cli, tmp_path: Path) -> None:
    doc = json.loads(OOM_FILE.read_text())
    doc["machine"]["timestamp"] = doc["at"] + 60  # the program caught the OOM and went on: NVML is another moment
    late = tmp_path / "late.json"
    late.write_text(json.dumps(doc))
    out = cli("memory", "--postmortem", str(late), width=400)[1]
    holders = next(line for line in out.splitlines() if line.startswith("Largest holders"))
    assert "(NVML 60.0 s after the OOM)" in holders and "context" not in holders


def test_the_machine_view_of_a_post_mortem_takes_this_process_at_the_same_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The publisher adds the machine with the entry it has just taken, not its file from the last publication."""
    from gpudiag.memory.postmortem import machine_document
    from gpudiag.replay.recording import Recording

    recording = Recording(run.RECORDING)
    recording.position = 20
    own = dict(recording.frame.track[0])
    own["devices"] = [{**own["devices"][0], "allocated_bytes": GiB, "reserved_bytes": 2 * GiB}]
    monkeypatch.setenv("GPUDIAG_REPLAY", SNAPSHOT)
    (process,) = machine_document(own)["processes"]
    assert process["torch"]["allocated_bytes"] == GiB
    assert process["torch"]["other_bytes"] == process["used_bytes"] - 2 * GiB
