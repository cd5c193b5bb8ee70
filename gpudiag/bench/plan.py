"""What to measure: modes, sizes, devices, and the list of tasks a plan makes on a machine.

Pure: no torch, no clock. The child process that copies and the parent that shows the
progress both derive the same task list from a :class:`Plan` and the devices' facts.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.units import parse_size

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
PLATEAU_SIZE = 256 * MiB  # host copies are on their plateau from here
SWEEP_SIZES = tuple(4 * KiB * 4**k for k in range(10))  # 4 KiB … 1 GiB, ×4 per step
L2_FACTOR = 8  # D2D below 8× L2 is inflated by the cache
WARMUP_COPIES = 4  # nvbandwidth's untimed warm-up
ELEMENT = 4  # buffers are int32: sizes are whole 4-byte elements


class Mode(str, enum.Enum):
    H2D_PAGEABLE = "h2d_pageable"  # from pageable memory (synchronous in any case)
    H2D_PINNED = "h2d_pinned"  # from page-locked memory, blocking call
    H2D_PINNED_ASYNC = "h2d_pinned_async"  # page-locked, non_blocking: timed with CUDA events
    D2H_PAGEABLE = "d2h_pageable"
    D2H_PINNED = "d2h_pinned"
    D2H_PINNED_ASYNC = "d2h_pinned_async"
    D2D = "d2d"  # within one GPU
    PEER = "peer"  # GPU a -> GPU b
    PEER_BIDIR = "peer_bidir"  # a -> b and b -> a at once

    @property
    def is_host(self) -> bool:
        return self.value.startswith(("h2d", "d2h"))

    @property
    def direction(self) -> str:
        """'h2d', 'd2h', 'd2d' or 'peer'."""
        return self.value[:3] if self.is_host else ("d2d" if self is Mode.D2D else "peer")

    @property
    def pinned(self) -> bool:
        return "pinned" in self.value

    @property
    def is_peer(self) -> bool:
        return self in (Mode.PEER, Mode.PEER_BIDIR)

    @property
    def timed_with_events(self) -> bool:
        """Asynchronous copies: CUDA events behind a spin kernel. Blocking and pageable
        copies: a wall clock around each call (they return only when the copy is done)."""
        return not self.value.endswith(("pageable", "pinned"))

    @property
    def timing(self) -> str:
        return "cuda_events" if self.timed_with_events else "wall_clock_per_call"

    @property
    def byte_factor(self) -> int:
        """Bytes counted per copy, as a multiple of the buffer size."""
        return 2 if self is Mode.PEER_BIDIR else 1

    @property
    def convention(self) -> str:
        """How this mode's figure counts bytes."""
        if self is Mode.D2D:
            return "bytes copied, counted once (the memory reads and writes twice that; bandwidthTest counts twice)"
        if self is Mode.PEER_BIDIR:
            return "sum of both directions (bytes a->b plus bytes b->a, copied at the same time)"
        return "bytes copied, one direction"


ALL_MODES = tuple(Mode)
ALIASES: dict[str, tuple[Mode, ...]] = {
    "all": ALL_MODES,
    "host": tuple(m for m in Mode if m.is_host),
    "h2d": (Mode.H2D_PAGEABLE, Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC),
    "d2h": (Mode.D2H_PAGEABLE, Mode.D2H_PINNED, Mode.D2H_PINNED_ASYNC),
    "pinned": (Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC, Mode.D2H_PINNED, Mode.D2H_PINNED_ASYNC),
    "pageable": (Mode.H2D_PAGEABLE, Mode.D2H_PAGEABLE),
    "async": (Mode.H2D_PINNED_ASYNC, Mode.D2H_PINNED_ASYNC),
}


@dataclass(frozen=True)
class Plan:
    modes: tuple[Mode, ...]
    sizes: tuple[int, ...] | None  # None: the plateau size for each mode and GPU
    iters: int  # copies per sample
    samples: int
    warmup: int
    devices: tuple[int, ...] | None  # CUDA ordinals; None: every visible device
    sweep: bool = False

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["modes"] = [m.value for m in self.modes]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Plan:
        return cls(
            modes=tuple(Mode(m) for m in data["modes"]),
            sizes=None if data["sizes"] is None else tuple(int(s) for s in data["sizes"]),
            iters=int(data["iters"]),
            samples=int(data["samples"]),
            warmup=int(data["warmup"]),
            devices=None if data["devices"] is None else tuple(int(d) for d in data["devices"]),
            sweep=bool(data.get("sweep", False)),
        )


