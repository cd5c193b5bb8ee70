"""gpudiag's copy figures next to a raw cudaMemcpyAsync reference, in one run, on one GPU.

The reference calls the CUDA runtime directly through ctypes (libcudart from the nvidia
wheels torch depends on, or the system's): pinned host buffers from cudaMallocHost, device
buffers from cudaMalloc, CUDA events around `iters` cudaMemcpyAsync calls, median of
samples. Target: gpudiag's pinned H2D/D2H and D2D within 5 % of it.
Usage: python benchmarks/reference_copy.py [--size 256MiB] [--iters 16] [--samples 5]
Without a usable CUDA device it says so and exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import site
import statistics
import sys

H2D, D2H, D2D = 1, 2, 3  # cudaMemcpyKind


def load_cudart() -> ctypes.CDLL | None:
    patterns = []
    for base in [*site.getsitepackages(), site.getusersitepackages()]:
        patterns.append(os.path.join(base, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
    patterns += ["/usr/local/cuda/lib64/libcudart.so*", "/usr/lib/x86_64-linux-gnu/libcudart.so*"]
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


def check(rt: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        raise RuntimeError(f"{what} failed with CUDA error {code}")


def reference(rt: ctypes.CDLL, kind: int, nbytes: int, iters: int, samples: int) -> float:
    host, dev_a, dev_b = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check(rt.cudaMallocHost(ctypes.byref(host), ctypes.c_size_t(nbytes)), "cudaMallocHost")
    check(rt.cudaMalloc(ctypes.byref(dev_a), ctypes.c_size_t(nbytes)), "cudaMalloc")
    check(rt.cudaMalloc(ctypes.byref(dev_b), ctypes.c_size_t(nbytes)), "cudaMalloc")
    dst, src = {H2D: (dev_a, host), D2H: (host, dev_a), D2D: (dev_b, dev_a)}[kind]
    start, end = ctypes.c_void_p(), ctypes.c_void_p()
    check(rt.cudaEventCreate(ctypes.byref(start)), "cudaEventCreate")
    check(rt.cudaEventCreate(ctypes.byref(end)), "cudaEventCreate")
    rates = []
    try:
        for _ in range(4):  # warm-up
            check(rt.cudaMemcpyAsync(dst, src, ctypes.c_size_t(nbytes), kind, None), "cudaMemcpyAsync")
        check(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        for _ in range(samples):
            check(rt.cudaEventRecord(start, None), "cudaEventRecord")
            for _ in range(iters):
                check(rt.cudaMemcpyAsync(dst, src, ctypes.c_size_t(nbytes), kind, None), "cudaMemcpyAsync")
            check(rt.cudaEventRecord(end, None), "cudaEventRecord")
            check(rt.cudaEventSynchronize(end), "cudaEventSynchronize")
            ms = ctypes.c_float()
            check(rt.cudaEventElapsedTime(ctypes.byref(ms), start, end), "cudaEventElapsedTime")
            rates.append(nbytes * iters / (ms.value / 1000))
    finally:
        rt.cudaFreeHost(host)
        rt.cudaFree(dev_a)
        rt.cudaFree(dev_b)
    return statistics.median(rates)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="256MiB")
    parser.add_argument("--iters", type=int, default=16)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    from gpudiag.units import parse_size

    nbytes = parse_size(args.size)
    try:
        import torch
    except ImportError:
        print("no usable CUDA device: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}, CUDA build {torch.version.cuda}"
        print(f"no usable CUDA device here ({build}): nothing to compare")
        return 0
    rt = load_cudart()
    if rt is None:
        print("libcudart not found: cannot run the reference")
        return 0
    from gpudiag.bench import engine
    from gpudiag.bench.plan import Mode, make_plan

    plan = make_plan("h2d_pinned_async,d2h_pinned_async,d2d", str(nbytes), False, args.iters, args.samples, (0,))
    ours = {
        m.mode: m.bandwidth.median
        for m in engine.run(plan, engine.TorchBackend({0: None}), lambda s: None, lambda d: None)
    }
    print(f"device: {torch.cuda.get_device_name(0)}; size {args.size}; {args.iters} copies x {args.samples} samples")
    worst = 0.0
    for mode, kind in ((Mode.H2D_PINNED_ASYNC, H2D), (Mode.D2H_PINNED_ASYNC, D2H), (Mode.D2D, D2D)):
        ref = reference(rt, kind, nbytes, args.iters, args.samples)
        diff = 100 * (ours[mode] - ref) / ref
        worst = max(worst, abs(diff))
        figures = f"gpudiag {ours[mode] / 1e9:8.2f} GB/s   cudaMemcpyAsync {ref / 1e9:8.2f} GB/s"
        print(f"{mode.value:18} {figures}   {diff:+.1f}%")
    print(f"largest difference {worst:.1f}% (target within 5%)")
    return 0 if worst <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
