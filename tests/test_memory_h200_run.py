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
    own["recent"] = [[own["updated_at"] - 2, 0, GiB, 2 * GiB, GiB]]  # reserved held still: the split is a figure
    monkeypatch.setenv("GPUDIAG_REPLAY", SNAPSHOT)
    (process,) = machine_document(own)["processes"]
    assert process["torch"]["allocated_bytes"] == GiB
    assert process["torch"]["other_bytes"] == process["used_bytes"] - 2 * GiB


# --- rates from the tracker's step times ---------------------------------------------------


@pytest.fixture(scope="module")
def h200_log(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replayed run watched at 0.5 s, as it was: four samples per publication (made once)."""
    log = tmp_path_factory.mktemp("h200") / "run.jsonl"
    clock = FakeClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(entries.DIR_ENV, raising=False)
        mp.setattr(memory_cmd, "CLOCK", memory_cmd.Clock(clock.now, clock.sleep, clock.now))
        code, _, _ = cli(
            "--replay", SNAPSHOT, "memory", "--count", "49", "--interval", "0.5", "--json", "--log", str(log)
        )
    assert code == 0
    return log


@pytest.fixture(scope="module")
def figure(h200_log: Path) -> object:
    pytest.importorskip("matplotlib")
    from gpudiag.memory.log import read
    from gpudiag.render.memory_plot import draw

    return draw(read(h200_log))


def test_publications_come_less_often_than_the_watch_samples(h200_log: Path) -> None:
    samples = [json.loads(line) for line in h200_log.read_text().splitlines()]
    counts = [s["processes"][0]["steps"]["count"] for s in samples if s["processes"][0].get("steps")]
    assert len(counts) > 3 * len(set(counts))  # the same publication seen by several samples


def test_the_step_rate_is_the_trackers_steady_four_per_second(h200_log: Path) -> None:
    from gpudiag.memory.log import read
    from gpudiag.render.memory_plot import step_rates

    series = read(h200_log).steps[456]
    rates = step_rates(series)
    assert len(rates) == len(set(series.values["step"])) == 9  # one point per publication
    assert all(3.9 < r < 4.05 for r in rates), rates
    samples = [json.loads(line) for line in h200_log.read_text().splitlines()]
    stepped = [s["processes"][0]["steps"] for s in samples if s["processes"][0].get("steps")]
    assert series.times == sorted({s["last_step_at"] for s in stepped})  # at the tracker's step times


def test_the_plotted_step_rate_is_steady(figure: object) -> None:
    steps_axis = figure.axes[-1]  # type: ignore[attr-defined]
    assert steps_axis.get_ylabel() == "steps/s"
    (line,) = [ln for ln in steps_axis.get_lines() if ln.get_label() == "PID 456"]
    assert all(3.9 < y < 4.05 for y in line.get_ydata())


def test_a_log_from_before_the_step_times_draws_one_rate_per_publication(h200_log: Path, tmp_path: Path) -> None:
    from gpudiag.memory.log import read
    from gpudiag.render.memory_plot import step_rates

    old = tmp_path / "old.jsonl"
    lines = []
    for line in h200_log.read_text().splitlines():
        sample = json.loads(line)
        for p in sample["processes"]:
            if p.get("steps"):
                p["steps"] = {"count": p["steps"]["count"]}  # neither the tracker's rate nor its step time
        lines.append(json.dumps(sample))
    old.write_text("\n".join(lines) + "\n")
    rates = step_rates(read(old).steps[456])[1:]
    assert all(2.5 < r < 5.0 for r in rates), rates  # between publications, never 0 then 16


# --- the replayed watch: it ends with the recording, and forecasts nothing after the OOM ----------


def _watch(cli: Cli, *args: str) -> tuple[int, list[dict[str, object]], str]:
    code, out, err = cli("--replay", SNAPSHOT, "memory", "--interval", "0.5", "--json", *args)
    return code, [json.loads(line) for line in out.splitlines()], err


def test_a_replayed_watch_ends_when_its_recording_does(cli: Cli, instant: None) -> None:
    frames = len(run.RECORDING.read_text().splitlines()) - 1
    for args in (("--count", "1000"), ("--watch",)):
        code, samples, err = _watch(cli, *args)
        assert code == 0 and len(samples) == frames == 49, args
        assert err == f"gpudiag: the recording ended after {frames} sample(s)\n"
    code, samples, err = _watch(cli, "--count", "10")
    assert code == 0 and len(samples) == 10 and err == ""  # --count first: no word about the recording


def test_nothing_is_forecast_after_the_oom(cli: Cli, instant: None) -> None:
    _, samples, _ = _watch(cli, "--count", "100")
    ooms = [(s["processes"][0].get("torch") or {}).get("ooms") for s in samples]  # type: ignore[index, union-attr]
    first = ooms.index(1)
    before, after = samples[:first], samples[first:]
    assert any(s["processes"][0]["forecast"] for s in before)  # type: ignore[index]
    for s in after:
        assert s["gpus"][0]["forecast"] is None  # type: ignore[index]
        assert all(p["forecast"] is None for p in s["processes"])  # type: ignore[union-attr]
        assert not [line for line in s["insights"] if "forecast" in line]  # type: ignore[union-attr]


def test_the_forecast_on_the_real_run_said_when_the_oom_came(cli: Cli, instant: None) -> None:
    """At the sample that first saw step 23 the watch forecast the OOM 11.2 s (44.6 steps) ahead; the
    allocator's observer caught it 11.2 s later, at step 69 (the one-shot `memory` beside the run said
    ~12 s / ~47 steps a little earlier)."""
    oom_at = json.loads(OOM_FILE.read_text())["at"]
    _, samples, _ = _watch(cli, "--count", "100")
    seen = next(s for s in samples if (s["processes"][0].get("steps") or {}).get("count") == 23)  # type: ignore[index, union-attr]
    forecast = seen["processes"][0]["forecast"]  # type: ignore[index]
    assert forecast["basis"] == "steps" and forecast["steps_to_full"] == pytest.approx(44.6, abs=0.1)
    assert seen["timestamp"] + forecast["full_in_s"] == pytest.approx(oom_at, abs=0.2)  # type: ignore[operator]
    assert 23 + forecast["steps_to_full"] == pytest.approx(69, abs=2)


# --- the picture: markers, legend, forecast -------------------------------------------------


def test_the_oom_marker_is_drawn_over_the_allocator_retry(figure: object) -> None:
    from matplotlib.colors import to_hex

    for ax in figure.axes:  # type: ignore[attr-defined]
        marks = {to_hex(line.get_color()): line for line in ax.get_lines()}
        oom, retry = marks[to_hex("tab:red")], marks[to_hex("tab:orange")]
        assert list(oom.get_xdata()) == list(retry.get_xdata())  # the same moment, as on the H200
        assert oom.get_zorder() > retry.get_zorder() and oom.get_linewidth() > retry.get_linewidth()
        assert oom.get_zorder() > max(line.get_zorder() for line in ax.get_lines() if line not in (oom, retry))


def test_the_process_legend_names_whole_words(figure: object) -> None:
    process_axis = figure.axes[1]  # type: ignore[attr-defined]
    texts = [t.get_text() for t in process_axis.get_legend().get_texts()]
    assert texts[0] == "PID 456 on GPU 0 python3 -m gpudiag.track …/leak.py"
    command = ["python3", "-m", "gpudiag.track", "/work/steering/.gpu/leak.py"]
    assert all(w in command or w.startswith("…") for w in texts[0].split()[5:])


def test_the_forecast_is_drawn_to_where_the_oom_came(figure: object, h200_log: Path) -> None:
    from gpudiag.memory.log import read

    run_ = read(h200_log)
    oom_at = next(e.at for e in run_.events if e.kind == "oom") - run_.start
    oom_file_at = json.loads(OOM_FILE.read_text())["at"] - run_.start
    for ax, label in ((figure.axes[0], "GPU 0 forecast (used)"), (figure.axes[1], "PID 456 forecast")):  # type: ignore[attr-defined]
        (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
        xs, ys = line.get_xdata(), line.get_ydata()
        assert xs[0] < oom_at - 10  # made seconds ahead
        assert xs[-1] == pytest.approx(oom_file_at, abs=0.5)  # and the OOM came when it said
        assert ys[-1] > 135  # GiB: at the limit
        assert label in [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.slow
def test_the_picture_of_the_h200_run(cli: Cli, h200_log: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "run.png"
    code, _, _ = cli("memory", "--plot", str(h200_log), "-o", str(png))
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- the live views: NVML's figure is split only by allocator figures of the same moment ------


def test_the_context_is_never_a_leak_counted_twice(cli: Cli, instant: None) -> None:
    """NVML read now minus the reserved memory the tracker published up to 2 s before made 0.6 GiB of
    context look like 4.6, 8.6, 12.6 and 16.6 GiB while the allocator grew 8 GiB/s; now the split is given
    only when the reserved memory was not moving, and then it is the context the post-mortem found."""
    _, samples, _ = _watch(cli, "--count", "100")
    split = [s["processes"][0]["torch"] for s in samples if s["processes"][0].get("torch")]  # type: ignore[index]
    others = [t["other_bytes"] for t in split if t["other_bytes"] is not None]  # type: ignore[index]
    assert others and all(abs(o - 586 * MiB) < 16 * MiB for o in others), [o / GiB for o in others]
    assert all(t["published_at"] for t in split)  # type: ignore[index]  # and the figures say when they were read
    out = cli("--replay", SNAPSHOT, "memory", "--count", "8", "--interval", "0.5", width=200)[1]
    last = out.split("\n\nreplay:")[-1]
    assert "context and libraries not split off while its reserved memory grows" in last


def test_the_leaking_example_ends_at_its_oom_without_a_forecast(cli: Cli, instant: None) -> None:
    """The symptom as filed: the shipped example's replay repeated its last frame forever, forecasting
    an OOM in ~6 s beside "1 out-of-memory error"."""
    code, out, err = cli("--replay", "h100-leak-per-step", "memory", "--count", "500", "--json")
    samples = [json.loads(line) for line in out.splitlines()]
    last = samples[-1]
    assert code == 0 and len(samples) == 79 and err == "gpudiag: the recording ended after 79 sample(s)\n"
    assert last["processes"][0]["torch"]["ooms"] == 1
    assert last["processes"][0]["forecast"] is None and last["gpus"][0]["forecast"] is None
    code, out, _ = cli("--replay", "h100-leak-per-step", "memory", "--count", "500", width=160)
    frame = out.split("\n\nreplay:")[-1]
    assert "1 out-of-memory error" in frame and "forecast" not in frame
