"""gpudiag's public Python API: what the commands know, as typed objects (docs/api.md).

- :func:`read_machine`: the machine model (GPUs, processes, each reading a value or why it is missing);
- :func:`run_checks`: `gpudiag check`'s run and verdict (NVML, host and environment; torch only when asked);
  :func:`health`: the NVML-only checks over a machine already read (no I/O);
- :func:`watch`: an iterator of :class:`Sample` (the machine, where its memory went, forecasts);
- :class:`Collector`: a flat ``dict[str, float]`` per training step, for TensorBoard, Lightning or
  Hugging Face loggers.

Every function takes ``replay``: an example machine's name (``gpudiag examples``) or a snapshot file,
read in place of this machine; left out, ``GPUDIAG_REPLAY`` decides as it does for the CLI.
Importing this module loads neither torch nor typer nor rich. The names listed in ``__all__`` are
the stable API (docs/api.md says how versions change it).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import (
    ALL_GROUPS,
    FactGroup,
    Gpu,
    GpuProcess,
    GpuState,
    Machine,
    NvmlStatus,
    Reading,
    Reason,
)

# Imported when used, so that `gpudiag list` (which reads through read_machine) starts at its floor:
# the checks, the memory picture and nvidia-smi -q's details load json, subprocess and threading.
if TYPE_CHECKING:
    from gpudiag.checks import CheckResult, Options, Status
    from gpudiag.checks.gather import CheckRun
    from gpudiag.details import ProcessLoad
    from gpudiag.memory.state import WatchState
    from gpudiag.memory.view import Breakdown, Forecast, MemoryView, ProcessRow
    from gpudiag.probe.collect import MachineSource
    from gpudiag.probe.monitor import RowReader
    from gpudiag.replay.recording import Recording

__all__ = [
    "API_VERSION",
    "WATCH_GROUPS",
    "Breakdown",
    "CheckResult",
    "CheckRun",
    "Collector",
    "ExitCode",
    "FactGroup",
    "Forecast",
    "Gpu",
    "GpuProcess",
    "GpudiagError",
    "Machine",
    "MemoryView",
    "NvmlStatus",
    "Options",
    "ProcessLoad",
    "ProcessRow",
    "Reading",
    "Reason",
    "Sample",
    "Sampler",
    "Status",
    "exit_code",
    "health",
    "read_machine",
    "run_checks",
    "watch",
]

# The re-exported types that load on first use (``api.CheckResult``), by their modules.
_LAZY = {
    "CheckResult": "gpudiag.checks",
    "Options": "gpudiag.checks",
    "Status": "gpudiag.checks",
    "CheckRun": "gpudiag.checks.gather",
    "ProcessLoad": "gpudiag.details",
    "Breakdown": "gpudiag.memory.view",
    "Forecast": "gpudiag.memory.view",
    "MemoryView": "gpudiag.memory.view",
    "ProcessRow": "gpudiag.memory.view",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The API's own version: its major number changes only when a name in __all__ is removed or changes
# meaning (docs/api.md); the model's JSON schema (gpudiag.machine/N) is versioned on its own.
API_VERSION = "1.0"

# What a watch, `gpudiag top` and the collector read every sample: the figures they show and the
# NVML-only health checks judge (the exporter's per-scrape checks), never the costly ones (InfoROM's
# validation, ~70 ms a GPU; nvidia-smi -q's details).
WATCH_GROUPS: frozenset[FactGroup] = frozenset(
    {
        FactGroup.MEMORY,
        FactGroup.UTILIZATION,
        FactGroup.THERMAL,
        FactGroup.POWER,
        FactGroup.PERFORMANCE,
        FactGroup.CLOCK_EVENTS,
        FactGroup.CLOCKS,
        FactGroup.PCIE,
        FactGroup.ECC,
        FactGroup.MEMORY_HEALTH,
        FactGroup.RECOVERY,
        FactGroup.MIG,
        FactGroup.PROCESSES,
    }
)
REPLAY_ENV = "GPUDIAG_REPLAY"  # probe.collect.REPLAY_ENV, spelled here: the CLI's switch, honoured alike
MIN_INTERVAL = 0.1  # seconds: every gpudiag watch's floor (sampling faster burns the CPU it measures)
MIB = 1 << 20


def _replay(replay: str | None) -> str | None:
    return replay if replay is not None else os.environ.get(REPLAY_ENV) or None


def read_machine(
    replay: str | None = None, *, facts: Iterable[FactGroup] = ALL_GROUPS, only: Iterable[str] | None = None
) -> Machine:
    """One reading of the machine (``gpudiag list --json`` prints this model), or of ``replay``.

    ``facts``: the groups of GPU facts to read (default every group but `-q`'s details); the others
    read ``Reason.NOT_READ``. ``only``: of those groups' readings, only these (their model fields,
    dotted from the GPU: ``"memory"``, ``"clock_sm_mhz"``), as ``list --query`` reads what it prints.
    NVML that cannot start is no exception: ``machine.nvml.status`` says why.
    Raises :class:`GpudiagError` for a replay that cannot be read (its ``code`` is the CLI's exit code).
    """
    from gpudiag.probe.collect import collect

    return collect(_replay(replay), facts=frozenset(facts), only=None if only is None else frozenset(only))


def health(machine: Machine) -> list[CheckResult]:
    """The NVML-only health checks (the exporter's per-scrape ones: lost GPUs, ECC, retired pages,
    row remapping, recovery action, clock events, temperature, PCIe link) over ``machine``: no I/O."""
    from gpudiag.checks import Facts, Options, rules

    if machine.nvml.status is not NvmlStatus.OK:
        return []
    facts = Facts(machine=machine, torch=Reading.missing(Reason.UNAVAILABLE, "not asked"), devices=None)
    return rules.run(facts, Options(), only=rules.EXPORTER_CHECKS)


def run_checks(
    replay: str | None = None,
    *,
    torch: bool = False,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    options: Options | None = None,
) -> CheckRun:
    """`gpudiag check`'s run: its ``results``, ``notes`` (what could not run) and ``facts``.

    Without ``torch`` it is ``gpudiag check --no-torch``: NVML, the host, the device nodes and the
    environment, no child process. ``torch=True`` is ``gpudiag check``: torch's runtime view and the
    functional test on each GPU, in a child process (seconds). ``only``/``skip``: check ids or
    patterns as ``--only``/``--skip`` take them; ``options``: the thresholds and requirements
    (``api.Options(expect_gpus=8, require_driver="550")``). :func:`exit_code` gives the verdict.
    Raises :class:`GpudiagError` (a ``UsageError`` for a selection that checks nothing).
    """
    from gpudiag.checks.gather import run
    from gpudiag.checks.request import Request, prepare

    selection = Request(no_torch=not torch, only=list(only) or None, skip=list(skip) or None)
    prepared = prepare(selection, _replay(replay))
    return run(prepared.plan, options or prepared.options, prepared.only, prepared.skip)


def exit_code(checked: CheckRun, strict: bool = False) -> ExitCode:
    """The verdict `gpudiag check` exits with: OK only when something was verified and nothing failed."""
    from gpudiag.checks import exit_code as verdict

    return verdict(checked.results, checked.notes, strict)


class Sample(msgspec.Struct, frozen=True):
    """One moment of a watch."""

    number: int  # 0, 1, 2, ...
    at: float  # when it was read (unix time; on a replay, its recorded series' time)
    machine: Machine
    memory: MemoryView  # per GPU and process, with the tracker's allocator figures and the forecasts
    process_load: Mapping[int, Reading[tuple[ProcessLoad, ...]]]  # by GPU index: each process's SM share
    health: tuple[CheckResult, ...]  # health() of this machine (empty when not asked for)

    def sm_percent(self, gpu_index: int, pid: int) -> int | None:
        """A process's share of its GPU's SMs over the last interval, where NVML gives one."""
        loads = self.process_load.get(gpu_index)
        for load in loads.get(()) if loads is not None else ():
            if load.pid == pid:
                return load.sm_percent
        return None


class Sampler:
    """An open machine, read sample after sample (one NVML session: handles fetched once).

    On a replay each sample plays the next moment of the example's recorded series (and of its
    tracker recording), starting over at the series' end. :func:`watch` and :class:`Collector` use it;
    use it directly to read at your own pace. Close it (or use ``with``).
    """

    def __init__(
        self,
        replay: str | None = None,
        *,
        facts: Iterable[FactGroup] = WATCH_GROUPS,
        gpus: Iterable[int] | None = None,
        process_load: bool = True,
        checks: bool = True,
    ) -> None:
        from gpudiag.memory.state import WatchState
        from gpudiag.memory.tracked import recording_for
        from gpudiag.probe.collect import open_source

        self.replay = replay = _replay(replay)
        self._source: MachineSource = open_source(replay, facts=frozenset(facts))
        self._frames = self._source.play() if replay else 0
        self._recording: Recording | None = recording_for(replay)
        self._state: WatchState = WatchState()
        self._gpus = None if gpus is None else set(gpus)
        self._checks = checks
        self._reader: RowReader | None = None
        if process_load:
            from gpudiag.probe.monitor import PROCESS_LOAD, RowReader

            self._reader = RowReader(self._source, (PROCESS_LOAD,))
        self.number = 0

    @property
    def state(self) -> WatchState:
        """What the samples so far left: history per GPU, peaks, events (gpudiag.memory.state)."""
        return self._state

    def sample(self) -> Sample:
        """Read the machine now (a replay: its next recorded moment)."""
        from gpudiag.memory.build import build
        from gpudiag.memory.tracked import one_sample, tracked_entries

        n = self.number
        if self._frames > 1:
            self._source.seek(n % self._frames)
        if self._recording is not None and n:
            self._recording.advance()
        machine = self._source.read()
        at = self._source.sample_time() if self.replay else time.time()
        if self._recording is not None:
            at = self._recording.wall()
            view = one_sample(machine, self._gpus, True, self._recording)
        else:
            view = build(machine, tracked_entries(self.replay is not None), self._gpus)
        view = self._state.update(view, at)
        self.number += 1
        results = tuple(health(machine)) if self._checks else ()
        return Sample(n, at, machine, view, self._loads(machine), results)

    def _loads(self, machine: Machine) -> dict[int, Reading[tuple[ProcessLoad, ...]]]:
        loads: dict[int, Reading[tuple[ProcessLoad, ...]]] = {}
        if self._reader is None or machine.nvml.status is not NvmlStatus.OK:
            return loads
        from gpudiag.probe.monitor import PROCESS_LOAD

        for position, gpu in enumerate(machine.gpus):
            if gpu.state is not GpuState.OK or (self._gpus is not None and gpu.index not in self._gpus):
                continue
            read = self._reader.read(position)
            if read is not None:
                loads[gpu.index] = read[PROCESS_LOAD]
        return loads

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def watch(
    interval: float = 2.0,
    *,
    replay: str | None = None,
    count: int | None = None,
    gpus: Iterable[int] | None = None,
    facts: Iterable[FactGroup] = WATCH_GROUPS,
) -> Iterator[Sample]:
    """A :class:`Sample` every ``interval`` seconds (at least 0.1), ``count`` of them or until the loop
    stops. Samples keep to the interval's grid (a slow one shortens the next wait; overrun intervals
    are skipped, never bunched up). On a replay the recorded series plays without waiting."""
    if not interval >= MIN_INTERVAL:
        raise ValueError(f"interval={interval!r}: at least {MIN_INTERVAL} seconds")
    if count is not None and count < 1:
        raise ValueError(f"count={count!r}: at least 1")
    replay = _replay(replay)
    with Sampler(replay, facts=facts, gpus=gpus) as sampler:
        next_tick = time.monotonic()
        while count is None or sampler.number < count:
            yield sampler.sample()
            if replay is not None or (count is not None and sampler.number >= count):
                continue
            next_tick += interval
            late = time.monotonic() - next_tick
            if late > 0:
                next_tick += interval * (late // interval + 1)
            time.sleep(max(0.0, next_tick - time.monotonic()))


class Collector:
    """GPU and allocator figures for a training loop: :meth:`collect` returns one flat
    ``dict[str, float]`` (keys ``<prefix>/<scope>/<name> (<unit>)``, as nvitop's
    ResourceMetricCollector names them), ready for ``SummaryWriter.add_scalar``, Lightning's
    ``log_dict`` or a Hugging Face ``log``.

    ``gpus``: NVML indices to report (default: those the processes use, else all). ``pids``: the
    processes to report (default: this process and its descendants; on a replay, every process).
    Allocator figures (allocated, reserved, cached free, peaks, retries, OOMs, fragmentation) come
    from gpudiag's tracker (``gpudiag.track.start()`` in the same program); ``time_to_oom (s)``
    appears where the tracker's steps or the samples so far forecast that a GPU or a process fills
    up. A call sooner than ``interval`` seconds after the last read returns the same figures, so
    calling it every step costs nothing between reads. Close it (or use ``with``).
    """

    def __init__(
        self,
        gpus: Iterable[int] | None = None,
        *,
        pids: Iterable[int] | None = None,
        replay: str | None = None,
        prefix: str = "gpudiag",
        interval: float = 1.0,
    ) -> None:
        if not interval >= 0:
            raise ValueError(f"interval={interval!r}: 0 or more seconds")
        self._gpus = None if gpus is None else set(gpus)
        self._sampler = Sampler(replay, gpus=self._gpus, checks=False)
        self._pids = None if pids is None else set(pids)
        self._replay = self._sampler.replay
        self._prefix = prefix.rstrip("/")
        self._interval = interval
        self._last: dict[str, float] | None = None
        self._last_at = -math.inf

    def collect(self) -> dict[str, float]:
        """The figures now (or the last read's, within ``interval``)."""
        now = time.monotonic()
        if self._last is None or now - self._last_at >= self._interval:
            self._last = self.figures(self._sampler.sample())
            self._last_at = now
        return dict(self._last)

    def figures(self, sample: Sample) -> dict[str, float]:
        """One sample's flat figures (what :meth:`collect` returns)."""
        p = self._prefix
        mine = self._mine(sample)
        used_gpus = {row.gpu_index for row in sample.memory.processes if row.process.pid in mine}
        out: dict[str, float] = {f"{p}/timestamp": sample.at}
        for row in sample.memory.gpus:
            gpu = row.gpu
            if self._gpus is None and used_gpus and gpu.index not in used_gpus:
                continue
            out.update(_gpu_figures(f"{p}/gpu:{gpu.index}", gpu, row.used_percent))
        for prow in sample.memory.processes:
            if prow.process.pid not in mine:
                continue
            scope = f"{p}/pid:{prow.process.pid}/gpu:{prow.gpu_index}"
            used = prow.process.used_memory_bytes.value
            if used is not None:
                out[f"{scope}/gpu_memory (MiB)"] = used / MIB
            if prow.share_percent is not None:
                out[f"{scope}/gpu_memory_percent (%)"] = prow.share_percent
            sm = sample.sm_percent(prow.gpu_index, prow.process.pid)
            if sm is not None:
                out[f"{scope}/gpu_sm_utilization (%)"] = float(sm)
            if prow.breakdown is not None:
                out.update(_allocator(scope, prow.breakdown))
            if prow.steps is not None and prow.steps.growth_bytes_per_step is not None:
                out[f"{scope}/growth_per_step (MiB)"] = prow.steps.growth_bytes_per_step / MIB
        for unlisted in sample.memory.unmatched:  # tracked here, not listed by NVML (a container's PIDs)
            if unlisted.pid in mine:
                out.update(_allocator(f"{p}/pid:{unlisted.pid}/gpu:{unlisted.gpu_index}", unlisted.breakdown))
        for f in sample.memory.forecasts:
            if f.pid is None:
                out[f"{p}/gpu:{f.gpu_index}/time_to_oom (s)"] = f.full_in_s
            elif f.pid in mine:
                out[f"{p}/pid:{f.pid}/gpu:{f.gpu_index}/time_to_oom (s)"] = f.full_in_s
        return out

    def _mine(self, sample: Sample) -> set[int]:
        pids = {row.process.pid for row in sample.memory.processes} | {u.pid for u in sample.memory.unmatched}
        if self._pids is not None:
            return pids & self._pids
        if self._replay is not None:
            return pids
        return pids & _family(os.getpid())

    def close(self) -> None:
        self._sampler.close()

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _gpu_figures(scope: str, gpu: Gpu, used_percent: float | None) -> dict[str, float]:
    out: dict[str, float] = {}
    mem = gpu.memory.value
    if mem is not None:
        out[f"{scope}/memory_used (MiB)"] = mem.used_bytes / MIB
        out[f"{scope}/memory_free (MiB)"] = mem.free_bytes / MIB
        out[f"{scope}/memory_total (MiB)"] = mem.total_bytes / MIB
    if used_percent is not None:
        out[f"{scope}/memory_percent (%)"] = used_percent
    util = gpu.utilization.value
    if util is not None:
        out[f"{scope}/gpu_utilization (%)"] = float(util.gpu_percent)
        out[f"{scope}/memory_utilization (%)"] = float(util.memory_percent)
    readings: tuple[tuple[str, Reading[Any]], ...] = (
        ("temperature (C)", gpu.temperature_c),
        ("power_usage (W)", gpu.power_draw_w),
        ("power_limit (W)", gpu.power_limit_w),
        ("fan_speed (%)", gpu.fan_percent),
        ("sm_clock (MHz)", gpu.clock_sm_mhz),
        ("memory_clock (MHz)", gpu.clock_memory_mhz),
    )
    for key, reading in readings:
        if reading.value is not None:
            out[f"{scope}/{key}"] = float(reading.value)
    return out


def _allocator(scope: str, b: Breakdown) -> dict[str, float]:
    out = {
        f"{scope}/allocated (MiB)": b.allocated_bytes / MIB,
        f"{scope}/reserved (MiB)": b.reserved_bytes / MIB,
        f"{scope}/cached_free (MiB)": b.cached_free_bytes / MIB,
        f"{scope}/peak_allocated (MiB)": b.peak_allocated_bytes / MIB,
        f"{scope}/peak_reserved (MiB)": b.peak_reserved_bytes / MIB,
        f"{scope}/alloc_retries": float(b.alloc_retries),
        f"{scope}/ooms": float(b.ooms),
    }
    if b.other_bytes is not None:
        out[f"{scope}/non_pytorch (MiB)"] = b.other_bytes / MIB
    if b.fragmentation_percent is not None:
        out[f"{scope}/fragmentation (%)"] = b.fragmentation_percent
    return out


def _family(root: int) -> set[int]:
    """``root`` and its descendants (a DataLoader's workers, a launcher's ranks)."""
    import psutil

    try:
        return {root, *(c.pid for c in psutil.Process(root).children(recursive=True))}
    except psutil.Error:
        return {root}
