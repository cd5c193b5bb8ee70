"""`gpudiag top`'s rows: what each table shows of a sample, sorted, filtered and nested, as pure
functions (the app only draws them). Text from outside (users, commands, GPU names) stays raw here;
the app escapes it where it becomes a cell (render.printable)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.model import GpuState

if TYPE_CHECKING:
    from gpudiag.api import Sample
    from gpudiag.checks import CheckResult

SPARKS = "▁▂▃▄▅▆▇█"
MIB = 1 << 20
HISTORY = 20  # points in a row's sparkline (the watch keeps more)


def sparkline(values: Iterable[float], top: float | None = None, width: int = HISTORY) -> str:
    """The last ``width`` values as block characters, scaled to ``top`` (default: their maximum)."""
    points = list(values)[-width:]
    if not points:
        return ""
    high = top if top else max(points) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, max(0, int(v / high * (len(SPARKS) - 1) + 0.5)))] for v in points)


class GpuLine(msgspec.Struct, frozen=True):
    index: int
    name: str
    state: str  # "ok", or why not
    util: int | None
    mem_used: int | None  # bytes
    mem_total: int | None
    temp: int | None
    power: float | None
    power_limit: float | None
    sm_clock: int | None
    mem_clock: int | None
    health: str  # "ok", "WARN", "FAIL", "-" (nothing judged)
    findings: tuple[str, ...]  # the warnings and failures, one line each
    history: str  # utilization sparkline
    processes: int

    @property
    def mem_percent(self) -> float | None:
        return 100.0 * self.mem_used / self.mem_total if self.mem_used is not None and self.mem_total else None


class ProcLine(msgspec.Struct, frozen=True):
    gpu: int
    pid: int
    user: str
    kind: str
    mem: int | None  # bytes (NVML's figure)
    mem_percent: float | None  # of its GPU (or MIG instance)
    sm: int | None  # % of the GPU's SMs, where NVML samples it
    cuda: str  # "cuda:N" as the process calls the GPU, "" when not known
    command: str
    history: str  # memory sparkline
    depth: int = 0  # in the tree view
    last: bool = False  # the last child of its parent (tree drawing)

    @property
    def key(self) -> str:
        return f"{self.gpu}:{self.pid}"


def _worst(results: Sequence[CheckResult]) -> tuple[str, tuple[str, ...]]:
    from gpudiag.checks import Status

    statuses = {r.status for r in results}
    findings = tuple(f"{r.id}: {r.finding}" for r in results if r.status in (Status.WARN, Status.FAIL))
    if Status.FAIL in statuses:
        return "FAIL", findings
    if Status.WARN in statuses:
        return "WARN", findings
    return ("ok" if Status.PASS in statuses else "-"), findings


def gpu_lines(sample: Sample, util_history: Mapping[int, Sequence[float]]) -> list[GpuLine]:
    """The GPU table's rows; ``util_history``: the watch's utilization series per GPU."""
    by_target: dict[str, list[CheckResult]] = {}
    for r in sample.health:
        by_target.setdefault(r.target, []).append(r)
    counts: dict[int, int] = {}
    for p in sample.memory.processes:
        counts[p.gpu_index] = counts.get(p.gpu_index, 0) + 1
    out = []
    for row in sample.memory.gpus:
        g = row.gpu
        mem, util = g.memory.value, g.utilization.value
        health, findings = _worst(by_target.get(f"GPU {g.index}", []))
        out.append(
            GpuLine(
                index=g.index,
                name=g.name.get("") or "?",
                state="ok" if g.state is GpuState.OK else f"{g.state.value}: {g.state_detail}",
                util=util.gpu_percent if util is not None else None,
                mem_used=mem.used_bytes if mem is not None else None,
                mem_total=mem.total_bytes if mem is not None else None,
                temp=g.temperature_c.value,
                power=g.power_draw_w.value,
                power_limit=g.power_limit_w.value,
                sm_clock=g.clock_sm_mhz.value,
                mem_clock=g.clock_memory_mhz.value,
                health=health if g.state is GpuState.OK else "LOST",
                findings=findings,
                history=sparkline(util_history.get(g.index, ()), 100.0),
                processes=counts.get(g.index, 0),
            )
        )
    return out


def proc_lines(
    sample: Sample,
    memory_history: Mapping[tuple[int, int], Sequence[tuple[float, int]]],
    cuda: Callable[[int, int], str],
) -> list[ProcLine]:
    """The process table's rows. ``memory_history``: the watch's NVML figure per GPU and PID;
    ``cuda(gpu, pid)``: the process's own name for the GPU ("" when not known)."""
    totals = {r.gpu.index: r.gpu.memory.value.total_bytes / MIB for r in sample.memory.gpus if r.gpu.memory.value}
    procs = []
    for row in sample.memory.processes:
        p, key = row.process, row.key
        tracked = f"cuda:{row.breakdown.torch_index}" if row.breakdown is not None else ""
        series = [used / MIB for _, used in memory_history.get(key, ())]
        procs.append(
            ProcLine(
                gpu=row.gpu_index,
                pid=p.pid,
                user=p.host.user.get("") or "?",
                kind=p.kind.value,
                mem=p.used_memory_bytes.value,
                mem_percent=row.share_percent,
                sm=sample.sm_percent(row.gpu_index, p.pid),
                cuda=tracked or cuda(row.gpu_index, p.pid),
                command=row.command or "?",
                history=sparkline(series, totals.get(row.gpu_index)),  # against the GPU's memory
            )
        )
    return procs


