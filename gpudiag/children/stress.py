"""Child: the targeted stress (``stress.gemm``, see gpudiag.checks.deep.stress for the parent side).

``python stress.py SETTINGS_JSON``. Standard library, :mod:`protocol` and :mod:`diag` only; torch
imported when the test runs. Every visible GPU at once, a thread each, for ``seconds``: the same
``n``×``n`` matrix product again and again (``dtype`` "auto": bf16 from compute capability 8.0, fp16
on 7.x, fp32 below, so that the tensor cores run at full load where there are any), timed in
windows of about ``window_seconds``; every ``check_every`` windows the product is computed once
more and compared with the first one (same inputs, same kernel: a GPU that computes wrong under
heat and load differs).

Events: ``start``, ``loaded`` (after the first window: the parent's NVML samples count from there),
``window`` (``tflops`` of each window), ``result``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import diag, protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import diag
    import protocol

DEFAULTS: dict[str, Any] = {
    "device_type": "cuda",
    "seconds": 600.0,
    "n": 8192,
    "dtype": "auto",
    "window_seconds": 1.0,
    "check_every": 30,  # windows between re-computed products (~30 s)
    "tolerance": 1e-2,  # relative to the product's largest element: bf16 keeps 8 bits of mantissa
}


def _difference(torch: Any, product: Any, reference: Any) -> float:
    """The largest elementwise difference relative to the reference's largest element; inf on NaN/Inf."""
    got, want = product.float(), reference.float()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    scale = float(want.abs().max()) or 1.0
    return float((got - want).abs().max()) / scale


def _dtype(torch: Any, dev: Any, wanted: str) -> str:
    """bf16 where the tensor cores have it (sm_80+), fp16 on Volta and Turing, fp32 before them."""
    if wanted != "auto":
        return wanted
    if dev.type != "cuda":
        return "float32"
    major, _ = torch.cuda.get_device_capability(dev)
    return "bfloat16" if major >= 8 else "float16" if major >= 7 else "float32"


def _stress(torch: Any, device: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    index = device["index"]
    r: dict[str, Any] = {"device": index, "uuid": device["uuid"], "ok": False, "error": ""}
    dev = diag.device(torch, s, index)
    try:
        r["dtype"] = _dtype(torch, dev, str(s["dtype"]))
        n, dtype = int(s["n"]), getattr(torch, r["dtype"])
        generator = torch.Generator(device=dev).manual_seed(1234 + index)
        a = torch.randn(n, n, device=dev, dtype=dtype, generator=generator)
        b = torch.randn(n, n, device=dev, dtype=dtype, generator=generator)
        out = torch.empty(n, n, device=dev, dtype=dtype)
        torch.matmul(a, b, out=out)
        reference = out.clone()
        diag.sync(torch, dev, index)
        flops = 2.0 * n**3
        per_window, windows, checks, errors, worst = 1, 0, 0, 0, 0.0
        begun = time.monotonic()
        end = begun + float(s["seconds"])
        while True:
            t0 = time.perf_counter()
            for _ in range(per_window):
                torch.matmul(a, b, out=out)
            diag.sync(torch, dev, index)
            took = time.perf_counter() - t0
            windows += 1
            diag.event("window", device=index, t=time.monotonic() - begun, tflops=flops * per_window / took / 1e12)
            if windows == 1:
                diag.event("loaded", device=index)
            # Enough products for a window of about window_seconds (launches are asynchronous).
            per_window = max(1, min(per_window * 4, round(per_window * float(s["window_seconds"]) / max(took, 1e-6))))
            if windows % int(s["check_every"]) == 0 or time.monotonic() >= end:
                torch.matmul(a, b, out=out)
                difference = _difference(torch, out, reference)
                checks += 1
                worst = max(worst, difference)
                errors += difference > float(s["tolerance"])
            if time.monotonic() >= end:
                break
        r.update(ok=True, seconds=time.monotonic() - begun, windows=windows, checks=checks, result_errors=errors)
        r["worst_difference"] = worst if worst != float("inf") else None
    except Exception as exc:
        r["error"] = protocol.first_line(exc)
    finally:
        with contextlib.suppress(Exception):  # the device is gone: the process's end frees it
            diag.release(torch, dev)
    return r


def run(torch: Any, devices: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    s = {**DEFAULTS, **settings}
    if s["device_type"] == "cuda":
        # The fp32 stress (dtype float32) measures fp32 units, not TF32 tensor cores.
        torch.backends.cuda.matmul.allow_tf32 = False

    def work(device: dict[str, Any]) -> None:
        diag.event("start", device=device["index"])
        diag.event("result", **_stress(torch, device, s))

    diag.each_device(devices, work)


if __name__ == "__main__":
    diag.main(run, sys.argv)
    protocol.exit_now()