@dataclass(frozen=True)
class DeviceInfo:
    """What the benchmark needs to know about a CUDA device (from torch, in the child)."""

    ordinal: int
    name: str
    uuid: str  # as torch prints it: no GPU- prefix
    pci_bus_id: str | None  # "0000:18:00.0" when torch says, else None
    l2_bytes: int
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Task:
    index: int
    mode: Mode
    device: int  # CUDA ordinal: the source for peer copies, the GPU for the others
    peer: int | None
    nbytes: int  # buffer size, per copy and direction

    @property
    def counted_bytes(self) -> int:
        return self.nbytes * self.mode.byte_factor

    @property
    def devices(self) -> tuple[int, ...]:
        return (self.device,) if self.peer is None else (self.device, self.peer)

    def label(self) -> str:
        target = f"cuda:{self.device}" + (f"->cuda:{self.peer}" if self.peer is not None else "")
        return f"{self.mode.value} {target} {size_text(self.nbytes)}"


def size_text(n: int) -> str:
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"


# --- options -------------------------------------------------------------------------


def parse_modes(text: str | None) -> tuple[Mode, ...]:
    if text is None:
        return ALL_MODES
    modes: list[Mode] = []
    for raw in text.split(","):
        name = raw.strip().lower().replace("-", "_")
        if not name:
            continue
        found = ALIASES.get(name)
        if found is None:
            try:
                found = (Mode(name),)
            except ValueError:
                known = ", ".join([*(m.value for m in Mode), *ALIASES])
                raise UsageError(f"--modes: unknown mode {raw.strip()!r}; known: {known}") from None
        modes.extend(m for m in found if m not in modes)
    if not modes:
        raise UsageError("--modes needs at least one mode, e.g. --modes h2d,d2d")
    return tuple(sorted(modes, key=ALL_MODES.index))


def parse_sizes(text: str | None, sweep: bool) -> tuple[int, ...] | None:
    if sweep and text is not None:
        raise UsageError("choose one of --sizes and --sweep")
    if sweep:
        return SWEEP_SIZES
    if text is None:
        return None
    sizes: list[int] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        size = parse_size(raw)
        if size < ELEMENT:
            raise UsageError(f"--sizes {raw.strip()!r}: too small to copy (at least {ELEMENT} bytes)")
        size -= size % ELEMENT
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise UsageError("--sizes needs at least one size, e.g. --sizes 64MiB,1GiB")
    return tuple(sorted(sizes))


