"""The copy and timing primitives, with torch. Imported only in the benchmark's child process
(and by ``benchmarks/reference_copy.py``), never by the gpudiag command itself.

PyTorch facts this relies on (PyTorch's ``aten/src/ATen/native/cuda/Copy.cu``):
- a contiguous same-dtype ``copy_`` is one ``cudaMemcpyAsync`` on the current stream of the
  CUDA tensor's device (host copies) or of the source device (GPU to GPU); ``non_blocking``
  only matters for page-locked host memory, pageable copies are synchronous anyway;
- a cross-device copy makes the source device's current stream wait for the destination
  device's current stream, and the other way after: the two directions of a bidirectional
  copy therefore run on side streams, each made current on its own device only;
- ``pin_memory=True`` draws from the caching host allocator, which reuses blocks: its cache
  is emptied after each task, so a block pinned on another NUMA node is never reused;
- ``torch.cuda._sleep(cycles)`` is the spin kernel; its cycles per second are calibrated.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

from gpudiag.bench.engine import NoCudaError
from gpudiag.bench.plan import DeviceInfo, Mode, Task

CALIBRATION_CYCLES = 1_000_000
SENTINEL = -1  # random_() on int32 draws from [0, 2**31): never -1


def cuda_unusable_reason(torch: Any) -> str:
    """Why ``torch.cuda.is_available()`` said no, in torch's own words."""
    error = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.cuda.init()
        except Exception as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            error = lines[0] if lines else type(exc).__name__
    for w in caught:
        text = str(w.message).strip()
        if text and "CUDA" in text:
            return text.splitlines()[0]
    return error or "torch.cuda.is_available() is False"


