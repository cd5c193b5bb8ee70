"""Child: the functional test, each visible GPU really computes (see gpudiag.checks.functional).

Run inside the torch probe's child (one import, one CUDA start-up) or by path on its own
(``python functional.py SETTINGS_JSON``). Standard library and :mod:`protocol` only; torch is
imported when the test runs. Per GPU it says ``START``, then ``LOADED`` once the GPU is busy
(the parent re-reads NVML under load), then ``GPU {json}``; ``NO_CUDA why`` if CUDA cannot start.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import protocol

# Settings the parent passes (gpudiag.checks.functional.settings): these are the defaults.
DEFAULTS: dict[str, Any] = {
    "device_type": "cuda",
    "load_seconds": 0.8,  # how long each GPU is kept busy for the TFLOP/s figure and the NVML re-read
    "matmul_n": 1024,  # accuracy test size (checked against float64 on the CPU)
    "load_n": 4096,  # throughput test size
    "words": 16 * 1024 * 1024,  # 128 MiB of int64
}


def _test_one(torch: Any, idx: int, uuid: str, s: dict[str, Any]) -> dict[str, Any]:
    r: dict[str, Any] = {
        "torch_index": idx,
        "uuid": uuid,
        "ok": False,
        "error": "",
        "context_seconds": None,
        "memory_ok": None,
        "matmul_rel_error": None,
        "tflops": None,
    }
    try:
        dev = torch.device(s["device_type"], idx)
        t = time.perf_counter()
        torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)
        r["context_seconds"] = time.perf_counter() - t
        pattern = (torch.arange(s["words"], dtype=torch.int64) * 2654435761) % 2147483647
        on_gpu = pattern.to(dev)
        back, flipped = on_gpu.cpu(), (on_gpu ^ 0x5A5A5A5A).cpu()
        r["memory_ok"] = bool(torch.equal(back, pattern)) and bool(torch.equal(flipped, pattern ^ 0x5A5A5A5A))
        del on_gpu, back, flipped
        n_acc, n_load = s["matmul_n"], s["load_n"]
        gen = torch.Generator().manual_seed(1234)
        a = torch.randn(n_acc, n_acc, generator=gen)
        b = torch.randn(n_acc, n_acc, generator=gen)
        ref = a.double() @ b.double()
        out = (a.to(dev) @ b.to(dev)).cpu().double()
        finite = bool(torch.isfinite(out).all())
        r["matmul_rel_error"] = float((out - ref).norm() / ref.norm()) if finite else float("nan")
        x = torch.randn(n_load, n_load, device=dev)
        y = torch.randn(n_load, n_load, device=dev)
        for _ in range(3):
            x @ y
        torch.cuda.synchronize(dev)
        protocol.say(protocol.LOADED, idx, uuid)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n, t0 = 0, time.perf_counter()
        start.record()
        while time.perf_counter() - t0 < s["load_seconds"]:
            for _ in range(5):
                x @ y
            n += 5
            torch.cuda.synchronize(dev)
        end.record()
        torch.cuda.synchronize(dev)
        r["tflops"] = 2 * n_load**3 * n / (start.elapsed_time(end) / 1000) / 1e12
        del x, y
        torch.cuda.empty_cache()
        r["ok"] = True
    except Exception as exc:
        r["error"] = protocol.first_line(exc)
    return r


def run(settings: dict[str, Any]) -> None:
    """Test every visible GPU in turn, reporting as it goes; emits no final result."""
    torch: Any = importlib.import_module("torch")  # Any: the child runs whatever torch it finds

    s = {**DEFAULTS, **settings}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.cuda.init()  # driver and runtime start-up, so each GPU's time below is its context alone
        count = torch.cuda.device_count()
    except Exception as exc:
        protocol.say(protocol.NO_CUDA, protocol.first_line(exc))
        return
    for idx in range(count):
        uuid = str(getattr(torch.cuda.get_device_properties(idx), "uuid", "")) or "-"
        protocol.say(protocol.START, idx, uuid)
        protocol.write(protocol.GPU, " " + json.dumps(_test_one(torch, idx, uuid, s)))


if __name__ == "__main__":
    run(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    protocol.emit({"done": True})
