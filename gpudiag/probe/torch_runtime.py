"""torch's own view of CUDA, asked in a child process with a timeout.

A torch that fails to import, hangs in CUDA initialisation or crashes the interpreter
becomes a missing reading that says exactly that; gpudiag itself never imports torch.
``python`` may name another environment's interpreter (the user's training venv).
"""

from __future__ import annotations

from typing import Any

from gpudiag.model import Reading, Reason, TorchDevice, TorchRuntime, unavailable
from gpudiag.probe.child import ChildOutcome, ChildResult, run_python

CHILD_CODE = r"""
import sys, time, warnings
t0 = time.perf_counter()
try:
    import torch
except ModuleNotFoundError as exc:
    emit({"missing": f"torch is not installed for {sys.executable}"})
    raise SystemExit(0)
except Exception as exc:
    emit({"import_error": f"{type(exc).__name__}: {exc}"})
    raise SystemExit(0)
t1 = time.perf_counter()
error = ""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        available = torch.cuda.is_available()
        if available:
            torch.cuda.init()
    except Exception as exc:
        available, error = False, f"{type(exc).__name__}: {exc}"
if not available and not error:
    try:
        torch.cuda.init()
    except Exception as exc:
        error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for w in caught:
        text = str(w.message).strip()
        if text and "CUDA" in text:
            error = text.splitlines()[0]
            break
t2 = time.perf_counter()
devices, arch, count = [], [], 0
if available:
    count = torch.cuda.device_count()
    arch = list(torch.cuda.get_arch_list())
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        devices.append({"name": p.name, "capability": [p.major, p.minor], "total_memory_bytes": p.total_memory,
                        "uuid": str(getattr(p, "uuid", ""))})
cudnn = compiled = nccl = None
try:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    compiled = list(torch._C._cudnn.getCompileVersion()) if cudnn is not None else None
except Exception:
    pass
try:
    v = torch.cuda.nccl.version() if torch.version.cuda else None
    nccl = list(v) if isinstance(v, tuple) else ([v // 1000, v % 1000 // 100, v % 100] if v else None)
except Exception:
    pass
emit({"python": sys.executable, "version": torch.__version__, "cuda": torch.version.cuda, "cuda_available": available,
      "cuda_error": error, "device_count": count, "arch_list": arch, "cudnn_version": cudnn, "cudnn_compiled": compiled,
      "nccl_version": nccl, "devices": devices, "import_seconds": t1 - t0, "init_seconds": t2 - t1})
"""

DEFAULT_TIMEOUT = 90.0


def probe(python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Reading[TorchRuntime]:
    return parse(run_python(CHILD_CODE, python=python, timeout=timeout))


def parse(result: ChildResult) -> Reading[TorchRuntime]:
    """Turn the child's answer, or its failure, into a reading."""
    if result.outcome is ChildOutcome.NOT_STARTED:
        return unavailable(Reason.UNAVAILABLE, result.detail)
    if result.outcome is ChildOutcome.TIMEOUT:
        return unavailable(Reason.UNKNOWN_ERROR, f"torch hung: {result.detail}")
    if result.outcome is ChildOutcome.CRASHED:
        return unavailable(Reason.UNKNOWN_ERROR, f"importing torch / initialising CUDA {result.detail}")
    if result.outcome is not ChildOutcome.OK:
        return unavailable(Reason.UNKNOWN_ERROR, f"torch probe failed: {result.detail}")
    data = result.data
    if "missing" in data:
        return unavailable(Reason.NOT_FOUND, str(data["missing"]))
    if "import_error" in data:
        return unavailable(Reason.UNKNOWN_ERROR, f"torch fails to import: {data['import_error']}")
    try:
        return Reading.of(_runtime(data))
    except (KeyError, TypeError, ValueError) as exc:
        return unavailable(Reason.UNKNOWN_ERROR, f"unexpected torch probe answer: {exc}")


def _triple(value: Any) -> tuple[int, int, int] | None:
    if not value:
        return None
    major, minor, patch = (int(x) for x in value)
    return (major, minor, patch)


def _runtime(data: dict[str, Any]) -> TorchRuntime:
    return TorchRuntime(
        python=str(data["python"]),
        version=str(data["version"]),
        cuda=data["cuda"],
        cuda_available=bool(data["cuda_available"]),
        cuda_error=str(data["cuda_error"]),
        device_count=int(data["device_count"]),
        arch_list=tuple(str(a) for a in data["arch_list"]),
        cudnn_version=None if data["cudnn_version"] is None else int(data["cudnn_version"]),
        cudnn_compiled=_triple(data["cudnn_compiled"]),
        nccl_version=_triple(data["nccl_version"]),
        devices=tuple(
            TorchDevice(
                name=str(d["name"]),
                capability=(int(d["capability"][0]), int(d["capability"][1])),
                total_memory_bytes=int(d["total_memory_bytes"]),
                uuid=str(d["uuid"]),
            )
            for d in data["devices"]
        ),
        import_seconds=float(data["import_seconds"]),
        init_seconds=float(data["init_seconds"]),
    )
