"""gpudiag's copy figures next to a raw cudaMemcpyAsync reference, in one run, on the same buffers.

For pinned H2D, pinned D2H and D2D on one GPU: gpudiag's torch primitives allocate the
buffers (host memory on the GPU's NUMA node) and gpudiag's loop measures them; then the
same buffers are copied with plain ``cudaMemcpyAsync`` calls between two CUDA events (CuPy's
runtime binding when CuPy is installed, else ctypes on the libcudart that torch ships), with
the same warm-up, copies per sample and samples, median of the samples. The reference has
no spin kernel and no torch dispatch: the gap between the two is gpudiag's overhead.
Target: within 5 %. ``--time-default`` also times a default ``gpudiag bench-transfer`` run
(target: under 15 s). ``--json FILE`` writes the figures for the README.

Without a usable CUDA device it says why and exits 0; everything before the first CUDA call
(:func:`setup`: the options, bench-transfer's plan, the copies) runs anywhere, and is tested on CPU.

Usage: python benchmarks/reference_copy.py [--size 256MiB] [--iters 16] [--samples 3]
                                           [--device 0] [--time-default] [--json FILE]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

H2D, D2H, D2D = 1, 2, 3  # cudaMemcpyKind
TARGET_PERCENT = 5.0


class RawCopier:
    """cudaMemcpyAsync on the legacy default stream, timed with CUDA events."""

    name = ""

    def event(self) -> Any:
        raise NotImplementedError

    def record(self, event: Any) -> None:
        raise NotImplementedError

    def elapsed_seconds(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def copy(self, dst: int, src: int, nbytes: int, kind: int) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def measure(self, dst: int, src: int, nbytes: int, kind: int, warmup: int, iters: int, samples: int) -> list[float]:
        """Seconds per copy, one figure per sample."""
        for _ in range(warmup):
            self.copy(dst, src, nbytes, kind)
        self.synchronize()
        start, end = self.event(), self.event()
        out = []
        for _ in range(samples):
            self.record(start)
            for _ in range(iters):
                self.copy(dst, src, nbytes, kind)
            self.record(end)
            out.append(self.elapsed_seconds(start, end) / iters)
        return out


class CupyCopier(RawCopier):
    name = "CuPy cudaMemcpyAsync"

    def __init__(self, device: int) -> None:
        import importlib

        self.cp: Any = importlib.import_module("cupy")
        cupy = self.cp
        cupy.cuda.Device(device).use()

    def event(self) -> Any:
        return self.cp.cuda.Event()

    def record(self, event: Any) -> None:
        event.record(self.cp.cuda.Stream.null)

    def elapsed_seconds(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(self.cp.cuda.get_elapsed_time(start, end)) / 1000.0

    def copy(self, dst: int, src: int, nbytes: int, kind: int) -> None:
        self.cp.cuda.runtime.memcpyAsync(dst, src, nbytes, kind, 0)

    def synchronize(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()


def cudart_candidates() -> list[str]:
    """libcudart from the nvidia wheels torch depends on, torch's own lib, then the system's."""
    import site

    bases = [*site.getsitepackages(), site.getusersitepackages()]
    patterns = [os.path.join(b, "nvidia", "*", "lib", "libcudart.so*") for b in bases]
    patterns += [os.path.join(b, "nvidia", "*", "*", "lib", "libcudart.so*") for b in bases]
    patterns += [os.path.join(b, "torch", "lib", "libcudart*.so*") for b in bases]
    patterns += ["/usr/local/cuda/lib64/libcudart.so*", "/usr/lib/x86_64-linux-gnu/libcudart.so*"]
    found: list[str] = []
    for pattern in patterns:
        found += [p for p in sorted(glob.glob(pattern)) if p not in found]
    return found


class CtypesCopier(RawCopier):
    name = "libcudart cudaMemcpyAsync (ctypes)"

    def __init__(self, device: int, path: str) -> None:
        rt = self.rt = ctypes.CDLL(path)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        rt.cudaSetDevice.argtypes = [ctypes.c_int]
        rt.cudaMemcpyAsync.argtypes = [vp, vp, sz, ctypes.c_int, vp]
        rt.cudaEventCreate.argtypes = [ctypes.POINTER(vp)]
        rt.cudaEventRecord.argtypes = [vp, vp]
        rt.cudaEventSynchronize.argtypes = [vp]
        rt.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), vp, vp]
        self.name = f"{self.name}, {os.path.basename(path)}"
        self.check(rt.cudaSetDevice(device), "cudaSetDevice")

    @staticmethod
    def check(code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"{what} failed with CUDA error {code}")

    def event(self) -> Any:
        event = ctypes.c_void_p()
        self.check(self.rt.cudaEventCreate(ctypes.byref(event)), "cudaEventCreate")
        return event

    def record(self, event: Any) -> None:
        self.check(self.rt.cudaEventRecord(event, None), "cudaEventRecord")

    def elapsed_seconds(self, start: Any, end: Any) -> float:
        self.check(self.rt.cudaEventSynchronize(end), "cudaEventSynchronize")
        ms = ctypes.c_float()
        self.check(self.rt.cudaEventElapsedTime(ctypes.byref(ms), start, end), "cudaEventElapsedTime")
        return ms.value / 1000.0

    def copy(self, dst: int, src: int, nbytes: int, kind: int) -> None:
        self.check(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, None), "cudaMemcpyAsync")

    def synchronize(self) -> None:
        self.check(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")


def raw_copier(device: int) -> RawCopier | None:
    try:
        return CupyCopier(device)
    except Exception:  # not installed, or no CUDA for it: fall back to ctypes
        pass
    for path in cudart_candidates():
        try:
            return CtypesCopier(device, path)
        except (OSError, RuntimeError, AttributeError):
            continue
    return None


def gpu_numa_node(uuid: str, pci_bus_id: str | None) -> int | None:
    """The GPU's NUMA node, as gpudiag bench-transfer finds it: the sysfs node of its PCI device,
    read with the facts bench-transfer reads (a reading that fails is that reading's N/A)."""
    from gpudiag.bench.placement import pci_numa_node
    from gpudiag.bench.plan import DeviceInfo
    from gpudiag.bench.preflight import numa_maps
    from gpudiag.children.bench import numa_node_for
    from gpudiag.errors import GpudiagError
    from gpudiag.model import FactGroup
    from gpudiag.probe.collect import open_source

    try:
        with open_source(facts=frozenset({FactGroup.PCIE, FactGroup.NUMA})) as source:
            gpus = source.read().gpus
    except GpudiagError:
        return None
    by_uuid, by_pci = numa_maps(gpus, pci_numa_node)
    return numa_node_for(DeviceInfo(0, "", uuid, pci_bus_id, 0, 0, 0), by_uuid, by_pci)


def time_default_run() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpudiag", "bench-transfer", "--json"], capture_output=True, check=False)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Setup:
    """Everything decided before the first CUDA call: the options, the plan gpudiag measures with,
    and each copy as gpudiag's task beside the reference's cudaMemcpyKind."""

    args: argparse.Namespace
    nbytes: int
    plan: Any  # gpudiag.bench.plan.Plan
    copies: list[tuple[Any, int]]  # (gpudiag.bench.plan.Task, cudaMemcpyKind)


def setup(argv: list[str] | None = None) -> Setup:
    """Parse the options and plan the run, as `gpudiag bench-transfer --sizes SIZE` would, without
    touching CUDA (a bad option exits 2 with argparse's message)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", default="256MiB")
    parser.add_argument("--iters", type=int, default=16)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--time-default", action="store_true")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)

    from gpudiag.bench.plan import Mode, Task, make_plan
    from gpudiag.errors import UsageError
    from gpudiag.units import parse_size

    try:
        size = parse_size(args.size)
    except UsageError as exc:
        parser.error(f"--size: {exc.message}")
    try:  # bench-transfer's own plan: a size in bytes with its unit, rounded to whole elements
        plan = make_plan(None, f"{size}B", False, args.iters, args.samples, str(args.device))
    except UsageError as exc:
        parser.error(exc.message)
    assert plan.sizes is not None
    nbytes = plan.sizes[0]  # whole 4-byte elements, as bench-transfer copies them
    kinds = ((Mode.H2D_PINNED_ASYNC, H2D), (Mode.D2H_PINNED_ASYNC, D2H), (Mode.D2D, D2D))
    copies = [(Task(index, mode, args.device, None, nbytes), kind) for index, (mode, kind) in enumerate(kinds)]
    return Setup(args, nbytes, plan, copies)


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    run = setup(argv)
    args, nbytes, plan = run.args, run.nbytes, run.plan

    from gpudiag.bench.engine import NoCudaError, measure
    from gpudiag.bench.placement import nodes_with_cpus, placed_on

    try:
        from gpudiag.bench.torch_prims import TorchPrimitives

        prims = TorchPrimitives()
    except NoCudaError as exc:
        out(f"no usable CUDA device: {exc}: nothing to compare (run this on a GPU machine)")
        return 0
    copier = raw_copier(args.device)
    if copier is None:
        out("neither CuPy nor a loadable libcudart was found: cannot run the reference")
        return 0
    device = prims.devices([args.device])[0]
    out(f"{device.name} (cuda:{args.device}), {args.size} per copy, {args.iters} copies x {args.samples} samples")
    out(f"reference: {copier.name}; gpudiag: {prims.version}")
    nodes = nodes_with_cpus()
    node = gpu_numa_node(device.uuid, device.pci_bus_id)
    figures: list[dict[str, Any]] = []
    for task, kind in run.copies:
        mode = task.mode
        with placed_on(node, nodes):
            copy = prims.prepare(task)
            ours = measure(prims, copy, task, plan, lambda: None)
            copy.clear()
            raw = copier.measure(copy.dst.data_ptr(), copy.src.data_ptr(), nbytes, kind, 4, args.iters, args.samples)
            prims.synchronize([args.device])
            raw_verified = copy.verify()
            copy.close()
            prims.release()
        gpudiag_rate = nbytes / statistics.median(ours.seconds_per_copy)
        raw_rate = nbytes / statistics.median(raw)
        diff = 100 * (gpudiag_rate - raw_rate) / raw_rate
        figures.append(
            {
                "mode": mode.value,
                "gpudiag_bytes_per_s": gpudiag_rate,
                "reference_bytes_per_s": raw_rate,
                "difference_percent": diff,
                "gpudiag_verified": ours.verified,
                "reference_verified": raw_verified,
            }
        )
        out(
            f"{mode.value:18} gpudiag {gpudiag_rate / 1e9:9.2f} GB/s   reference {raw_rate / 1e9:9.2f} GB/s   "
            f"{diff:+6.1f}%   verified {ours.verified}/{raw_verified}"
        )
    worst = max(abs(f["difference_percent"]) for f in figures)
    out(f"largest difference {worst:.1f}% (target: within {TARGET_PERCENT:.0f}%)")
    result: dict[str, Any] = {
        "device": device.name,
        "size_bytes": nbytes,
        "copies_per_sample": args.iters,
        "samples": args.samples,
        "reference": copier.name,
        "torch": prims.version,
        "host": platform.node(),
        "figures": figures,
    }
    if args.time_default:
        seconds = time_default_run()
        result["default_run_seconds"] = seconds
        out(f"default `gpudiag bench-transfer` run: {seconds:.1f} s (target: under 15 s)")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
    within = worst <= TARGET_PERCENT and all(f["gpudiag_verified"] and f["reference_verified"] for f in figures)
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
