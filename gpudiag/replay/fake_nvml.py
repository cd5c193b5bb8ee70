"""A fake ``pynvml`` module that answers from a :class:`~gpudiag.model.Machine`.

It raises pynvml's own error classes and mirrors its calling conventions (struct-like
results, the raw C protocol for the pre-R470 process query), so that
:mod:`gpudiag.probe.nvml` runs unchanged against it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NoReturn

import pynvml

from gpudiag.model import (
    ComputeMode,
    Gpu,
    GpuState,
    Machine,
    NvmlStatus,
    ProcessKind,
    Reading,
    Reason,
)

_INIT_ERRORS = {
    NvmlStatus.LIBRARY_NOT_FOUND: pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    NvmlStatus.DRIVER_NOT_LOADED: pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    NvmlStatus.VERSION_MISMATCH: pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NvmlStatus.NO_PERMISSION: pynvml.NVML_ERROR_NO_PERMISSION,
    NvmlStatus.ERROR: pynvml.NVML_ERROR_UNKNOWN,
}

_REASON_ERRORS = {
    Reason.NOT_SUPPORTED: pynvml.NVML_ERROR_NOT_SUPPORTED,
    Reason.NO_PERMISSION: pynvml.NVML_ERROR_NO_PERMISSION,
    Reason.GPU_LOST: pynvml.NVML_ERROR_GPU_IS_LOST,
    Reason.FUNCTION_NOT_FOUND: pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    Reason.NOT_FOUND: pynvml.NVML_ERROR_NOT_FOUND,
    Reason.UNAVAILABLE: pynvml.NVML_ERROR_UNKNOWN,
    Reason.UNKNOWN_ERROR: pynvml.NVML_ERROR_UNKNOWN,
    Reason.NOT_READ: pynvml.NVML_ERROR_UNKNOWN,  # a hand-made file that records no answer
}

_COMPUTE_MODE_CODES = {
    ComputeMode.DEFAULT: 0,
    ComputeMode.EXCLUSIVE_THREAD: 1,
    ComputeMode.PROHIBITED: 2,
    ComputeMode.EXCLUSIVE_PROCESS: 3,
}

_MAX_MIG_SLOTS = 7  # A100/H100: up to seven GPU instances


@dataclass(frozen=True)
class FakeHandle:
    gpu: int
    mig_slot: int | None = None


def _raise(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


def _value(reading: Reading[Any]) -> Any:
    if reading.reason is not None:
        _raise(_REASON_ERRORS[reading.reason])
    return reading.value


class FakeNvml:
    """Module-like stand-in for ``pynvml``. Swap the machine with :meth:`set_machine`."""

    def __init__(self, machine: Machine) -> None:
        self._machine = machine
        self.calls: list[str] = []  # every NVML function called, for cost tests
        self.initialised = False

    def set_machine(self, machine: Machine) -> None:
        """Change what the fake reports (a later sample); handles stay valid, as in NVML."""
        self._machine = machine

    # Constants and error classes come from the real module, so `except lib.NVMLError_X`
    # in the source catches exactly what real NVML would raise.
    def __getattr__(self, name: str) -> Any:
        real = getattr(pynvml, name, None)
        if real is not None and not callable(real):
            return real  # a constant such as nvmlMemory_v2, which is named like a function
        if name.startswith("nvml") and name[4:5].isupper():
            # A call this fake does not model: behave like a driver that lacks it.
            def missing(*_args: Any, **_kw: Any) -> Any:
                self.calls.append(name)
                _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

            return missing
        return getattr(pynvml, name)

    # -- plumbing --------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        self.calls.append(name)
        if name in self._machine.nvml.functions_missing:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if not self.initialised and name not in ("nvmlInit", "nvmlInitWithFlags"):
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: FakeHandle) -> Gpu:
        gpu = self._machine.gpus[handle.gpu]
        if gpu.state is GpuState.LOST:
            _raise(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.state is GpuState.ERROR:
            _raise(pynvml.NVML_ERROR_UNKNOWN)
        return gpu

    def _mig(self, handle: FakeHandle) -> Any:
        gpu = self._gpu(handle)
        for mig in gpu.mig_devices:
            if mig.index == handle.mig_slot:
                return mig
        _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    # -- system ----------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        status = self._machine.nvml.status
        if status is not NvmlStatus.OK:
            _raise(_INIT_ERRORS[status])
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(_value(self._machine.nvml.driver_version))

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(_value(self._machine.nvml.nvml_version))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(_value(self._machine.nvml.cuda_driver_version))

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._machine.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._machine.gpus):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        handle = FakeHandle(index)
        self._gpu(handle)
        return handle

    # -- identity --------------------------------------------------------------------

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetUUID")
        source = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        return str(_value(source.uuid))

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetName")
        source = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        return str(_value(source.name))

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetPciInfo")
        return SimpleNamespace(busId=_value(self._gpu(handle).pci_bus_id))

    def nvmlDeviceGetMinorNumber(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMinorNumber")
        return int(_value(self._gpu(handle).minor_number))

    # -- memory and load -------------------------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo")
        owner = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        m = _value(owner.memory)
        if version:
            self._enter("nvmlDeviceGetMemoryInfo_v2")
            reserved = m.reserved_bytes
            if reserved.reason is Reason.FUNCTION_NOT_FOUND:
                _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            return SimpleNamespace(
                version=version,
                total=m.total_bytes,
                used=m.used_bytes,
                free=m.free_bytes,
                reserved=reserved.get(0),
            )
        return SimpleNamespace(total=m.total_bytes, used=m.used_bytes, free=m.free_bytes)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates")
        u = _value(self._gpu(handle).utilization)
        return SimpleNamespace(gpu=u.gpu_percent, memory=u.memory_percent)

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        return int(_value(self._gpu(handle).temperature_c))

    def nvmlDeviceGetTemperatureThreshold(self, handle: FakeHandle, threshold: int) -> int:
        self._enter("nvmlDeviceGetTemperatureThreshold")
        gpu = self._gpu(handle)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return int(_value(gpu.temperature_slowdown_c))
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return int(_value(gpu.temperature_shutdown_c))
        _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 0  # unreachable

    def nvmlDeviceGetFanSpeed(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetFanSpeed")
        return int(_value(self._gpu(handle).fan_percent))

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        return round(float(_value(self._gpu(handle).power_draw_w)) * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetTotalEnergyConsumption")
        return int(_value(self._gpu(handle).energy_mj))

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo")
        gpu = self._gpu(handle)
        readings = {
            pynvml.NVML_CLOCK_SM: gpu.clock_sm_mhz,
            pynvml.NVML_CLOCK_MEM: gpu.clock_memory_mhz,
            pynvml.NVML_CLOCK_GRAPHICS: gpu.clock_graphics_mhz,
        }
        if clock not in readings:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(_value(readings[clock]))

    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPcieReplayCounter")
        return int(_value(self._gpu(handle).pcie_replays))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit")
        return round(float(_value(self._gpu(handle).power_limit_w)) * 1000)

    def nvmlDeviceGetPerformanceState(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPerformanceState")
        return int(_value(self._gpu(handle).pstate))

    # -- modes -----------------------------------------------------------------------

    def nvmlDeviceGetPersistenceMode(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPersistenceMode")
        return int(bool(_value(self._gpu(handle).persistence_mode)))

    def nvmlDeviceGetComputeMode(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeMode")
        return _COMPUTE_MODE_CODES[_value(self._gpu(handle).compute_mode)]

    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeHandle) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability")
        major, minor = _value(self._gpu(handle).compute_capability)
        return int(major), int(minor)

    def nvmlDeviceGetEccMode(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetEccMode")
        gpu = self._gpu(handle)
        return [int(bool(_value(gpu.ecc_mode_current))), int(bool(_value(gpu.ecc_mode_pending)))]

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode")
        gpu = self._gpu(handle)
        return [int(bool(_value(gpu.mig_mode_current))), int(bool(_value(gpu.mig_mode_pending)))]

    def nvmlDeviceGetNumaNodeId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetNumaNodeId")
        return int(_value(self._gpu(handle).numa_node))

    # -- PCIe ------------------------------------------------------------------------

    def _pcie(self, name: str, handle: FakeHandle, pick: Callable[[Any], Reading[int]]) -> int:
        self._enter(name)
        return int(_value(pick(self._gpu(handle).pcie)))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._pcie("nvmlDeviceGetCurrPcieLinkGeneration", handle, lambda p: p.gen_current)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._pcie("nvmlDeviceGetMaxPcieLinkGeneration", handle, lambda p: p.gen_max)

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: FakeHandle) -> int:
        return self._pcie("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle, lambda p: p.gen_gpu_max)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeHandle) -> int:
        return self._pcie("nvmlDeviceGetCurrPcieLinkWidth", handle, lambda p: p.width_current)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeHandle) -> int:
        return self._pcie("nvmlDeviceGetMaxPcieLinkWidth", handle, lambda p: p.width_max)

    # -- health ----------------------------------------------------------------------

    def nvmlDeviceGetTotalEccErrors(self, handle: FakeHandle, error_type: int, counter: int) -> int:
        self._enter("nvmlDeviceGetTotalEccErrors")
        ecc = self._gpu(handle).ecc_errors
        corrected = error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        if counter == pynvml.NVML_VOLATILE_ECC:
            reading = ecc.volatile_corrected if corrected else ecc.volatile_uncorrected
        else:
            reading = ecc.aggregate_corrected if corrected else ecc.aggregate_uncorrected
        return int(_value(reading))

    def nvmlDeviceGetRetiredPages(self, handle: FakeHandle, cause: int) -> list[int]:
        self._enter("nvmlDeviceGetRetiredPages")
        pages = _value(self._gpu(handle).retired_pages)
        single = cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        n = pages.single_bit if single else pages.double_bit
        return [0x1000 * (i + 1) for i in range(n)]  # page addresses; only the count matters

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetRetiredPagesPendingStatus")
        return int(_value(self._gpu(handle).retired_pages).pending)

    def nvmlDeviceGetRemappedRows(self, handle: FakeHandle) -> tuple[int, int, int, int]:
        self._enter("nvmlDeviceGetRemappedRows")
        r = _value(self._gpu(handle).remapped_rows)
        return (r.correctable, r.uncorrectable, int(r.pending), int(r.failure))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return int(_value(self._gpu(handle).clock_event_reasons))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return int(_value(self._gpu(handle).clock_event_reasons))

    def nvmlDeviceValidateInforom(self, handle: FakeHandle) -> None:
        self._enter("nvmlDeviceValidateInforom")
        if not _value(self._gpu(handle).inforom_valid):
            _raise(pynvml.NVML_ERROR_CORRUPTED_INFOROM)

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, field_ids: list[int]) -> list[Any]:
        self._enter("nvmlDeviceGetFieldValues")
        gpu = self._gpu(handle)
        out = []
        for field_id in field_ids:
            if field_id != pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                out.append(SimpleNamespace(fieldId=field_id, nvmlReturn=pynvml.NVML_ERROR_NOT_SUPPORTED))
                continue
            action = gpu.recovery_action
            if action.reason is not None:
                code = _REASON_ERRORS[action.reason]
                out.append(SimpleNamespace(fieldId=field_id, nvmlReturn=code, value=SimpleNamespace(uiVal=0)))
            else:
                out.append(
                    SimpleNamespace(
                        fieldId=field_id, nvmlReturn=pynvml.NVML_SUCCESS, value=SimpleNamespace(uiVal=action.value)
                    )
                )
        return out

    # -- MIG -------------------------------------------------------------------------

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount")
        gpu = self._gpu(handle)
        if not gpu.mig_mode_current.get(False):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return max([_MAX_MIG_SLOTS] + [m.index + 1 for m in gpu.mig_devices])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
        gpu = self._gpu(handle)
        if any(m.index == index for m in gpu.mig_devices):
            return FakeHandle(handle.gpu, index)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)
        return handle  # unreachable

    def nvmlDeviceGetGpuInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId")
        return int(_value(self._mig(handle).gpu_instance_id))

    def nvmlDeviceGetComputeInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId")
        return int(_value(self._mig(handle).compute_instance_id))

    # -- processes -------------------------------------------------------------------

    def _procs(self, handle: FakeHandle, graphics: bool) -> list[Any]:
        gpu = self._gpu(handle)
        wanted = (ProcessKind.GRAPHICS if graphics else ProcessKind.COMPUTE, ProcessKind.COMPUTE_GRAPHICS)
        out = []
        for p in _value(gpu.processes):
            if p.kind not in wanted:
                continue
            used = p.used_memory_bytes.value  # None: NVML_VALUE_NOT_AVAILABLE, as pynvml maps it
            out.append(
                SimpleNamespace(
                    pid=p.pid,
                    usedGpuMemory=used,
                    gpuInstanceId=0xFFFFFFFF if p.gpu_instance_id is None else p.gpu_instance_id,
                    computeInstanceId=0xFFFFFFFF if p.compute_instance_id is None else p.compute_instance_id,
                )
            )
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: FakeHandle) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses_v3")
        return self._procs(handle, graphics=False)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses_v2")
        return self._procs(handle, graphics=False)

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: FakeHandle) -> list[Any]:
        self._enter("nvmlDeviceGetGraphicsRunningProcesses_v3")
        return self._procs(handle, graphics=True)

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        self._enter("nvmlDeviceGetGraphicsRunningProcesses_v2")
        return self._procs(handle, graphics=True)

    def _nvmlGetFunctionPointer(self, name: str) -> Callable[..., int]:
        """The raw C entry points, for the v1 process query that pynvml no longer wraps."""
        self._enter(name)
        graphics = {
            "nvmlDeviceGetComputeRunningProcesses": False,
            "nvmlDeviceGetGraphicsRunningProcesses": True,
        }.get(name)
        if graphics is None:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

        def c_call(handle: FakeHandle, count_ref: Any, array: Any) -> int:
            try:
                procs = self._procs(handle, graphics=bool(graphics))
            except pynvml.NVMLError as exc:
                return int(exc.value)
            count = count_ref._obj  # ctypes.byref(c_uint)
            if array is None:
                count.value = len(procs)
                return int(pynvml.NVML_SUCCESS if not procs else pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
            if count.value < len(procs):
                count.value = len(procs)
                return int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
            for i, proc in enumerate(procs):
                array[i].pid = proc.pid
                array[i].usedGpuMemory = (
                    ctypes.c_ulonglong(-1).value if proc.usedGpuMemory is None else proc.usedGpuMemory
                )
            count.value = len(procs)
            return int(pynvml.NVML_SUCCESS)

        return c_call