# --- sorting -----------------------------------------------------------------------------------

# The process table's columns: (key, heading, the value it sorts by).
PROC_COLUMNS: tuple[tuple[str, str, Callable[[ProcLine], Any]], ...] = (
    ("gpu", "GPU", lambda p: p.gpu),
    ("pid", "PID", lambda p: p.pid),
    ("user", "USER", lambda p: p.user),
    ("type", "T", lambda p: p.kind),
    ("mem", "GPU MEM", lambda p: -1 if p.mem is None else p.mem),
    ("memp", "MEM%", lambda p: -1.0 if p.mem_percent is None else p.mem_percent),
    ("sm", "SM%", lambda p: -1 if p.sm is None else p.sm),
    ("cuda", "CUDA", lambda p: p.cuda),
    ("history", "MEMORY HISTORY", lambda p: -1 if p.mem is None else p.mem),
    ("command", "COMMAND", lambda p: p.command),
)
GPU_COLUMNS: tuple[tuple[str, str, Callable[[GpuLine], Any]], ...] = (
    ("gpu", "GPU", lambda g: g.index),
    ("name", "NAME", lambda g: g.name),
    ("util", "UTIL", lambda g: -1 if g.util is None else g.util),
    ("mem", "MEMORY", lambda g: -1.0 if g.mem_percent is None else g.mem_percent),
    ("temp", "TEMP", lambda g: -1 if g.temp is None else g.temp),
    ("power", "POWER", lambda g: -1.0 if g.power is None else g.power),
    ("clocks", "SM/MEM MHz", lambda g: -1 if g.sm_clock is None else g.sm_clock),
    ("health", "HEALTH", lambda g: ("ok", "-", "WARN", "FAIL", "LOST").index(g.health)),
    ("procs", "PROCS", lambda g: g.processes),
    ("history", "UTIL HISTORY", lambda g: -1 if g.util is None else g.util),
)
# Columns left out below the full width (80-column terminals): the rest fit.
GPU_COMPACT_HIDDEN = {"history", "name"}
PROC_COMPACT_HIDDEN = {"history", "cuda", "type"}
FULL_WIDTH = 120
# The process table's widths (cells, without padding): the command takes what the others leave.
PROC_WIDTHS = {"gpu": 3, "pid": 7, "user": 8, "type": 3, "mem": 9, "memp": 6, "sm": 5, "cuda": 7, "history": HISTORY}
MIN_COMMAND_WIDTH = 16


