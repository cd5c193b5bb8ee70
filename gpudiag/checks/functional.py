"""The functional test: each visible GPU really computes, in a spawned child with a timeout.

Per GPU: time the context creation, write and verify a memory pattern, run an fp32
matmul with TF32 off against a float64 CPU reference, and measure TFLOP/s. While the GPU
is busy the child prints a marker, so the parent can re-read the PCIe link and clock
events under load (an idle link downshifts; only a loaded one tells the truth).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from gpudiag.checks import FunctionalResult
from gpudiag.probe.child import ChildOutcome, run_python

LOADED_MARKER = "@@GPUDIAG_LOADED@@"

CHILD_CODE = r"""
import json, sys, time
import torch
MARK = __MARK__
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
results = []
for idx in range(torch.cuda.device_count()):
    r = {"torch_index": idx, "uuid": str(getattr(torch.cuda.get_device_properties(idx), "uuid", "")), "ok": False,
         "error": "", "context_seconds": None, "memory_ok": None, "matmul_rel_error": None, "tflops": None}
    try:
        t = time.perf_counter()
        dev = torch.device("cuda", idx)
        torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)
        r["context_seconds"] = time.perf_counter() - t
        n = 16 * 1024 * 1024
        pattern = (torch.arange(n, dtype=torch.int64) * 2654435761) % 2147483647
        r["memory_ok"] = bool(torch.equal(pattern.to(dev).mul(3).cpu(), pattern * 3))
        gen = torch.Generator().manual_seed(1234)
        a = torch.randn(1024, 1024, generator=gen)
        b = torch.randn(1024, 1024, generator=gen)
        ref = a.double() @ b.double()
        out = (a.to(dev) @ b.to(dev)).cpu().double()
        err = float((out - ref).norm() / ref.norm())
        r["matmul_rel_error"] = err if torch.isfinite(out).all() else float("nan")
        size = 4096
        x = torch.randn(size, size, device=dev)
        y = torch.randn(size, size, device=dev)
        for _ in range(3):
            x @ y
        torch.cuda.synchronize(dev)
        print(MARK, idx, flush=True)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        count, t0 = 0, time.perf_counter()
        start.record()
        while time.perf_counter() - t0 < 1.0:
            for _ in range(10):
                x @ y
            count += 10
            torch.cuda.synchronize(dev)
        end.record()
        torch.cuda.synchronize(dev)
        r["tflops"] = 2 * size**3 * count / (start.elapsed_time(end) / 1000) / 1e12
        r["ok"] = True
    except Exception as exc:
        r["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    results.append(r)
emit({"results": results})
""".replace("__MARK__", json.dumps(LOADED_MARKER))

LoadedReader = Callable[[int, str], tuple[int | None, tuple[int, int] | None, int | None]]


def run(
    python: str | None,
    nvml_index_of: Callable[[str], int | None],
    read_loaded: LoadedReader | None,
    timeout: float,
) -> tuple[tuple[FunctionalResult, ...] | None, str]:
    """Run the child; return per-GPU results, or None and why the test could not run at all."""
    loaded: dict[int, tuple[tuple[int, int] | None, int | None]] = {}

    def on_line(line: str) -> None:
        if line.startswith(LOADED_MARKER) and read_loaded is not None:
            torch_index = int(line.split()[1])
            _, pcie, events = read_loaded(torch_index, "")
            loaded[torch_index] = (pcie, events)

    result = run_python(CHILD_CODE, python=python, timeout=timeout, on_line=on_line)
    if result.outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):
        # A GPU that hangs or crashes the process under a plain matmul is a finding, not a tool failure.
        failed = FunctionalResult(
            None, -1, False, f"the test process {result.detail}", None, None, None, None, None, None
        )
        return (failed,), ""
    if not result.ok:
        return None, f"functional test could not run: {result.detail}"
    out = []
    for r in result.data.get("results", []):
        pcie, events = loaded.get(int(r["torch_index"]), (None, None))
        out.append(
            FunctionalResult(
                gpu_index=nvml_index_of(str(r.get("uuid", ""))),
                torch_index=int(r["torch_index"]),
                ok=bool(r["ok"]),
                error=str(r["error"]),
                context_seconds=r["context_seconds"],
                memory_ok=r["memory_ok"],
                matmul_rel_error=r["matmul_rel_error"],
                tflops=r["tflops"],
                loaded_pcie=pcie,
                loaded_clock_events=events,
            )
        )
    return tuple(out), ""
