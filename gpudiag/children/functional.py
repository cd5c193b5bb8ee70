"""Child: the functional test, each visible GPU really computes (see gpudiag.checks.functional_runner).

Run inside the torch probe's child (one import, one CUDA start-up) or by path on its own
(``python functional.py SETTINGS_JSON``). Standard library and :mod:`protocol` only; torch is
imported when the test runs. It says ``START`` for every GPU, then tests them all at once, a thread
per GPU (torch releases the GIL in its kernels and copies), so the test takes about as long for
eight GPUs as for one; each says ``LOADED`` once busy (the parent re-reads NVML under load), then
``GPU {json}``. ``NO_CUDA why`` if CUDA cannot start. The memory pattern and the float64 matmul
reference are built once, on the CPU, while the GPUs create their contexts.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import protocol

# Settings the parent passes (gpudiag.checks.functional_runner.settings): these are the defaults.
DEFAULTS: dict[str, Any] = {
    "device_type": "cuda",
    "load_seconds": 0.8,  # how long each GPU is kept busy for the TFLOP/s figure and the NVML re-read
    "matmul_n": 1024,  # accuracy test size (checked against float64 on the CPU)
    "load_n": 4096,  # throughput test size
    "words": 16 * 1024 * 1024,  # 128 MiB of int64
}


_LOCK = threading.Lock()  # one marked line at a time from the GPUs' threads


def _say(marker: str, *parts: object) -> None:
    with _LOCK:
        protocol.say(marker, *parts)


class Shared:
    """What every GPU is checked against, built once on the CPU (a 128 MiB pattern costs ~0.4 s)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.pattern: Any = None
        self.flipped: Any = None
        self.a: Any = None
        self.b: Any = None
        self.ref: Any = None

    def build(self, torch: Any, s: dict[str, Any]) -> None:
        try:
            pattern = torch.arange(s["words"], dtype=torch.int64)
            pattern.mul_(2654435761).remainder_(2147483647)  # in place: no 128 MiB temporaries
            self.pattern, self.flipped = pattern, pattern ^ 0x5A5A5A5A
            n = s["matmul_n"]
            gen = torch.Generator().manual_seed(1234)
            self.a = torch.randn(n, n, generator=gen)
            self.b = torch.randn(n, n, generator=gen)
            self.ref = self.a.double() @ self.b.double()
        except BaseException as exc:  # every GPU's test reports it
            self._error = exc
        finally:
            self._ready.set()

    def wait(self) -> Shared:
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self


def _test_one(torch: Any, idx: int, uuid: str, s: dict[str, Any], shared: Shared) -> dict[str, Any]:
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
        # The current CUDA device is per thread: make it this GPU, for the events and streams below.
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            _measure(torch, dev, idx, uuid, s, shared, r)
        r["ok"] = True
    except Exception as exc:
        r["error"] = protocol.first_line(exc)
    return r


def _measure(torch: Any, dev: Any, idx: int, uuid: str, s: dict[str, Any], shared: Shared, r: dict[str, Any]) -> None:
    t = time.perf_counter()
    torch.zeros(1, device=dev)
    torch.cuda.synchronize(dev)
    r["context_seconds"] = time.perf_counter() - t
    inputs = shared.wait()  # built by the main thread while the contexts were created
    on_gpu = inputs.pattern.to(dev)
    back, flipped = on_gpu.cpu(), (on_gpu ^ 0x5A5A5A5A).cpu()
    r["memory_ok"] = bool(torch.equal(back, inputs.pattern)) and bool(torch.equal(flipped, inputs.flipped))
    del on_gpu, back, flipped
    out = (inputs.a.to(dev) @ inputs.b.to(dev)).cpu().double()
    finite = bool(torch.isfinite(out).all())
    r["matmul_rel_error"] = float((out - inputs.ref).norm() / inputs.ref.norm()) if finite else float("nan")
    n_load = s["load_n"]
    x = torch.randn(n_load, n_load, device=dev)
    y = torch.randn(n_load, n_load, device=dev)
    for _ in range(3):
        x @ y
    torch.cuda.synchronize(dev)
    _say(protocol.LOADED, idx, uuid)
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


def run(settings: dict[str, Any]) -> None:
    """Test every visible GPU at once, a thread each, reporting as they go; emits no final result."""
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
    shared = Shared()
    threads = []
    for idx in range(count):
        uuid = str(getattr(torch.cuda.get_device_properties(idx), "uuid", "")) or "-"
        _say(protocol.START, idx, uuid)
        thread = threading.Thread(target=_report, args=(torch, idx, uuid, s, shared), daemon=True)
        thread.start()
        threads.append(thread)
    shared.build(torch, s)
    for thread in threads:
        thread.join()


def _report(torch: Any, idx: int, uuid: str, s: dict[str, Any], shared: Shared) -> None:
    result = _test_one(torch, idx, uuid, s, shared)
    with _LOCK:
        protocol.write(protocol.GPU, " " + json.dumps(result))


if __name__ == "__main__":
    run(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {})
    protocol.emit({"done": True})
    protocol.exit_now()