def sort_procs(procs: Sequence[ProcLine], column: str, reverse: bool) -> list[ProcLine]:
    """Sorted by ``column`` (a PROC_COLUMNS key), ties in GPU then PID order."""
    value = next(v for key, _, v in PROC_COLUMNS if key == column)
    ordered = sorted(procs, key=lambda p: (p.gpu, p.pid))
    return sorted(ordered, key=value, reverse=reverse)


def sort_gpus(gpus: Sequence[GpuLine], column: str, reverse: bool) -> list[GpuLine]:
    value = next(v for key, _, v in GPU_COLUMNS if key == column)
    return sorted(sorted(gpus, key=lambda g: g.index), key=value, reverse=reverse)


# --- filtering ---------------------------------------------------------------------------------


class Filter(msgspec.Struct, frozen=True):
    """What the filter box holds: ``user:NAME``, ``gpu:N[,M]`` and free words (all must match)."""

    users: frozenset[str] = frozenset()
    gpus: frozenset[int] = frozenset()
    words: tuple[str, ...] = ()
    error: str = ""  # a token that could not be read (shown; the rest still applies)

    @property
    def empty(self) -> bool:
        return not (self.users or self.gpus or self.words)


def parse_filter(text: str) -> Filter:
    users: set[str] = set()
    gpus: set[int] = set()
    words: list[str] = []
    error = ""
    for token in text.split():
        kind, sep, value = token.partition(":")
        if sep and kind.lower() == "user" and value:
            users.update(v for v in value.split(",") if v)
        elif sep and kind.lower() == "gpu" and value:
            for v in value.split(","):
                if v.isdigit():
                    gpus.add(int(v))
                elif v:
                    error = f"gpu:{v}: not a GPU index"
        else:
            words.append(token.lower())
    return Filter(frozenset(users), frozenset(gpus), tuple(words), error)


def matches(p: ProcLine, f: Filter) -> bool:
    if f.users and p.user not in f.users:
        return False
    if f.gpus and p.gpu not in f.gpus:
        return False
    haystack = f"{p.pid} {p.user} {p.command} {p.cuda}".lower()
    return all(w in haystack for w in f.words)


def filter_procs(procs: Iterable[ProcLine], f: Filter) -> list[ProcLine]:
    return [p for p in procs if matches(p, f)]


# --- the process tree --------------------------------------------------------------------------


def tree(procs: Sequence[ProcLine], parent: Mapping[int, int | None]) -> list[ProcLine]:
    """The rows nested under their parent process where that parent is a row too (a launcher and
    its ranks; a DataLoader's workers), keeping the given order among siblings. ``parent``: PID →
    parent PID, for the PIDs the host could tell (a replay records none: the list stays flat)."""
    pids = {p.pid for p in procs}
    children: dict[int | None, list[ProcLine]] = {}
    for p in procs:
        up = parent.get(p.pid)
        seen = {p.pid}
        while up is not None and up not in pids and up not in seen:  # a GPU process's nearest GPU-process ancestor
            seen.add(up)
            up = parent.get(up)
        children.setdefault(up if up in pids and up != p.pid else None, []).append(p)
    out: list[ProcLine] = []
    placed: set[str] = set()

    def place(p: ProcLine, depth: int, last: bool) -> None:
        if p.key in placed:
            return
        placed.add(p.key)
        out.append(msgspec.structs.replace(p, depth=depth, last=last))
        kids = [k for k in children.get(p.pid, []) if k.pid != p.pid]
        for i, kid in enumerate(kids):
            place(kid, depth + 1, i == len(kids) - 1)

    for p in children.get(None, []):
        place(p, 0, False)
    for p in procs:  # a parent cycle leaves rows unplaced: they still show, at the top level
        place(p, 0, False)
    return out
