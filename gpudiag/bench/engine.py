"""Running a plan: the measuring loop (pure) and the torch backend that copies for real.

Method (after NVIDIA's nvbandwidth): buffers allocated once per mode and size, host buffers
allocated after pinning the process to the GPU's NUMA node; untimed warm-up copies (they
also enable peer access, which CUDA does lazily); asynchronous modes timed with CUDA events
behind a spin kernel so that the host's enqueue cost stays outside the window; blocking and
pageable modes timed per call with a wall clock; several samples; data verified after.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpudiag.bench.plan import Mode, Plan
from gpudiag.bench.stats import Bandwidth, bandwidth

SPIN_CYCLES = 50_000_000  # tens of ms of GPU spin: longer than enqueueing a sample's copies


class Backend(Protocol):
    def device_count(self) -> int: ...

    def device_uuid(self, device: int) -> str: ...

    def can_access_peer(self, device: int, peer: int) -> bool: ...

    def measure(
        self, mode: Mode, device: int, peer: int | None, nbytes: int, plan: Plan, after_warmup: Callable[[], None]
    ) -> tuple[list[float], bool]:
        """Seconds per copy for each sample, and whether the copied data verified."""
        ...


@dataclass(frozen=True)
class Measurement:
    mode: Mode
    device: int  # torch ordinal
    peer: int | None
    nbytes: int  # per copy
    counted_bytes: int  # what the figure counts (both directions for bidirectional)
    bandwidth: Bandwidth
    verified: bool


def tasks(plan: Plan, backend: Backend) -> list[tuple[Mode, int, int | None, int]]:
    """Every (mode, device, peer, size) the plan asks for on this machine."""
    devices = plan.devices if plan.devices is not None else tuple(range(backend.device_count()))
    out: list[tuple[Mode, int, int | None, int]] = []
    for mode in plan.modes:
        for device in devices:
            peers: list[int | None] = [p for p in devices if p != device] if mode.is_peer else [None]
            for peer in peers:
                if mode is Mode.PEER_BIDIR and peer is not None and peer < device:
                    continue  # a<->b once
                out.extend((mode, device, peer, size) for size in plan.sizes)
    return out


def run(
    plan: Plan,
    backend: Backend,
    on_step: Callable[[str], None],
    after_warmup: Callable[[int], None],
) -> list[Measurement]:
    """Measure every task in turn. Peers without a direct path are measured too: CUDA stages
    those copies through the host, and the figure shows it."""
    results: list[Measurement] = []
    for mode, device, peer, size in tasks(plan, backend):
        label = f"{mode.value} cuda:{device}" + (f"->cuda:{peer}" if peer is not None else "") + f" {size}B"
        on_step(label)

        def warmed(d: int = device) -> None:
            after_warmup(d)

        times, verified = backend.measure(mode, device, peer, size, plan, warmed)
        counted = size * (2 if mode is Mode.PEER_BIDIR else 1)
        results.append(Measurement(mode, device, peer, size, counted, bandwidth(counted, times), verified))
    return results


# --- NUMA placement --------------------------------------------------------------------


def node_cpus(node: int, root: Path = Path("/sys/devices/system/node")) -> set[int]:
    """CPUs of a NUMA node from sysfs ('0-15,32-47')."""
    text = (root / f"node{node}" / "cpulist").read_text().strip()
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


@contextlib.contextmanager
def pinned_to_node(node: int | None) -> Iterator[str]:
    """Run the block on the GPU's NUMA node's CPUs, so host buffers land in its memory."""
    if node is None or node < 0 or not hasattr(os, "sched_setaffinity"):
        yield "NUMA node unknown: host memory placed by the OS"
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, node_cpus(node))
    except (OSError, ValueError):
        yield f"could not pin to NUMA node {node}: host memory placed by the OS"
        return
    try:
        yield f"host memory on NUMA node {node} (process pinned to its CPUs)"
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, before)


# --- the torch backend -----------------------------------------------------------------


class TorchBackend:
    """Real copies with torch. Imported only by bench-transfer, after a child confirmed CUDA works."""

    def __init__(self, numa_nodes: dict[int, int | None]) -> None:
        import torch

        self.torch: Any = torch
        self.numa_nodes = numa_nodes  # torch ordinal -> NUMA node
        self.placement: dict[int, str] = {}

    def device_count(self) -> int:
        return int(self.torch.cuda.device_count())

    def device_uuid(self, device: int) -> str:
        return str(getattr(self.torch.cuda.get_device_properties(device), "uuid", ""))

    def can_access_peer(self, device: int, peer: int) -> bool:
        return bool(self.torch.cuda.can_device_access_peer(device, peer))

    def _pattern(self, n: int, device: Any) -> Any:
        t = self.torch
        return (t.arange(n, dtype=t.int64, device=device) * 2654435761 % 2147483647).to(t.int32)

    def measure(
        self, mode: Mode, device: int, peer: int | None, nbytes: int, plan: Plan, after_warmup: Callable[[], None]
    ) -> tuple[list[float], bool]:
        t = self.torch
        n = nbytes // 4
        dev = t.device("cuda", device)
        with pinned_to_node(self.numa_nodes.get(device)) as placement:
            self.placement[device] = placement
            pinned = "pinned" in mode.value
            if mode.value.startswith("h2d"):
                src = t.empty(n, dtype=t.int32, pin_memory=pinned)
                src.copy_(self._pattern(n, "cpu"))
                dst = t.empty(n, dtype=t.int32, device=dev)
            elif mode.value.startswith("d2h"):
                src = self._pattern(n, dev)
                dst = t.empty(n, dtype=t.int32, pin_memory=pinned)
            else:
                src = self._pattern(n, dev)
                dst = t.empty(n, dtype=t.int32, device=t.device("cuda", peer) if peer is not None else dev)
            back = None
            if mode is Mode.PEER_BIDIR and peer is not None:
                back_src = self._pattern(n, t.device("cuda", peer))
                back = (back_src, t.empty(n, dtype=t.int32, device=dev))
        asynchronous = mode.timed_with_events or mode in (Mode.D2D, Mode.PEER, Mode.PEER_BIDIR)

        def copy() -> None:
            if back is None:
                dst.copy_(src, non_blocking=asynchronous)
                return
            # Both directions at once: the return copy runs on a stream of its own, both start
            # after the previous iteration, and the timing stream waits for both.
            current, other = t.cuda.current_stream(dev), self._peer_stream(peer)
            other.wait_stream(current)
            dst.copy_(src, non_blocking=True)
            with t.cuda.stream(other):
                back[1].copy_(back[0], non_blocking=True)
            current.wait_stream(other)

        with t.cuda.device(device):
            for _ in range(plan.warmup):
                copy()
            t.cuda.synchronize()
            after_warmup()
            samples = [self._sample(copy, plan.iters, asynchronous) for _ in range(plan.samples)]
            t.cuda.synchronize()
            verified = bool(t.equal(dst.cpu() if dst.is_cuda else dst, src.cpu() if src.is_cuda else src))
            if back is not None:
                verified = verified and bool(t.equal(back[1].cpu(), back[0].cpu()))
        return samples, verified

    def _peer_stream(self, peer: int | None) -> Any:
        if not hasattr(self, "_streams"):
            self._streams: dict[int | None, Any] = {}
        if peer not in self._streams:
            self._streams[peer] = self.torch.cuda.Stream(device=peer)
        return self._streams[peer]

    def _sample(self, copy: Callable[[], None], iters: int, asynchronous: bool) -> float:
        t = self.torch
        if not asynchronous:
            total = 0.0
            for _ in range(iters):
                start = time.perf_counter()
                copy()
                t.cuda.synchronize()
                total += time.perf_counter() - start
            return total / iters
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        if hasattr(t.cuda, "_sleep"):
            t.cuda._sleep(SPIN_CYCLES)  # the GPU is busy while we enqueue: enqueue cost stays outside
        start.record()
        for _ in range(iters):
            copy()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0 / iters
