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
import time
from collections.abc import Callable
from typing import Any

from gpudiag.children import protocol
from gpudiag.model import Reading, Reason, TorchDevice, TorchRuntime
from gpudiag.probe.child import ChildOutcome, ChildResult, Running, hung_detail, script, start

ASK = "--ask"  # the torch child's argument: read the functional test's settings from stdin
DEFAULT_TIMEOUT = 90.0


def launch(python: str | None = None, functional: dict[str, Any] | None = None, ask: bool = False) -> Running:
    """Start the torch child now (its import takes seconds); read it later with :func:`finish`.

    With ``functional`` settings the child goes on, when CUDA works, to run the functional test
    (:mod:`gpudiag.children.functional`) in the same process: one import, one CUDA start-up.
    With ``ask`` it waits, once torch has answered, for the settings on its stdin
    (``Running.send``; an empty line skips the test): the parent decides after reading NVML.
    """
    args = [str(script("torch_probe"))]
    if ask:
        args.append(ASK)
    elif functional is not None:
        args.append(json.dumps(functional))
    return start(args, python=python, ask=ask)


_early: Running | None = None


def start_early() -> None:
    """Start the torch child in asking mode before the CLI is imported (``gpudiag.entry``):
    typer, rich and option parsing would otherwise delay it ~0.15 s. :func:`take_early` hands
    it to the check (which answers whether to run the functional test) or to be killed."""
    global _early
    _early = launch(ask=True)


def take_early() -> Running | None:
    """The child :func:`start_early` started, once; None when there is none."""
    global _early
    running, _early = _early, None
    return running


def finish(
    running: Running,
    timeout: float,
    on_line: Callable[[str], None] | None = None,
    functional_budget: float = 0.0,
) -> tuple[Reading[TorchRuntime], ChildResult]:
    """Read the child to its end. torch must answer (import, libraries, CUDA start-up) within
    ``timeout`` of the start; the functional test, if any, then has ``functional_budget`` of its own.
    ``on_line`` sees every line that is not the probe's. The reading describes torch even when the
    test later hangs or crashes the child; the returned result says how the child ended."""
    stages: dict[str, Any] = {}
    answered: list[float] = []  # when torch's facts arrived

    def read(line: str) -> None:
        data = protocol.payload(line, protocol.STAGE)
        if data is not None:
            stages["stage"] = data.pop("stage", "")
            stages.update(data)
            if stages["stage"] == protocol.RUNTIME:
                answered.append(time.monotonic())
        elif not line.startswith(protocol.STAGE) and on_line is not None:
            on_line(line)

    def deadline() -> tuple[float, str]:
        if answered and functional_budget > 0:
            return (
                answered[0] + functional_budget,
                f"the functional test did not finish within its budget of {functional_budget:g} s "
                "(hung, e.g. in a GPU kernel)",
            )
        return running.start + timeout, hung_detail(timeout)

    result = running.finish(read, deadline)
    return parse(result, stages), result


def probe(python: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Reading[TorchRuntime]:
    return finish(launch(python), timeout)[0]


def parse(result: ChildResult, stages: dict[str, Any] | None = None) -> Reading[TorchRuntime]:
    """Turn the child's answer, or its failure and the last stage it reached, into a reading."""
    stages = stages or {}
    if result.outcome is not ChildOutcome.OK and stages.get("stage") == protocol.RUNTIME:
        # torch answered in full; what ended the child came after (the functional test, see finish).
        try:
            return Reading.of(_runtime(stages))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return Reading.missing(Reason.UNKNOWN_ERROR, f"unexpected torch probe answer: {exc!r}")
    if result.outcome is ChildOutcome.NOT_STARTED:
        return Reading.missing(Reason.UNAVAILABLE, result.detail)
    if result.outcome in (ChildOutcome.TIMEOUT, ChildOutcome.CRASHED):

        def how(where: str) -> str:
            if result.outcome is ChildOutcome.TIMEOUT:  # "no answer within 90 s (hung, …)"
                return f"torch hung {where}: {result.detail.split(' (')[0]}"
            return f"torch crashed {where} ({result.detail.removeprefix('crashed with ')})"

        stage = stages.get("stage", "")
        if stage == protocol.CUDA_INIT:
            return _stopped_after_import(stages, how("in CUDA initialisation"))
        if stage in (protocol.IMPORTED, protocol.LIBRARIES):
            return _stopped_after_import(stages, how("reading its cuDNN/NCCL versions"))
        if stage == protocol.IMPORTING:
            return Reading.missing(Reason.UNKNOWN_ERROR, how("during `import torch`"))
        return Reading.missing(Reason.UNKNOWN_ERROR, how("before reporting"))
    if result.outcome is not ChildOutcome.OK:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"torch probe failed: {result.detail}")
    data = result.data
    if "missing" in data:
        return Reading.missing(Reason.NOT_FOUND, str(data["missing"]))
    if "import_error" in data:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"torch fails to import: {data['import_error']}")
    try:
        return Reading.of(_runtime(data))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"unexpected torch probe answer: {exc!r}")


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
        return Reading.missing(Reason.UNKNOWN_ERROR, error)
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
