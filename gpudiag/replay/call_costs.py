"""What each NVML call costs on a real driver, for a fake that should cost as much (opt-in).

The fake's answers cost microseconds of Python; a driver's cost ioctls into the kernel module, and
some (nvmlDeviceValidateInforom) checksum the InfoROM. With ``GPUDIAG_FAKE_NVML_COSTS=h200`` in the
environment (or ``FakeNvml(..., costs=H200)``), every C function of the fake spins on the calling
thread's CPU clock for its cost before it answers, so a benchmark's CPU and wall time include what
the H200 charged. Never on in ordinary tests: only a benchmark or a person asks for it.

Sources (NVIDIA H200, driver 580.159.04, 16 cores, Firecracker VM;
/work/shared/hardware/h200-driver580/runs/ and its README):

- ``nvmlDeviceValidateInforom``: 70 ms, its own time in the cProfile of ``gpudiag list --json``
  (profile-list-json.txt; one GPU, one call), which ``list`` does not make.
- every other call: 0.31 ms of CPU. The stored profiles keep only their 18 costliest lines by
  cumulative time, so no per-function figure survives for the cheap calls; this one is derived
  from exporter-cpu.txt instead: a native scrape of that one GPU cost 12.2 ms of CPU (100
  scrapes), and the same exporter on the fake of that machine (h200-driver580-idle) makes 35 C
  calls per scrape and spends ~1.2 ms of its own, so (12.2 - 1.2) / 35 = 0.31 ms a call. The DCGM
  scrape agrees: 11.3 ms, 30 calls, (11.3 - 1.1) / 30 = 0.34 ms. A mean, not a per-call truth:
  a call that costs more on the driver (a list query, an ECC counter) is charged the same here.

``python benchmarks/nvml_call_costs.py`` on a GPU machine measures each call the exporter and a
full read make, and prints the table to put here in place of the mean.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

ENV = "GPUDIAG_FAKE_NVML_COSTS"

# Seconds of CPU per call of each C function; DEFAULT for one not named.
H200: Mapping[str, float] = {"nvmlDeviceValidateInforom": 0.070}
H200_DEFAULT = 0.00031


class CallCosts:
    """The cost of each C function (seconds), by symbol, with a default for the rest."""

    def __init__(self, costs: Mapping[str, float], default: float) -> None:
        self.costs = dict(costs)
        self.default = default

    def of(self, symbol: str) -> float:
        return self.costs.get(symbol, self.default)


PROFILES: dict[str, CallCosts] = {"h200": CallCosts(H200, H200_DEFAULT)}


def from_environment(environ: Mapping[str, str] | None = None) -> CallCosts | None:
    """The profile ``GPUDIAG_FAKE_NVML_COSTS`` names (``h200``), None when unset or empty."""
    name = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
    if not name:
        return None
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"{ENV}={name!r}: known profiles are {', '.join(sorted(PROFILES))}") from None


def spin(seconds: float, clock: Callable[[], float] = time.thread_time) -> None:
    """Spend ``seconds`` of this thread's CPU (a driver's ioctl is CPU the caller pays, in the kernel):
    on a loaded machine the wall time is longer, the CPU the same."""
    end = clock() + seconds
    while clock() < end:
        pass


def charged(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``function``, costing ``seconds`` of CPU per call before it answers."""
    if seconds <= 0:
        return function

    def costly(*args: Any) -> Any:
        spin(seconds)
        return function(*args)

    return costly