def parse_devices(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    devices: list[int] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        try:
            ordinal = int(raw.strip().removeprefix("cuda:"))
        except ValueError:
            ordinal = -1
        if ordinal < 0:
            raise UsageError(f"--device {text!r}: use CUDA ordinals such as 0 or 0,1 (as torch numbers them)")
        if ordinal not in devices:
            devices.append(ordinal)
    if not devices:
        raise UsageError(f"--device {text!r}: use CUDA ordinals such as 0 or 0,1 (as torch numbers them)")
    return tuple(devices)


def make_plan(
    modes: str | None,
    sizes: str | None,
    sweep: bool,
    iters: int,
    samples: int,
    devices: str | None,
    warmup: int = WARMUP_COPIES,
) -> Plan:
    if iters < 1:
        raise UsageError("--iters must be 1 or more")
    if samples < 1:
        raise UsageError("--samples must be 1 or more")
    return Plan(parse_modes(modes), parse_sizes(sizes, sweep), iters, samples, warmup, parse_devices(devices), sweep)


# --- tasks ---------------------------------------------------------------------------


def default_size(mode: Mode, device: DeviceInfo) -> int:
    """The plateau size: 256 MiB, and for D2D at least 8× the L2 (rounded up to a power of
    two) so the cache cannot inflate the figure; capped so the buffers fit in free memory."""
    if mode is not Mode.D2D:
        return PLATEAU_SIZE
    size = PLATEAU_SIZE
    while size < L2_FACTOR * device.l2_bytes:
        size *= 2
    while size > PLATEAU_SIZE and device_bytes_needed(mode, size)[0] > usable(device.free_bytes):
        size //= 2
    return size


def device_bytes_needed(mode: Mode, nbytes: int) -> tuple[int, int]:
    """Device memory a task allocates on (its GPU, its peer): buffers plus verification."""
    if mode is Mode.PEER_BIDIR:
        return 3 * nbytes, 2 * nbytes  # src, return dst, compare copy | dst, return src
    if mode is Mode.PEER:
        return 2 * nbytes, nbytes
    return 2 * nbytes, 0  # buffer and a copy to compare with (host modes); src and dst (d2d)


def usable(free_bytes: int) -> int:
    return int(free_bytes * 0.9)  # leave room for the context's own growth and other users


def does_not_fit(task: Task, devices: dict[int, DeviceInfo]) -> str:
    """Why a task cannot run in the free memory, or ''."""
    own, peer = device_bytes_needed(task.mode, task.nbytes)
    for ordinal, need in ((task.device, own), (task.peer, peer)):
        if ordinal is None or need == 0:
            continue
        info = devices[ordinal]
        if need > usable(info.free_bytes):
            return (
                f"needs {need // MiB} MiB on cuda:{ordinal}, which has {info.free_bytes // MiB} MiB free: "
                "choose a smaller --sizes"
            )
    return ""


def tasks(plan: Plan, devices: Sequence[DeviceInfo]) -> list[Task]:
    """Every copy the plan asks for on these devices: per GPU its own modes, then the peer
    pairs (each ordered pair one way, each unordered pair once both ways)."""
    by_ordinal = {d.ordinal: d for d in devices}
    chosen = [by_ordinal[o] for o in plan.devices] if plan.devices is not None else list(devices)
    out: list[Task] = []

    def add(mode: Mode, device: DeviceInfo, peer: int | None) -> None:
        for size in plan.sizes if plan.sizes is not None else (default_size(mode, device),):
            out.append(Task(len(out), mode, device.ordinal, peer, size))

    for device in chosen:
        for mode in plan.modes:
            if not mode.is_peer:
                add(mode, device, None)
    for mode in plan.modes:
        if not mode.is_peer:
            continue
        for a in chosen:
            for b in chosen:
                if a.ordinal == b.ordinal or (mode is Mode.PEER_BIDIR and b.ordinal < a.ordinal):
                    continue
                add(mode, a, b.ordinal)
    return out


def unknown_devices(plan: Plan, count: int) -> str:
    if plan.devices is None:
        return ""
    missing = [d for d in plan.devices if d >= count]
    if not missing:
        return ""
    listed = ", ".join(f"cuda:{d}" for d in missing)
    return f"--device: {listed} not visible; torch sees {count} CUDA device(s) (cuda:0 to cuda:{count - 1})"


# --- time budgets --------------------------------------------------------------------

# Slowest rate at which a working copy still proceeds, bytes/s: below this it is hung.
_FLOOR_RATE = {"h2d": 0.1e9, "d2h": 0.1e9, "d2d": 1e9, "peer": 0.1e9}
START_SECONDS = 120.0  # importing torch and creating the CUDA contexts


def copies_per_task(plan: Plan) -> int:
    return plan.warmup + plan.samples * plan.iters + 2  # + clear and verification


def task_budget_seconds(plan: Plan, task: Task) -> float:
    """How long a task may take before the child declares it hung."""
    moved = copies_per_task(plan) * task.counted_bytes
    return 30.0 + moved / _FLOOR_RATE[task.mode.direction]


def overall_budget_seconds(plan: Plan, gpu_count: int) -> float:
    """The parent's timeout for the whole child, from what NVML sees (before torch runs)."""
    count = max(1, gpu_count if plan.devices is None else len(plan.devices))
    fake = [DeviceInfo(i, "", "", None, 0, 1 << 50, 1 << 50) for i in range(count)]
    planned = tasks(replace(plan, devices=None), fake)
    # D2D's default size can grow with the L2: assume the largest it would reach (1 GiB).
    slack = sum(task_budget_seconds(plan, Task(0, Mode.D2D, 0, None, GiB)) for t in planned if t.mode is Mode.D2D)
    return START_SECONDS + slack + sum(task_budget_seconds(plan, t) for t in planned)
