"""The functional test: each visible GPU really computes, in a child process with a timeout.

Per GPU: time the context creation, write and verify a memory pattern, run an fp32
matmul with TF32 off against a float64 CPU reference, and measure TFLOP/s. The child is
started with fork+exec from a parent that never initialised CUDA. `gpudiag check` runs the
test in the torch probe's own child (:func:`gpudiag.probe.torch_runtime.probe_then`: one
import, one CUDA initialisation); :func:`run` runs it in a child of its own. Either way the
child reports as it goes:

- ``START idx uuid`` before each GPU, so a hang or crash is pinned to the GPU it happened on
  (and the GPUs finished before it keep their results);
- ``LOADED idx uuid`` once the GPU is busy with matmuls, so the parent re-reads the PCIe
  link and clock events from NVML under load (an idle link downshifts; only a loaded one
  tells the truth);
- ``GPU {json}`` with each GPU's result; ``UNAVAILABLE reason`` when CUDA cannot start.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpudiag.checks import FunctionalResult
from gpudiag.probe.child import ChildOutcome, ChildResult, run_python

START_MARKER = "@@GPUDIAG_START@@"
LOADED_MARKER = "@@GPUDIAG_LOADED@@"
RESULT_MARKER = "@@GPUDIAG_GPU@@"
UNAVAILABLE_MARKER = "@@GPUDIAG_NO_CUDA@@"

LOAD_SECONDS = 0.8  # how long each GPU is kept busy for the TFLOP/s figure and the NVML re-read
MATMUL_N = 1024  # accuracy test size (checked against float64 on the CPU)
LOAD_N = 4096  # throughput test size
PATTERN_WORDS = 16 * 1024 * 1024  # 128 MiB of int64
SECONDS_PER_GPU = 20.0  # added to the child's timeout for each GPU it tests

# Defines gpudiag_functional(); emits nothing, so it can run after the torch probe in its child.
_FUNCTION_TEMPLATE = r"""
def gpudiag_functional():
    import json, sys, time
    import torch
    START, LOADED, RESULT, UNAVAILABLE = __MARKS__
    DEVICE_TYPE, LOAD_SECONDS, MATMUL_N, LOAD_N, WORDS = __SETTINGS__
    def say(*parts):
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()
    def first_line(exc):
        text = str(exc).strip()
        return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.cuda.init()  # driver and runtime start-up, so each GPU's time below is its context alone
        count = torch.cuda.device_count()
    except Exception as exc:
        say(UNAVAILABLE, first_line(exc))
        return
    for idx in range(count):
        uuid = str(getattr(torch.cuda.get_device_properties(idx), "uuid", "")) or "-"
        say(START, idx, uuid)
        r = {"torch_index": idx, "uuid": uuid, "ok": False, "error": "", "context_seconds": None,
             "memory_ok": None, "matmul_rel_error": None, "tflops": None}
        try:
            dev = torch.device(DEVICE_TYPE, idx)
            t = time.perf_counter()
            torch.zeros(1, device=dev)
            torch.cuda.synchronize(dev)
            r["context_seconds"] = time.perf_counter() - t
            pattern = (torch.arange(WORDS, dtype=torch.int64) * 2654435761) % 2147483647
            on_gpu = pattern.to(dev)
            back, flipped = on_gpu.cpu(), (on_gpu ^ 0x5A5A5A5A).cpu()
            r["memory_ok"] = bool(torch.equal(back, pattern)) and bool(torch.equal(flipped, pattern ^ 0x5A5A5A5A))
            del on_gpu, back, flipped
            gen = torch.Generator().manual_seed(1234)
            a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
            b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
            ref = a.double() @ b.double()
            out = (a.to(dev) @ b.to(dev)).cpu().double()
            finite = bool(torch.isfinite(out).all())
            r["matmul_rel_error"] = float((out - ref).norm() / ref.norm()) if finite else float("nan")
            x = torch.randn(LOAD_N, LOAD_N, device=dev)
            y = torch.randn(LOAD_N, LOAD_N, device=dev)
            for _ in range(3):
                x @ y
            torch.cuda.synchronize(dev)
            say(LOADED, idx, uuid)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            n, t0 = 0, time.perf_counter()
            start.record()
            while time.perf_counter() - t0 < LOAD_SECONDS:
                for _ in range(5):
                    x @ y
                n += 5
                torch.cuda.synchronize(dev)
            end.record()
            torch.cuda.synchronize(dev)
            r["tflops"] = 2 * LOAD_N**3 * n / (start.elapsed_time(end) / 1000) / 1e12
            del x, y
            torch.cuda.empty_cache()
            r["ok"] = True
        except Exception as exc:
            r["error"] = first_line(exc)
        say(RESULT, json.dumps(r))
