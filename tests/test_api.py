"""gpudiag.api: the public API's reads, checks, watch and collector, on replays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudiag import api

ROOT = Path(__file__).resolve().parent.parent


def test_read_machine_on_a_replay_is_the_machine_list_reads() -> None:
    machine = api.read_machine(replay="h100x8-healthy")
    assert len(machine.gpus) == 8
    assert machine.source == "replay:h100x8-healthy"
    from gpudiag.cli import list_cmd

    assert list_cmd.read_machine is api.read_machine  # `gpudiag list` reads through the public API


def test_both_paths_of_list_read_through_the_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudiag import argv
    from gpudiag.cli import plain_front

    calls: list[tuple[str | None, Any]] = []
    real = api.read_machine

    def spy(replay: str | None = None, **kwargs: Any) -> api.Machine:
        calls.append((replay, kwargs.get("only")))
        return real(replay, **kwargs)

    monkeypatch.setattr(api, "read_machine", spy)
    found = plain_front.read(
        argv.read(["--replay", "h100x8-healthy", "list", "--query", "name", "--format", "csv"]), {}
    )
    assert found is not None and plain_front.run(found) == 0
    assert calls and calls[0][0] == "h100x8-healthy" and calls[0][1] is not None  # the query's fields only
    assert capsys.readouterr().out.count("NVIDIA H100 80GB HBM3") == 8


def test_read_machine_reads_only_the_groups_asked_for() -> None:
    gpu = api.read_machine(replay="h100x8-healthy", facts={api.FactGroup.MEMORY}).gpus[0]
    assert gpu.memory.ok
    assert gpu.temperature_c.reason is api.Reason.NOT_READ


def test_replay_env_decides_when_replay_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUDIAG_REPLAY", "v100x4-tutorial")
    assert len(api.read_machine().gpus) == 4


def test_an_unreadable_replay_is_a_gpudiag_error() -> None:
    with pytest.raises(api.GpudiagError):
        api.read_machine(replay="no-such-example")


@pytest.mark.slow
def test_the_issue_one_liner_prints_8_and_imports_no_torch_typer_rich_or_textual() -> None:
    program = (
        "import sys\n"
        "from gpudiag import api\n"
        "print(len(api.read_machine(replay='h100x8-healthy').gpus))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'typer', 'rich', 'textual', 'json'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout == "8\n[]\n"


def test_run_checks_is_check_without_torch_and_says_its_verdict() -> None:
    run = api.run_checks(replay="a100-ecc-errors")
    assert run.facts.torch.reason is not None  # torch not started
    failed = {r.id for r in run.results if r.status is api.Status.FAIL}
    assert "health.ecc" in failed
    assert api.exit_code(run) is api.ExitCode.FAILED
    healthy = api.run_checks(replay="h100x8-healthy", only=["health"])
    assert {r.id.split(".")[0] for r in healthy.results} == {"health"}
    assert api.exit_code(healthy) is api.ExitCode.OK


def test_run_checks_judges_torch_only_when_asked() -> None:
    def arch(run: api.CheckRun) -> api.Status:
        return next(r.status for r in run.results if r.id == "compat.arch")

    without = api.run_checks(replay="p100-torch-cu128")  # a torch build without the P100's sm_60
    assert arch(without) is api.Status.SKIP and api.exit_code(without) is api.ExitCode.OK
    with_torch = api.run_checks(replay="p100-torch-cu128", torch=True)  # the replay's recorded torch
    assert arch(with_torch) is api.Status.FAIL and api.exit_code(with_torch) is api.ExitCode.FAILED


def test_run_checks_that_select_nothing_is_a_usage_error() -> None:
    with pytest.raises(api.GpudiagError) as error:
        api.run_checks(replay="h100x8-healthy", only=["no.such.check"])
    assert error.value.code is api.ExitCode.USAGE


def test_health_is_the_nvml_only_checks_and_reads_nothing() -> None:
    machine = api.read_machine(replay="a100-ecc-errors")
    results = api.health(machine)
    from gpudiag.checks.rules import EXPORTER_CHECKS

    assert {r.id for r in results} <= set(EXPORTER_CHECKS)
    assert any(r.id == "health.ecc" and r.status is api.Status.FAIL for r in results)
    assert api.health(api.read_machine(replay="no-driver")) == []


def test_watch_plays_a_replay_series_without_waiting() -> None:
    samples = list(api.watch(interval=60.0, replay="h100x8-training-64procs", count=3))
    assert [s.number for s in samples] == [0, 1, 2]
    assert samples[0].at < samples[1].at < samples[2].at  # the series' own times
    utils = [s.machine.gpus[0].utilization.value for s in samples]
    assert len({u.gpu_percent for u in utils if u is not None}) > 1  # the series moves
    assert len(samples[0].memory.processes) == 64
    assert samples[0].health  # the NVML-only checks ride along


@pytest.mark.parametrize(("interval", "count"), [(0.05, None), (float("nan"), None), (1.0, 0)])
def test_watch_refuses_what_no_watch_takes(interval: float, count: int | None) -> None:
    with pytest.raises(ValueError):
        next(api.watch(interval, replay="h100x8-healthy", count=count))


def test_a_replay_series_starts_over_at_its_end() -> None:
    with api.Sampler("h100x8-healthy") as sampler:
        frames = sampler._frames
        assert frames > 1
        first = sampler.sample()
        for _ in range(frames - 1):
            sampler.sample()
        again = sampler.sample()
    assert again.machine.gpus[0].utilization == first.machine.gpus[0].utilization


def test_sm_share_where_nvml_samples_it() -> None:
    first, sample = api.watch(replay="h100-driver580-busy", count=2)  # NVML's samples are since the last read
    assert first.sm_percent(0, 485) is None
    pids = [row.process.pid for row in sample.memory.processes]
    assert pids and sample.sm_percent(0, pids[0]) is not None
    assert sample.sm_percent(0, -1) is None


def test_collector_keys_are_flat_floats_with_allocator_and_forecast() -> None:
    with api.Collector(replay="h100-leak-per-step", interval=0) as collector:
        for _ in range(3):
            figures = collector.collect()
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in figures.items())
    assert figures["gpudiag/gpu:0/memory_total (MiB)"] == pytest.approx(81559)
    assert "gpudiag/pid:4242/gpu:0/allocated (MiB)" in figures
    assert "gpudiag/pid:4242/gpu:0/time_to_oom (s)" in figures
    assert figures["gpudiag/pid:4242/gpu:0/growth_per_step (MiB)"] == 48.0


def test_collector_reads_no_sooner_than_its_interval_and_keeps_to_its_pids() -> None:
    with api.Collector(replay="h100x8-training-64procs", pids=[50000], prefix="train/", interval=3600) as c:
        first = c.collect()
        second = c.collect()
        assert c._sampler.number == 1  # the second call read nothing
    assert first == second
    pids = {k.split("/")[1] for k in first if k.startswith("train/pid:")}
    assert pids == {"pid:50000"}
    assert {k.split("/")[1] for k in first if k.startswith("train/gpu:")} == {"gpu:0"}  # the GPU it uses


def test_collector_omits_what_is_not_known() -> None:
    with api.Collector(replay="geforce-no-ecc-power", interval=0) as c:
        figures = c.collect()
    assert not any("power_usage" in k for k in figures)  # not supported: no key, never a made-up 0


def test_the_package_is_typed() -> None:
    assert (ROOT / "gpudiag" / "py.typed").exists()
    import tomllib

    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["gpudiag"]  # hatch ships every file of the package, py.typed included
    assert "exclude" not in wheel


def test_a_live_watch_keeps_to_the_interval_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Live (here NVML is absent: the machine says so, no exception), a slow sample shortens the next
    wait and one that overruns whole intervals skips them, as every gpudiag watch does."""
    clock = {"now": 100.0}
    waits: list[float] = []
    durations = iter([0.5, 2.5, 0.0, 0.0])  # how long each sample takes

    def sample(self: api.Sampler, real: Any = api.Sampler.sample) -> api.Sample:
        clock["now"] += next(durations)
        return real(self)

    monkeypatch.delenv("GPUDIAG_REPLAY", raising=False)
    monkeypatch.setattr(api.Sampler, "sample", sample)
    monkeypatch.setattr(api.time, "monotonic", lambda: clock["now"])

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock["now"] += seconds

    monkeypatch.setattr(api.time, "sleep", sleep)
    samples = list(api.watch(interval=1.0, count=4))
    assert samples[0].machine.nvml.status is not api.NvmlStatus.OK or samples[0].machine.gpus
    # started at 100: sample 0 ends at 100.5 -> wait 0.5; sample 1 ends at 103.5 (ticks 102, 103 missed)
    # -> next tick 104: wait 0.5; sample 2 at 104 -> wait 1.0
    assert waits == [0.5, 0.5, 1.0]
