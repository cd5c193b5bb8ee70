"""NVML's GPU performance monitoring (GPM, Hopper and newer): the figures DCGM exports as its
profiling fields (``DCGM_FI_PROF_*``: SM, tensor and FP pipes, DRAM, PCIe and NVLink traffic),
read without DCGM through an open NVML session.

GPM answers for the window between two samples: ``nvmlGpmSampleGet`` fills a buffer from
``nvmlGpmSampleAlloc``, ``nvmlGpmMetricsGet`` turns two of them into the metrics of
:data:`gpudiag.readings.GPM_METRICS`. A reader never waits where it reads again: each GPU keeps
its latest samples, and a read's figures are for the window since the newest kept sample at least
``window_s`` old (the oldest one where none is), as DCGM keeps samples for its own GPM fields. So a
scrape of ``gpudiag exporter`` is measured since an earlier scrape and never blocks; its first
scrape has no figures yet. A one-shot read (``snapshot``, ``exporter --once``) has no earlier
sample: it samples every GPU, waits ``window_s`` once for them all, and samples again.

Whether a GPU has GPM is asked once per NVML session (``nvmlGpmQueryDeviceSupport``); a GPU
without it reads "not supported", never zeros. Buffers are freed when the session closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from gpudiag.model import Profiling, Reading, Reason
from gpudiag.readings import GPM_METRICS

ONE_SHOT_WINDOW_S = 0.1  # a one-shot read waits this long between its two samples
KEEP = 3  # samples kept per GPU at most: the baseline, a newer one, the latest
NO_GPM = "NVML's GPU performance monitoring (GPM) needs a Hopper or newer data-centre GPU"
FIRST_SAMPLE = "first GPM sample taken: the figures come with the next read"


class Session(Protocol):
    """What GPM needs of an NVML session (probe.nvml.NvmlSession)."""

    @property
    def lib(self) -> Any: ...

    def read(self, function: str, *args: Any, convert: Callable[[Any], Any] | None = None) -> Reading[Any]: ...

    def missing_for(self, code: int, what: str) -> Reading[Any]: ...


class GpuSamples:
    """One GPU's GPM state for one NVML session: its support, kept samples (time, buffer), spare buffers."""

    def __init__(self) -> None:
        self.support: Reading[bool] | None = None
        self.kept: list[tuple[float, Any]] = []
        self.spare: list[Any] = []


