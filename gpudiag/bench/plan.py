"""What to measure: modes, sizes, iterations."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpudiag.errors import UsageError
from gpudiag.units import parse_size

MiB = 1024 * 1024
DEFAULT_SIZE = 256 * MiB  # on the plateau for PCIe copies (field notes: ≥ 256 MiB), and quick
SWEEP_SIZES = tuple(4 * 1024 * 4**k for k in range(10))  # 4 KiB … 1 GiB, ×4 per step


class Mode(str, enum.Enum):
    H2D_PAGEABLE = "h2d_pageable"
    H2D_PINNED = "h2d_pinned"  # blocking copy from page-locked memory
    H2D_PINNED_ASYNC = "h2d_pinned_async"  # non_blocking, timed with CUDA events behind a spin kernel
    D2H_PAGEABLE = "d2h_pageable"
    D2H_PINNED = "d2h_pinned"
    D2H_PINNED_ASYNC = "d2h_pinned_async"
    D2D = "d2d"  # within one GPU
    PEER = "peer"  # GPU a -> GPU b
    PEER_BIDIR = "peer_bidir"  # a -> b and b -> a at once; figure is the sum of both directions

    @property
    def is_host(self) -> bool:
        return self.value.startswith(("h2d", "d2h"))

    @property
    def is_peer(self) -> bool:
        return self in (Mode.PEER, Mode.PEER_BIDIR)

    @property
    def timed_with_events(self) -> bool:
        return not self.value.endswith(("pageable", "pinned"))

    @property
    def convention(self) -> str:
        """How bytes are counted in this mode's figure."""
        if self is Mode.D2D:
            return "bytes copied, counted once (read + write traffic is twice this)"
        if self is Mode.PEER_BIDIR:
            return "bytes moved in both directions together (sum of the two)"
        return "bytes copied, one direction"


DEFAULT_MODES = tuple(Mode)


@dataclass(frozen=True)
class Plan:
    modes: tuple[Mode, ...]
    sizes: tuple[int, ...]
    iters: int  # copies per sample
    samples: int
    warmup: int
    devices: tuple[int, ...] | None  # torch ordinals; None: every visible device


def parse_modes(text: str | None) -> tuple[Mode, ...]:
    if text is None:
        return DEFAULT_MODES
    modes: list[Mode] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        aliases = {
            "h2d": (Mode.H2D_PAGEABLE, Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC),
            "d2h": (Mode.D2H_PAGEABLE, Mode.D2H_PINNED, Mode.D2H_PINNED_ASYNC),
            "pinned": (Mode.H2D_PINNED, Mode.H2D_PINNED_ASYNC, Mode.D2H_PINNED, Mode.D2H_PINNED_ASYNC),
            "pageable": (Mode.H2D_PAGEABLE, Mode.D2H_PAGEABLE),
        }
        if name in aliases:
            modes.extend(m for m in aliases[name] if m not in modes)
            continue
        try:
            mode = Mode(name)
        except ValueError:
            known = ", ".join([*(m.value for m in Mode), *aliases])
            raise UsageError(f"--modes: unknown mode {raw.strip()!r}; known: {known}") from None
        if mode not in modes:
            modes.append(mode)
    if not modes:
        raise UsageError("--modes needs at least one mode")
    return tuple(modes)


def parse_sizes(text: str | None, sweep: bool) -> tuple[int, ...]:
    if sweep and text:
        raise UsageError("choose one of --sizes and --sweep")
    if sweep:
        return SWEEP_SIZES
    if text is None:
        return (DEFAULT_SIZE,)
    sizes = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        size = parse_size(raw)
        if size < 4:
            raise UsageError(f"--sizes {raw.strip()!r}: too small to copy")
        sizes.append(size - size % 4)  # whole 4-byte elements
    if not sizes:
        raise UsageError("--sizes needs at least one size, e.g. 64MiB,1GiB")
    return tuple(sizes)


def make_plan(
    modes: str | None, sizes: str | None, sweep: bool, iters: int, samples: int, devices: tuple[int, ...] | None
) -> Plan:
    if iters < 1:
        raise UsageError("--iters must be 1 or more")
    if samples < 1:
        raise UsageError("--samples must be 1 or more")
    return Plan(parse_modes(modes), parse_sizes(sizes, sweep), iters, samples, warmup=4, devices=devices)
