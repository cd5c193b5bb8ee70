"""The fake NVML's per-call costs (gpudiag.replay.call_costs): opt-in, charged per C function, off by default."""

from __future__ import annotations

import time

import pytest

from gpudiag.replay import call_costs
from gpudiag.replay.call_costs import ENV, CallCosts, from_environment
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.replay.fixtures import load

MACHINE = "h200-driver580-idle"


def cpu_of(action: object) -> float:
    start = time.thread_time()
    action()  # type: ignore[operator]
    return time.thread_time() - start


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert FakeNvml(load(MACHINE)[0]).costs is None
    assert from_environment({ENV: ""}) is None


def test_the_environment_names_the_h200_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "H200")
    fake = FakeNvml(load(MACHINE)[0])
    assert fake.costs is call_costs.PROFILES["h200"]
    assert fake.costs.of("nvmlDeviceValidateInforom") == 0.070
    assert fake.costs.of("nvmlDeviceGetTemperature") == call_costs.H200_DEFAULT
    with pytest.raises(ValueError, match="known profiles are h200"):
        from_environment({ENV: "h100"})


def test_each_c_call_costs_its_cpu_and_answers_the_same() -> None:
    machine = load(MACHINE)[0]
    costs = CallCosts({"nvmlDeviceValidateInforom": 0.030}, 0.002)
    free, costly = FakeNvml(machine), FakeNvml(machine, costs=costs)
    for lib in (free, costly):
        lib.nvmlInit()
    handles = [lib.nvmlDeviceGetHandleByIndex(0) for lib in (free, costly)]
    assert free.nvmlDeviceGetUUID(handles[0]) == costly.nvmlDeviceGetUUID(handles[1])
    # nvidia-ml-py's wrapper makes one C call per answer here: charged the default
    assert cpu_of(lambda: costly.nvmlDeviceGetTemperature(handles[1], 0)) >= 0.002
    assert cpu_of(lambda: free.nvmlDeviceGetTemperature(handles[0], 0)) < 0.002
    assert cpu_of(lambda: costly.nvmlDeviceValidateInforom(handles[1])) >= 0.030


def test_spin_spends_cpu_not_only_wall_time() -> None:
    assert cpu_of(lambda: call_costs.spin(0.005)) >= 0.005