class TorchPrimitives:
    def __init__(self) -> None:
        try:
            import torch
        except Exception as exc:
            raise NoCudaError(f"torch fails to import: {type(exc).__name__}: {exc}") from None
        self.t: Any = torch
        version = str(torch.__version__)
        if getattr(torch.version, "cuda", None) is None:
            if getattr(torch.version, "hip", None):
                raise NoCudaError(f"torch {version} is a ROCm build: bench-transfer measures NVIDIA GPUs")
            raise NoCudaError(f"torch {version} is a CPU-only build")
        if not torch.cuda.is_available():
            raise NoCudaError(f"torch {version} cannot use CUDA: {cuda_unusable_reason(torch)}")
        self.count = int(torch.cuda.device_count())
        if self.count == 0:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
            raise NoCudaError(f"torch sees no CUDA device{hint}")
        # One CPU thread: host buffers are then touched only by the thread pinned to the GPU's
        # NUMA node (torch's CPU ops would otherwise fill them from a thread pool placed anywhere).
        torch.set_num_threads(1)
        self.version = f"torch {version} (CUDA {torch.version.cuda})"
        self.spin_kernel = hasattr(torch.cuda, "_sleep")
        self._cycles_per_second: dict[int, float] = {}
        self._used: set[int] = set()  # devices with a context: only those are synchronised

    # -- devices ----------------------------------------------------------------------

    def device_count(self) -> int:
        return self.count

    def devices(self, ordinals: Sequence[int]) -> list[DeviceInfo]:
        t = self.t
        out = []
        for i in ordinals:
            p = t.cuda.get_device_properties(i)
            free, total = t.cuda.mem_get_info(i)
            pci = None
            if hasattr(p, "pci_bus_id") and hasattr(p, "pci_domain_id"):
                pci = f"{int(p.pci_domain_id):04x}:{int(p.pci_bus_id):02x}:{int(getattr(p, 'pci_device_id', 0)):02x}.0"
            out.append(
                DeviceInfo(
                    ordinal=i,
                    name=str(p.name),
                    uuid=str(getattr(p, "uuid", "")),
                    pci_bus_id=pci,
                    l2_bytes=int(getattr(p, "L2_cache_size", 0)),
                    total_bytes=int(total),
                    free_bytes=int(free),
                )
            )
        return out

    def can_access_peer(self, device: int, peer: int) -> bool:
        return bool(self.t.cuda.can_device_access_peer(device, peer))

    # -- timing -----------------------------------------------------------------------

    def synchronize(self, devices: Sequence[int]) -> None:
        for d in devices:
            self.t.cuda.synchronize(d)

    def record(self, device: int) -> Any:
        event = self.t.cuda.Event(enable_timing=True)
        event.record(self.t.cuda.current_stream(device))
        return event

    def elapsed(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0

    def spin(self, device: int, seconds: float) -> None:
        if not self.spin_kernel:
            return
        cycles = int(seconds * self._rate(device))
        with self.t.cuda.device(device):
            self.t.cuda._sleep(cycles)

    def _rate(self, device: int) -> float:
        """Spin-kernel cycles per second, measured twice (the first launch may load the module)."""
        if device not in self._cycles_per_second:
            rate = 1e9
            for _ in range(2):
                start = self.record(device)
                with self.t.cuda.device(device):
                    self.t.cuda._sleep(CALIBRATION_CYCLES)
                end = self.record(device)
                seconds = self.elapsed(start, end)
                if seconds > 0:
                    rate = CALIBRATION_CYCLES / seconds
            self._cycles_per_second[device] = rate
        return self._cycles_per_second[device]

    # -- buffers ----------------------------------------------------------------------

    def prepare(self, task: Task) -> TorchCopy:
        self._used.update(task.devices)
        return TorchCopy(self.t, task)

    def release(self) -> None:
        """Free the task's memory, pinned host blocks included: the next task allocates its own,
        on its own GPU's NUMA node (a cached pinned block would keep the old placement)."""
        t = self.t
        self.synchronize(sorted(self._used))
        t.cuda.empty_cache()
        accelerator = getattr(t, "accelerator", None)
        if accelerator is not None and hasattr(accelerator, "empty_host_cache"):
            accelerator.empty_host_cache()
        elif hasattr(t._C, "_host_emptyCache"):
            t._C._host_emptyCache()


class TorchCopy:
    """One task's buffers. Host buffers are allocated here, on the caller's CPUs."""

    def __init__(self, torch: Any, task: Task) -> None:
        t = self.t = torch
        self.task = task
        mode = task.mode
        n = task.nbytes // 4
        self.dev = t.device("cuda", task.device)
        self.asynchronous = mode.timed_with_events
        self.back: tuple[Any, Any] | None = None
        self.streams: tuple[Any, Any] | None = None
        if mode.is_host:
            host = t.empty(n, dtype=t.int32, pin_memory=mode.pinned)
            if mode.direction == "h2d":
                host.copy_(self._pattern(n, self.dev, 0))
                self.src, self.dst = host, t.empty(n, dtype=t.int32, device=self.dev)
            else:
                self.src, self.dst = self._pattern(n, self.dev, 0), host
                self.dst.fill_(SENTINEL)  # touch the host pages now, on this node's CPUs
        else:
            target = self.dev if task.peer is None else t.device("cuda", task.peer)
            self.src = self._pattern(n, self.dev, 0)
            self.dst = t.empty(n, dtype=t.int32, device=target)
            if mode is Mode.PEER_BIDIR:
                self.back = (self._pattern(n, target, 1), t.empty(n, dtype=t.int32, device=self.dev))
                self.streams = (t.cuda.Stream(device=self.dev), t.cuda.Stream(device=target))

    def _pattern(self, n: int, device: Any, salt: int) -> Any:
        t = self.t
        generator = t.Generator(device=device)
        generator.manual_seed(1_000_003 * self.task.index + salt)
        return t.empty(n, dtype=t.int32, device=device).random_(generator=generator)

    def run(self) -> None:
        if self.back is None or self.streams is None:
            self.dst.copy_(self.src, non_blocking=self.asynchronous)
            return
        forward, backward = self.streams
        with self.t.cuda.stream(forward):
            self.dst.copy_(self.src, non_blocking=True)
        with self.t.cuda.stream(backward):
            self.back[1].copy_(self.back[0], non_blocking=True)

    def start_sample(self) -> None:
        if self.streams is not None:
            timing = self.t.cuda.current_stream(self.dev)
            for side in self.streams:
                side.wait_stream(timing)

    def end_sample(self) -> None:
        if self.streams is not None:
            timing = self.t.cuda.current_stream(self.dev)
            for side in self.streams:
                timing.wait_stream(side)

    def clear(self) -> None:
        self.dst.fill_(SENTINEL)
        if self.back is not None:
            self.back[1].fill_(SENTINEL)

    def verify(self) -> bool:
        t = self.t
        ok = bool(t.equal(self.dst.to(self.dev), self.src.to(self.dev)))
        if self.back is not None:
            ok = ok and bool(t.equal(self.back[1], self.back[0].to(self.dev)))
        return ok

    def close(self) -> None:
        self.src = self.dst = None
        self.back = None
        self.streams = None