"""


def functional_code(
    device_type: str = "cuda",
    load_seconds: float = LOAD_SECONDS,
    matmul_n: int = MATMUL_N,
    load_n: int = LOAD_N,
    words: int = PATTERN_WORDS,
) -> str:
    """The code that runs the test (defines and calls gpudiag_functional; emits nothing).

    Tests run this very code on the CPU with smaller sizes.
    """
    settings = (device_type, load_seconds, matmul_n, load_n, words)
    marks = (START_MARKER, LOADED_MARKER, RESULT_MARKER, UNAVAILABLE_MARKER)
    body = _FUNCTION_TEMPLATE.replace("__MARKS__", repr(marks)).replace("__SETTINGS__", repr(settings))
    return body + "gpudiag_functional()\n"


CODE = functional_code()

# NVML index -> (PCIe (gen, width), clock event bits) read now, while that GPU is busy.
LoadedReader = Callable[[int], tuple[tuple[int, int] | None, int | None]]


class Collector:
    """Reads the child's lines as they come, then turns them and how the child ended into results.

    ``nvml_index_of`` maps a torch device UUID (without its ``GPU-`` prefix) to the NVML index.
    """

    def __init__(self, nvml_index_of: Callable[[str], int | None], read_loaded: LoadedReader | None) -> None:
        self._index_of = nvml_index_of
        self._read_loaded = read_loaded
        self._loaded: dict[int, tuple[tuple[int, int] | None, int | None]] = {}
        self._finished: list[dict[str, Any]] = []
        self._current: tuple[int, str] | None = None  # the GPU being tested now: (torch index, uuid)
        self._unavailable = ""

    def on_line(self, line: str) -> None:
        marker, _, rest = line.partition(" ")
        if marker == RESULT_MARKER:
            try:
                data = json.loads(rest)
            except json.JSONDecodeError:
                return
            if isinstance(data, dict):
                self._finished.append(data)
                self._current = None
            return
        if marker == UNAVAILABLE_MARKER:
            self._unavailable = rest or "unknown error"
            return
        if marker not in (START_MARKER, LOADED_MARKER):
            return
        idx, _, uuid = rest.partition(" ")
        if not idx.isdigit():
            return
        if marker == START_MARKER:
            self._current = (int(idx), uuid)
        elif self._read_loaded is not None:
            index = self._index_of(uuid)
            if index is not None:
                self._loaded[int(idx)] = self._read_loaded(index)

    def finish(self, result: ChildResult) -> tuple[tuple[FunctionalResult, ...] | None, str]:
        """Per-GPU results, or None and why the test could not run at all; a non-empty reason with
        results means it stopped early (the GPUs after the last result were not tested)."""
        out = [self._result(r) for r in self._finished]
        if result.outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):
            # A GPU that hangs or crashes the process under a plain matmul is a finding, not a tool failure.
            what = f"the test process {result.detail}"
            if self._current is not None:
                torch_index, uuid = self._current
                later = " (GPUs after it were not tested)"
                out.append(_failed(self._index_of(uuid), torch_index, f"{what} while testing this GPU{later}"))
            else:
                out.append(_failed(None, -1, what + (" after the last GPU" if out else " before testing any GPU")))
            return tuple(out), ""
        if self._unavailable:
            return None, f"functional test could not run: CUDA unusable in the test process: {self._unavailable}"
        if not result.ok:
            if out:  # some GPUs finished: keep them, and say the rest could not be run
                return tuple(out), f"functional test stopped early: {result.detail}"
            return None, f"functional test could not run: {result.detail}"
        return tuple(out), ""

    def _result(self, r: dict[str, Any]) -> FunctionalResult:
        torch_index = int(r.get("torch_index", -1))
        pcie, events = self._loaded.get(torch_index, (None, None))
        memory_ok = r.get("memory_ok")
        return FunctionalResult(
            gpu_index=self._index_of(str(r.get("uuid", ""))),
            torch_index=torch_index,
            ok=bool(r.get("ok")),
            error=str(r.get("error", "")),
            context_seconds=_float(r.get("context_seconds")),
            memory_ok=None if memory_ok is None else bool(memory_ok),
            matmul_rel_error=_float(r.get("matmul_rel_error")),
            tflops=_float(r.get("tflops")),
            loaded_pcie=pcie,
            loaded_clock_events=events,
        )


def run(
    python: str | None,
    nvml_index_of: Callable[[str], int | None],
    read_loaded: LoadedReader | None,
    timeout: float,
    code: str = CODE,
) -> tuple[tuple[FunctionalResult, ...] | None, str]:
    """Run the test in a child of its own (``code`` ends with ``emit``-free test code)."""
    collector = Collector(nvml_index_of, read_loaded)
    result = run_python(code + "emit({'done': True})\n", python=python, timeout=timeout, on_line=collector.on_line)
    return collector.finish(result)


def _failed(gpu_index: int | None, torch_index: int, error: str) -> FunctionalResult:
    return FunctionalResult(gpu_index, torch_index, False, error, None, None, None, None, None, None)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
