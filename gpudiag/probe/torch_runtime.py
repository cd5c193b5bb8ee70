"""torch's own view of CUDA, asked in a child process with a timeout.

A torch that fails to import, hangs in CUDA initialisation or crashes the interpreter
becomes a reading that says exactly that; gpudiag itself never imports torch.
``python`` may name another environment's interpreter (the user's training venv).

The child reports in stages, each printed as soon as it is known: the build facts
right after ``import torch`` (version, CUDA build, compiled architectures), then
cuDNN and NCCL, then CUDA initialisation. A child that hangs or dies in CUDA
initialisation still leaves its build facts, so the compatibility checks can say
*why* (a too-old driver, a missing architecture) and the finding says *where* it stopped.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from typing import Any

from gpudiag.model import Reading, Reason, TorchDevice, TorchRuntime, unavailable
from gpudiag.probe.child import ChildOutcome, ChildResult, run_python

STAGE_MARKER = "@@GPUDIAG_STAGE@@"

CHILD_CODE = r"""
import json, sys, time, warnings
MARK = __MARK__
def stage(name, **facts):
    sys.stdout.write(MARK + json.dumps({"stage": name, **facts}) + "\n")
    sys.stdout.flush()
def first_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
stage("importing", python=sys.executable)
t0 = time.perf_counter()
try:
    import torch
except ModuleNotFoundError as exc:
    if exc.name == "torch":
        emit({"missing": f"torch is not installed for {sys.executable}"})
        raise SystemExit(0)
    emit({"import_error": first_line(exc)})
    raise SystemExit(0)
except BaseException as exc:
    emit({"import_error": first_line(exc)})
    raise SystemExit(0)
t1 = time.perf_counter()
arch = []
try:
    # get_arch_list() answers [] unless CUDA works; the compiled list is there regardless.
    flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
    arch = flags.split() if flags else []
except Exception:
    pass
