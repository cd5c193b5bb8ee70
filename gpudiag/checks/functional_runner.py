"""The functional test: each visible GPU really computes, in a child process with a timeout.

Per GPU: time the context creation, write and verify a memory pattern, run an fp32
matmul with TF32 off against a float64 CPU reference, and measure TFLOP/s. The child is
started with fork+exec from a parent that never initialised CUDA. `gpudiag check` runs the
test in the torch probe's own child (:mod:`gpudiag.checks.gather`: one import, one CUDA
initialisation); :func:`run` runs it in a child of its own. The child is
:mod:`gpudiag.children.functional`; this module is its parent side. The child reports as it goes:

- ``START idx uuid`` for each GPU before the GPUs are tested, all at once (a thread each), so a
  hang is pinned to the GPU that never finished and a crash to the GPUs still under test (the GPUs
  that finished keep their results);
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
from gpudiag.children import functional as child
from gpudiag.children import protocol
from gpudiag.probe.child import ChildOutcome, ChildResult, run_child, script

LOAD_SECONDS = float(child.DEFAULTS["load_seconds"])
SECONDS_PER_GPU = 20.0  # the functional test's own budget, per GPU it tests


def settings(
    device_type: str = "cuda",
    load_seconds: float = LOAD_SECONDS,
    matmul_n: int = int(child.DEFAULTS["matmul_n"]),
    load_n: int = int(child.DEFAULTS["load_n"]),
    words: int = int(child.DEFAULTS["words"]),
) -> dict[str, Any]:
    """What the child is told (tests run the very same child on the CPU with smaller sizes)."""
    return {
        "device_type": device_type,
        "load_seconds": load_seconds,
        "matmul_n": matmul_n,
        "load_n": load_n,
        "words": words,
    }


def budget(gpus: int) -> float:
    """Seconds the functional test may take, apart from torch's import and CUDA start-up."""
    return SECONDS_PER_GPU * max(gpus, 1)


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
        self._in_flight: dict[int, str] = {}  # the GPUs under test now: torch index -> uuid
        self._unavailable = ""

    def on_line(self, line: str) -> None:
        marker, _, rest = line.partition(" ")  # the markers of gpudiag.children.protocol
        if marker == protocol.GPU:
            try:
                data = json.loads(rest)
            except json.JSONDecodeError:
                return
            if isinstance(data, dict):
                self._finished.append(data)
                self._in_flight.pop(_int(data.get("torch_index")), None)
            return
        if marker == protocol.NO_CUDA:
            self._unavailable = rest or "unknown error"
            return
        if marker not in (protocol.START, protocol.LOADED):
            return
        idx, _, uuid = rest.partition(" ")
        if not idx.isdigit():
            return
        if marker == protocol.START:
            self._in_flight[int(idx)] = uuid
        elif self._read_loaded is not None:
            index = self._index_of(uuid)
            if index is not None:
                self._loaded[int(idx)] = self._read_loaded(index)

    def finish(self, result: ChildResult) -> tuple[tuple[FunctionalResult, ...] | None, str]:
        """Per-GPU results in torch's device order (the GPUs finish in any order), or None and why the
        test could not run at all; a non-empty reason with results means it stopped early."""
        out = [self._result(r) for r in self._finished]
        if result.outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):
            # A GPU that hangs or crashes the process under a plain matmul is a finding, not a tool failure.
            stalled = "stalled: " if result.outcome is ChildOutcome.TIMEOUT else ""  # "no answer within 8 s …"
            what = f"the test process {stalled}{result.detail}"
            if self._in_flight:
                for torch_index, uuid in sorted(self._in_flight.items()):
                    others = [self._label(i, u) for i, u in sorted(self._in_flight.items()) if i != torch_index]
                    also = f" (and {', '.join(others)}, tested at the same time)" if others else ""
                    out.append(_failed(self._index_of(uuid), torch_index, f"{what} while testing this GPU{also}"))
            else:
                out.append(_failed(None, -1, what + (" after the last GPU" if out else " before testing any GPU")))
            return _in_device_order(out), ""
        if self._unavailable:
            return None, f"functional test could not run: CUDA unusable in the test process: {self._unavailable}"
        if not result.ok:
            if out:  # some GPUs finished: keep them, and say the rest could not be run
                return _in_device_order(out), f"functional test stopped early: {result.detail}"
            return None, f"functional test could not run: {result.detail}"
        return _in_device_order(out), ""

    def _label(self, torch_index: int, uuid: str) -> str:
        index = self._index_of(uuid)
        return f"GPU {index}" if index is not None else f"torch device {torch_index}"

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
    test_settings: dict[str, Any] | None = None,
) -> tuple[tuple[FunctionalResult, ...] | None, str]:
    """Run the test in a child of its own (``check`` runs it in the torch probe's child instead)."""
    collector = Collector(nvml_index_of, read_loaded)
    args = [str(script("functional")), json.dumps(settings() if test_settings is None else test_settings)]
    result = run_child(args, python=python, timeout=timeout, on_line=collector.on_line)
    return collector.finish(result)


def _failed(gpu_index: int | None, torch_index: int, error: str) -> FunctionalResult:
    return FunctionalResult(gpu_index, torch_index, False, error, None, None, None, None, None, None)


def _in_device_order(results: list[FunctionalResult]) -> tuple[FunctionalResult, ...]:
    return tuple(sorted(results, key=lambda r: (r.torch_index < 0, r.torch_index)))  # -1 (no GPU): last


def _int(value: Any) -> int:
    return value if isinstance(value, int) else -1


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
