"""NVML beside the deep tests: read every second in a thread (clocks, clock events, temperature,
power) and the critical XIDs as NVML reports them; the memory error counters before and after.

A sample is tagged with the phase that was running; for a GPU it counts only once that GPU's test
has it busy (:meth:`Sampler.mark_loaded`): an idle GPU at a phase's start is not throttling.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudiag.checks.deep.facts import GpuSamples, MemoryCounters, Xid
from gpudiag.model import FactGroup, Machine

if TYPE_CHECKING:
    from gpudiag.probe.xid_watch import XidWatch

SAMPLED: frozenset[FactGroup] = frozenset(
    {FactGroup.CLOCKS, FactGroup.CLOCK_EVENTS, FactGroup.THERMAL, FactGroup.POWER}
)
COUNTED: frozenset[FactGroup] = frozenset({FactGroup.ECC, FactGroup.MEMORY_HEALTH})
INTERVAL = 1.0


def counters(machine: Machine) -> dict[int, MemoryCounters]:
    """Each GPU's memory error counters in a reading of the ECC and memory-health groups."""
    out = {}
    for gpu in machine.gpus:
        rows, pages = gpu.remapped_rows.value, gpu.retired_pages.value
        out[gpu.index] = MemoryCounters(
            ecc_corrected=gpu.ecc_errors.volatile_corrected.value,
            ecc_uncorrected=gpu.ecc_errors.volatile_uncorrected.value,
            remapped_correctable=rows.correctable if rows else None,
            remapped_uncorrectable=rows.uncorrectable if rows else None,
            remap_pending=rows.pending if rows else None,
            retired_pages=pages.single_bit + pages.double_bit if pages else None,
            retirement_pending=pages.pending if pages else None,
        )
    return out


class _Series:
    def __init__(self) -> None:
        self.samples = 0
        self.temperatures: list[int] = []
        self.powers: list[float] = []
        self.clocks: list[int] = []
        self.limit: float | None = None
        self.events: dict[int, int] = {}

    def add(self, gpu: Any) -> None:
        self.samples += 1
        if (temp := gpu.temperature_c.value) is not None:
            self.temperatures.append(temp)
        if (power := gpu.power_draw_w.value) is not None:
            self.powers.append(power)
        if (clock := gpu.clock_sm_mhz.value) is not None:
            self.clocks.append(clock)
        if (limit := gpu.power_limit_w.value) is not None:
            self.limit = limit
        bits = gpu.clock_event_reasons.value
        if bits:
            for bit in range(16):
                if bits & (1 << bit):
                    self.events[1 << bit] = self.events.get(1 << bit, 0) + 1

    def summary(self) -> GpuSamples:
        return GpuSamples(
            samples=self.samples,
            temperature_max_c=max(self.temperatures) if self.temperatures else None,
            power_max_w=max(self.powers) if self.powers else None,
            power_median_w=statistics.median(self.powers) if self.powers else None,
            power_limit_w=self.limit,
            sm_clock_min_mhz=min(self.clocks) if self.clocks else None,
            sm_clock_median_mhz=int(statistics.median(self.clocks)) if self.clocks else None,
            sm_clock_max_mhz=max(self.clocks) if self.clocks else None,
            events=dict(sorted(self.events.items())),
        )


class Sampler:
    """``read`` reads the machine (one NVML reader at a time: the caller's lock); ``xids`` is NVML's
    event set, or None when it could not be made."""

    def __init__(
        self,
        read: Callable[[frozenset[FactGroup]], Machine],
        xids: XidWatch | None,
        interval: float = INTERVAL,
    ) -> None:
        self.read, self.watch, self.interval = read, xids, interval
        self.phase = ""
        self.xids: list[Xid] = []
        self.error = ""
        self._loaded: set[int] = set()
        self._series: dict[tuple[str, int], _Series] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self.phase, self._loaded = phase, set()

    def mark_loaded(self, gpu_index: int | None) -> None:
        if gpu_index is not None:
            with self._lock:
                self._loaded.add(gpu_index)

    def sample(self) -> None:
        """One sample of every GPU that is loaded, and the XIDs since the last one."""
        found = self.watch.poll() if self.watch is not None else []
        machine = self.read(SAMPLED) if self._loaded else None
        with self._lock:
            self.xids.extend(Xid(gpu, xid, self.phase) for gpu, xid in found)
            if machine is None:
                return
            for gpu in machine.gpus:
                if gpu.index in self._loaded:
                    self._series.setdefault((self.phase, gpu.index), _Series()).add(gpu)

    def summary(self, phase: str, gpu_index: int | None) -> GpuSamples | None:
        with self._lock:
            series = self._series.get((phase, gpu_index)) if gpu_index is not None else None
            return series.summary() if series is not None else None

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.sample()
                except Exception as exc:  # never take the run down: say what is missing instead
                    self.error = f"NVML sampling stopped: {type(exc).__name__}: {exc}"
                    return

        self._thread = threading.Thread(target=loop, name="gpudiag-nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self.sample()  # the XIDs of the last moments
        if self.watch is not None:
            self.watch.close()