stage("imported", version=torch.__version__, cuda=torch.version.cuda, arch_list=arch, import_seconds=t1 - t0)
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
    nccl = [int(x) for x in v[:3]] if isinstance(v, tuple) else ([v // 1000, v % 1000 // 100, v % 100] if v else None)
except Exception:
    pass
stage("libraries", cudnn_version=cudnn, cudnn_compiled=compiled, nccl_version=nccl)
stage("cuda_init")
t2 = time.perf_counter()
error = ""
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        available = torch.cuda.is_available()
        if available:
            torch.cuda.init()
    except Exception as exc:
        available, error = False, first_line(exc)
if not available and not error:
    for w in caught:
        text = str(w.message).strip()
        if text and "CUDA" in text:
            error = text.splitlines()[0]
            break
if not available and not error:
    try:
        torch.cuda.init()
    except Exception as exc:
        error = first_line(exc)
t3 = time.perf_counter()
devices, count = [], 0
if available:
    count = torch.cuda.device_count()
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        devices.append({"name": p.name, "capability": [p.major, p.minor], "total_memory_bytes": p.total_memory,
                        "uuid": str(getattr(p, "uuid", ""))})
FACTS = {"python": sys.executable, "version": torch.__version__, "cuda": torch.version.cuda,
         "cuda_available": available, "cuda_error": error, "device_count": count, "arch_list": arch,
         "cudnn_version": cudnn, "cudnn_compiled": compiled, "nccl_version": nccl, "devices": devices,
         "import_seconds": t1 - t0, "init_seconds": t3 - t2}
stage("runtime", **FACTS)
""".replace("__MARK__", json.dumps(STAGE_MARKER))
_PROBE_CODE = CHILD_CODE
CHILD_CODE = _PROBE_CODE + "emit(FACTS)\n"

DEFAULT_TIMEOUT = 90.0


def probe(python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Reading[TorchRuntime]:
    result, stages = _run(CHILD_CODE, python, timeout, None)
    return parse(result, stages)


def probe_then(
    then: str, python: str | None, timeout: float, on_line: Callable[[str], None]
) -> tuple[Reading[TorchRuntime], ChildResult]:
    """Ask torch, then — in the same process, when CUDA works — run ``then`` (which must not emit).

    One import and one CUDA initialisation instead of two: the functional test runs this way.
    ``on_line`` sees every line the child prints. The reading describes torch even when ``then``
    later hangs or crashes the child; the returned result says how the child ended.
    """
    code = _PROBE_CODE + "if FACTS['cuda_available']:\n" + textwrap.indent(then, "    ") + "\nemit(FACTS)\n"
    result, stages = _run(code, python, timeout, on_line)
    return parse(result, stages), result


def _run(
    code: str, python: str | None, timeout: float, also: Callable[[str], None] | None
) -> tuple[ChildResult, dict[str, Any]]:
    stages: dict[str, Any] = {}

    def on_line(line: str) -> None:
        if line.startswith(STAGE_MARKER):
            try:
                data = json.loads(line[len(STAGE_MARKER) :])
            except json.JSONDecodeError:
                return
            if isinstance(data, dict):
                stages["stage"] = data.pop("stage", "")
                stages.update(data)
        elif also is not None:
            also(line)

    return run_python(code, python=python, timeout=timeout, on_line=on_line), stages


def parse(result: ChildResult, stages: dict[str, Any] | None = None) -> Reading[TorchRuntime]:
    """Turn the child's answer, or its failure and the last stage it reached, into a reading."""
    stages = stages or {}
    if result.outcome is not ChildOutcome.OK and stages.get("stage") == "runtime":
        # torch answered in full; what ended the child came after (see probe_then).
        try:
            return Reading.of(_runtime(stages))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return unavailable(Reason.UNKNOWN_ERROR, f"unexpected torch probe answer: {exc!r}")
    if result.outcome is ChildOutcome.NOT_STARTED:
        return unavailable(Reason.UNAVAILABLE, result.detail)
    if result.outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):

        def how(where: str) -> str:
            if result.outcome is ChildOutcome.TIMEOUT:  # "no answer within 90 s (hung, …)"
                return f"torch hung {where}: {result.detail.split(' (')[0]}"
            return f"torch crashed {where} ({result.detail.removeprefix('crashed with ')})"

        stage = stages.get("stage", "")
        if stage == "cuda_init":
            return _stopped_after_import(stages, how("in CUDA initialisation"))
        if stage in ("imported", "libraries"):
            return _stopped_after_import(stages, how("reading its cuDNN/NCCL versions"))
        if stage == "importing":
            return unavailable(Reason.UNKNOWN_ERROR, how("during `import torch`"))
        return unavailable(Reason.UNKNOWN_ERROR, how("before reporting"))
    if result.outcome is not ChildOutcome.OK:
        return unavailable(Reason.UNKNOWN_ERROR, f"torch probe failed: {result.detail}")
    data = result.data
    if "missing" in data:
        return unavailable(Reason.NOT_FOUND, str(data["missing"]))
    if "import_error" in data:
        return unavailable(Reason.UNKNOWN_ERROR, f"torch fails to import: {data['import_error']}")
    try:
        return Reading.of(_runtime(data))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return unavailable(Reason.UNKNOWN_ERROR, f"unexpected torch probe answer: {exc!r}")


def _stopped_after_import(stages: dict[str, Any], error: str) -> Reading[TorchRuntime]:
    """torch imported, then the child hung or died: its build facts, and CUDA unusable."""
    try:
        runtime = _runtime(
            {
                "python": stages.get("python", ""),
                "version": stages["version"],
                "cuda": stages.get("cuda"),
                "cuda_available": False,
                "cuda_error": error,
                "device_count": 0,
                "arch_list": stages.get("arch_list", []),
                "cudnn_version": stages.get("cudnn_version"),
                "cudnn_compiled": stages.get("cudnn_compiled"),
                "nccl_version": stages.get("nccl_version"),
                "devices": [],
                "import_seconds": stages.get("import_seconds", 0.0),
                "init_seconds": 0.0,
            }
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return unavailable(Reason.UNKNOWN_ERROR, error)
    return Reading.of(runtime)


def _triple(value: Any) -> tuple[int, int, int] | None:
    if not value:
        return None
    major, minor, patch = (int(x) for x in value)
    return (major, minor, patch)


def _runtime(data: dict[str, Any]) -> TorchRuntime:
    cuda = data["cuda"]
    return TorchRuntime(
        python=str(data["python"]),
        version=str(data["version"]),
        cuda=None if cuda is None else str(cuda),
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
