"""A GPU's processes from NVML: the compute and graphics lists merged, the newest query API this driver
has (found once per session), and the pre-R470 query that nvidia-ml-py no longer wraps."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from gpudiag.model import GpuProcess, HostProcess, ProcessKind, Reading, Reason
from gpudiag.probe.nvml_errors import GpuLostError, decoded, undecodable
from gpudiag.readings import NO_INSTANCE

HostResolver = Callable[[int], HostProcess]

# Tried in order; the first one this driver has is used for the rest of the session.
PROCESS_QUERY_APIS = ("_v3", "_v2", "_v1")


class ProcessReading:
    """The process reads of :class:`~gpudiag.probe.nvml.NvmlSession`, which holds the state named here."""

    _lib: Any
    _host: HostResolver
    _process_api: str
    _missing: list[str]
    # Each GPU's processes as the last read made them (by handle, then by all a GpuProcess is made of:
    # what NVML said of it and its host view): a steady node's read builds none. Only the last read's
    # are kept, as PIDs get reused.
    _kept_processes: dict[int, dict[tuple[Any, ...], GpuProcess]]

    if TYPE_CHECKING:

        def _reason(self, exc: Exception, function: str, missing_function: bool = True) -> tuple[Reason, str]: ...

    def _process_list(self, h: Any, family: str) -> list[Any]:
        """Query compute or graphics processes, falling back to older API versions."""
        lib = self._lib
        apis = [self._process_api] if self._process_api else list(PROCESS_QUERY_APIS)
        last: Exception | None = None
        for suffix in apis:
            name = f"nvmlDeviceGet{family}RunningProcesses{suffix}"
            try:
                if suffix == "_v1":
                    procs = _query_processes_v1(lib, h, f"nvmlDeviceGet{family}RunningProcesses")
                else:
                    procs = getattr(lib, name)(h)
            except lib.NVMLError_FunctionNotFound as exc:
                if name not in self._missing:
                    self._missing.append(name)
                last = exc
                continue
            self._process_api = suffix
            return list(procs)
        assert last is not None
        raise last

    def _processes(self, h: Any) -> Reading[tuple[GpuProcess, ...]]:
        lib = self._lib
        merged: dict[int, tuple[ProcessKind, Any]] = {}
        for family, kind in (("Compute", ProcessKind.COMPUTE), ("Graphics", ProcessKind.GRAPHICS)):
            try:
                procs = self._process_list(h, family)
            except lib.NVMLError as exc:
                reason, detail = self._reason(exc, f"nvmlDeviceGet{family}RunningProcesses")
                if reason is Reason.GPU_LOST:
                    raise GpuLostError("process query: GPU is lost") from None
                return Reading.missing(reason, detail)
            except Exception as exc:  # the binding's own failure
                return undecodable(f"nvmlDeviceGet{family}RunningProcesses", exc)
            pids = decoded(f"nvmlDeviceGet{family}RunningProcesses", procs, lambda ps: [int(p.pid) for p in ps])
            if pids.value is None:
                return Reading.missing_like(pids)
            for pid, proc in zip(pids.value, procs, strict=True):
                if pid not in merged:
                    merged[pid] = (kind, proc)
                elif merged[pid][0] is not kind:  # in both lists; a repeat within one list stays one kind
                    merged[pid] = (ProcessKind.COMPUTE_GRAPHICS, merged[pid][1])
        kept = self._kept_processes.get(id(h), {})  # handles live as long as the session (not hashable)
        made: dict[tuple[Any, ...], GpuProcess] = {}
        found = decoded("nvmlDeviceGetComputeRunningProcesses", merged, lambda m: self._gpu_processes(m, kept, made))
        if found.value is not None:
            self._kept_processes[id(h)] = made
        return found

    def _gpu_processes(
        self,
        merged: dict[int, tuple[ProcessKind, Any]],
        kept: dict[tuple[Any, ...], GpuProcess],
        made: dict[tuple[Any, ...], GpuProcess],
    ) -> tuple[GpuProcess, ...]:
        result = []
        for pid, (kind, proc) in merged.items():
            used = getattr(proc, "usedGpuMemory", None)
            gi = getattr(proc, "gpuInstanceId", NO_INSTANCE)
            ci = getattr(proc, "computeInstanceId", NO_INSTANCE)
            host = self._host(pid)
            key = (pid, kind, used, gi, ci)
            same = kept.get(key)
            if same is not None and same.host is host:
                result.append(made.setdefault(key, same))
                continue
            made[key] = process = GpuProcess(
                pid=pid,
                kind=kind,
                used_memory_bytes=(
                    Reading.of(int(used))
                    if used is not None
                    else Reading.missing(Reason.NOT_SUPPORTED, "NVML gives no per-process memory here")
                ),
                host=host,
                gpu_instance_id=None if gi == NO_INSTANCE else int(gi),
                compute_instance_id=None if ci == NO_INSTANCE else int(ci),
            )
            result.append(process)
        return tuple(result)


def no_process_stats(pid: int) -> tuple[Reading[float], Reading[int], Reading[float]]:
    missing: Reading[Any] = Reading.missing(Reason.UNAVAILABLE, "no host view of processes")
    return missing, missing, missing


class _ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


def _query_processes_v1(lib: Any, handle: Any, symbol: str) -> list[Any]:
    """The pre-R470 process query, which nvidia-ml-py no longer wraps (no MIG instance ids)."""
    fn = lib._nvmlGetFunctionPointer(symbol)
    count = ctypes.c_uint(0)
    ret = fn(handle, ctypes.byref(count), None)
    if ret == lib.NVML_SUCCESS:
        return []
    if ret != lib.NVML_ERROR_INSUFFICIENT_SIZE:
        raise lib.NVMLError(ret)
    count.value = count.value * 2 + 5  # room for processes started meanwhile
    array = (_ProcessInfoV1 * count.value)()
    ret = fn(handle, ctypes.byref(count), array)
    if ret != lib.NVML_SUCCESS:
        raise lib.NVMLError(ret)
    not_available = ctypes.c_ulonglong(-1).value
    out = []
    for i in range(count.value):
        used = int(array[i].usedGpuMemory)
        out.append(_V1Process(int(array[i].pid), None if used == not_available else used))
    return out


class _V1Process(msgspec.Struct):
    pid: int
    usedGpuMemory: int | None  # noqa: N815 - mirrors the NVML struct