class GpmReader:
    """Reads :class:`~gpudiag.model.Profiling` for the GPUs of one session.

    ``wait``: a GPU without a kept sample makes the read sample every GPU and wait ``window_s``
    (one-shot readers); otherwise it takes its first sample and says the figures come next time.
    """

    def __init__(
        self,
        session: Session,
        window_s: float,
        wait: bool,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._session = session
        self._lib = session.lib
        self.window_s = window_s
        self.wait = wait
        self._clock = clock or time.monotonic
        self._sleep = sleep or time.sleep
        self._query: Any = None  # the nvmlGpmMetricsGet_t struct, made once and reused

    def read(
        self, samples: GpuSamples, h: Any, everyone: Callable[[], Iterable[tuple[GpuSamples, Any]]]
    ) -> Reading[Profiling]:
        """This GPU's figures over the window since a kept sample (``everyone``: every GPU's state
        and handle, for a one-shot read's first samples)."""
        support = self._support(samples, h)
        if support.value is None:
            return Reading.missing_like(support)
        if not support.value:
            return Reading.missing(Reason.NOT_SUPPORTED, NO_GPM)
        if not samples.kept:
            if not self.wait:
                first = self._sample(samples, h)
                if first.value is not None:
                    samples.kept.append(first.value)
                return (
                    Reading.missing_like(first)
                    if first.value is None
                    else Reading.missing(Reason.UNAVAILABLE, FIRST_SAMPLE)
                )
            self._first_samples(everyone())
            self._sleep(self.window_s)
        taken = self._sample(samples, h)
        if taken.value is None:
            return Reading.missing_like(taken)
        now, current = taken.value
        older = [kept for kept in samples.kept if now - kept[0] >= self.window_s]
        since, baseline = older[-1] if older else samples.kept[0] if samples.kept else (now, current)
        figures = self._metrics(baseline, current, now - since) if baseline is not current else None
        samples.kept.append((now, current))
        # Keep the newest sample already a window old, and those after it: the next read's baselines.
        while (len(samples.kept) > 1 and now - samples.kept[1][0] >= self.window_s) or len(samples.kept) > KEEP:
            samples.spare.append(samples.kept.pop(0)[1])
        if figures is None:
            return Reading.missing(Reason.UNAVAILABLE, FIRST_SAMPLE)
        return figures

    def free(self, samples: GpuSamples) -> None:
        """Give the GPU's buffers back to NVML (before the session shuts NVML down)."""
        lib = self._lib
        for buffer in [*(b for _, b in samples.kept), *samples.spare]:
            with contextlib.suppress(lib.NVMLError):  # nothing to do about it: the session is closing
                lib.nvmlGpmSampleFree(buffer)
        samples.kept.clear()
        samples.spare.clear()

    # -- the calls ---------------------------------------------------------------------

    def _support(self, samples: GpuSamples, h: Any) -> Reading[bool]:
        if samples.support is None:
            found = self._session.read("nvmlGpmQueryDeviceSupport", h, convert=lambda s: bool(s.isSupportedDevice))
            if found.value is not None:
                samples.support = found  # an answer cannot change while NVML stays open; an error may
            return found
        return samples.support

    def _sample(self, samples: GpuSamples, h: Any) -> Reading[tuple[float, Any]]:
        """A new sample of the GPU (time, buffer), in a spare buffer or a new one."""
        if samples.spare:
            buffer = samples.spare.pop()
        else:
            made: Reading[Any] = self._session.read("nvmlGpmSampleAlloc")
            if made.value is None:
                return Reading.missing_like(made)
            buffer = made.value
        got = self._session.read("nvmlGpmSampleGet", h, buffer)
        if got.value is None:
            samples.spare.append(buffer)
            return Reading.missing_like(got)
        return Reading.of((self._clock(), buffer))

    def _first_samples(self, everyone: Iterable[tuple[GpuSamples, Any]]) -> None:
        """A sample of every GPU with GPM that has none, for a one-shot read's one wait. A GPU that
        fails here is left to its own read, which says why."""
        lib = self._lib
        for samples, h in everyone:
            if samples.kept:
                continue
            try:
                if samples.support is None:
                    samples.support = Reading.of(bool(lib.nvmlGpmQueryDeviceSupport(h).isSupportedDevice))
                if samples.support.value:
                    buffer = samples.spare.pop() if samples.spare else lib.nvmlGpmSampleAlloc()
                    lib.nvmlGpmSampleGet(h, buffer)
                    samples.kept.append((self._clock(), buffer))
            except Exception:  # NVML's error or an unexpected answer: the GPU's own read says which
                continue

    def _metrics(self, baseline: Any, current: Any, window_s: float) -> Reading[Profiling]:
        lib = self._lib
        if self._query is None:  # made once: the struct, its metric ids, and its slots' views
            query = lib.c_nvmlGpmMetricsGet_t()
            query.version = lib.NVML_GPM_METRICS_GET_VERSION
            query.numMetrics = len(GPM_METRICS)
            slots = [query.metrics[i] for i in range(len(GPM_METRICS))]
            for slot, (_, metric, _) in zip(slots, GPM_METRICS, strict=True):
                slot.metricId = metric
            self._query = (query, slots)
        query, slots = self._query
        query.sample1, query.sample2 = baseline, current
        # The figures are decoded from the struct NVML filled, under the call's guard.
        return self._session.read("nvmlGpmMetricsGet", query, convert=lambda _: self._figures(slots, window_s))

    def _figures(self, slots: list[Any], window_s: float) -> Profiling:
        values: dict[str, Reading[float]] = {}
        success = self._lib.NVML_SUCCESS
        get = ctypes.Structure.__getattribute__  # past nvidia-ml-py's bytes check on every attribute
        for slot, (name, metric, factor) in zip(slots, GPM_METRICS, strict=True):
            code, value = int(get(slot, "nvmlReturn")), float(get(slot, "value"))
            if code != success:
                values[name] = self._session.missing_for(code, f"GPM metric {metric}")
            elif math.isnan(value) or value < 0:
                values[name] = Reading.missing(Reason.UNAVAILABLE, f"GPM metric {metric}: no value for this window")
            else:
                values[name] = Reading(value=value * factor)
        return Profiling(window_s=round(window_s, 6), **values)
