"""Child: torch's own view of CUDA, reported in stages; then, if asked, the functional test.

Run by path with any interpreter (``python torch_probe.py [FUNCTIONAL_SETTINGS_JSON]``):
standard library and :mod:`protocol` only, torch imported here and nowhere in gpudiag.
The stages are printed as soon as each is known (build facts right after ``import torch``,
then cuDNN/NCCL, then CUDA initialisation), so a child that hangs or dies in CUDA
initialisation still leaves its build facts. With settings, and when CUDA works, the
functional test runs in this same process: one import and one CUDA start-up instead of two.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import functional, protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import functional
    import protocol


def _arch_list(torch: Any) -> list[str]:
    # get_arch_list() answers [] unless CUDA works; the compiled list is there regardless.
    try:
        flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
    except Exception:
        return []
    return flags.split() if flags else []


def _libraries(torch: Any) -> dict[str, Any]:
    cudnn = compiled = nccl = None
    try:
        # torch.backends.cudnn.version() would initialise CUDA and raise on the very mismatch we look for.
        if torch.version.cuda and torch.backends.cudnn.is_available():
            cudnn = int(torch._C._cudnn.getVersionInt())
            compiled = [int(x) for x in torch._C._cudnn.getCompileVersion()][:3]
    except Exception:
        pass
    try:
        v = torch.cuda.nccl.version() if torch.version.cuda else None
        if isinstance(v, tuple):
            nccl = [int(x) for x in v[:3]]
        elif v:
            nccl = [v // 1000, v % 1000 // 100, v % 100]
    except Exception:
        pass
    return {"cudnn_version": cudnn, "cudnn_compiled": compiled, "nccl_version": nccl}


def _cuda_init(torch: Any) -> tuple[bool, str]:
    """Whether CUDA works, and if not the first line of why (the exception, else torch's warning)."""
    error = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = bool(torch.cuda.is_available())
            if available:
                torch.cuda.init()
        except Exception as exc:
            available, error = False, protocol.first_line(exc)
    if not available and not error:
        for w in caught:
            text = str(w.message).strip()
            if text and "CUDA" in text:
                return False, text.splitlines()[0]
        try:
            torch.cuda.init()
        except Exception as exc:
            error = protocol.first_line(exc)
    return available, error


def probe() -> dict[str, Any] | None:
    """Report every stage; the facts, or None when the result was already emitted (no torch)."""
    protocol.stage(protocol.IMPORTING, python=sys.executable)
    t0 = time.perf_counter()
    try:
        torch: Any = importlib.import_module("torch")  # Any: the child runs whatever torch it finds
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            protocol.emit({"missing": f"torch is not installed for {sys.executable}"})
        else:
            protocol.emit({"import_error": protocol.first_line(exc)})
        return None
    except BaseException as exc:
        protocol.emit({"import_error": protocol.first_line(exc)})
        return None
    t1 = time.perf_counter()
    arch = _arch_list(torch)
    protocol.stage(
        protocol.IMPORTED, version=torch.__version__, cuda=torch.version.cuda, arch_list=arch, import_seconds=t1 - t0
    )
    libraries = _libraries(torch)
    protocol.stage(protocol.LIBRARIES, **libraries)
    protocol.stage(protocol.CUDA_INIT)
    t2 = time.perf_counter()
    available, error = _cuda_init(torch)
    t3 = time.perf_counter()
    devices, count = [], 0
    if available:
        count = torch.cuda.device_count()
        for i in range(count):
            p = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "name": p.name,
                    "capability": [p.major, p.minor],
                    "total_memory_bytes": p.total_memory,
                    "uuid": str(getattr(p, "uuid", "")),
                }
            )
    facts = {
        "python": sys.executable,
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": available,
        "cuda_error": error,
        "device_count": count,
        "arch_list": arch,
        **libraries,
        "devices": devices,
        "import_seconds": t1 - t0,
        "init_seconds": t3 - t2,
    }
    protocol.stage(protocol.RUNTIME, **facts)
    return facts


def main(argv: list[str]) -> None:
    """``torch_probe.py``: the probe alone; ``torch_probe.py SETTINGS_JSON``: then the functional
    test; ``torch_probe.py --ask``: then the test with the settings read from stdin (an empty
    line, or stdin closed, skips it), so the parent can decide while torch imports."""
    facts = probe()
    if facts is None:
        return
    settings = argv[1] if len(argv) > 1 else ""
    if settings == "--ask":
        settings = sys.stdin.readline().strip() if facts["cuda_available"] else ""
    if settings and facts["cuda_available"]:
        functional.run(json.loads(settings))
    protocol.emit(facts)


if __name__ == "__main__":
    main(sys.argv)
    protocol.exit_now()
