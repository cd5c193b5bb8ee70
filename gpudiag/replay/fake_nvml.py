"""A fake ``pynvml`` module that answers from a :class:`~gpudiag.model.Machine`.

It is a real module object: pynvml's constants, error classes, structs and pure helpers are
copied into it, so ``vars()``, ``from pynvml import *`` and ``except pynvml.NVMLError_X`` work
as with nvidia-ml-py. Each NVML call answers like the real library where the hardware captures
in ``docs/hardware/`` show it (the memory structs, reference-counted init, MIG answers), with
pynvml's own return types. The raw C entry points that pynvml and its consumers reach through
``_nvmlGetFunctionPointer`` (versioned process and memory queries, field values) are emulated
with ctypes conventions. A call this fake does not model raises FUNCTION_NOT_FOUND, as a
driver that lacks it would; a name that nvidia-ml-py itself lacks is an AttributeError.
"""

from __future__ import annotations

import ctypes
from collections import deque
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import Any, NoReturn

import msgspec
import pynvml

from gpudiag.model import (
    Gpu,
    GpuProcess,
    GpuState,
    Machine,
    Memory,
    MigDevice,
    NvmlStatus,
    ProcessKind,
    Reading,
    Reason,
)
from gpudiag.readings import COMPUTE_MODE_CODES, NO_INSTANCE

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
    Reason.NOT_RECORDED: pynvml.NVML_ERROR_UNKNOWN,  # raised as NotRecordedError, which says so
}


class NotRecordedError(pynvml.NVMLError_Unknown):  # type: ignore[misc]
    """What the fake raises for a reading the replayed snapshot does not hold: NVML's "unknown
    error" to its consumers (gpustat, nvitop), and ``gpudiag_reason`` tells gpudiag's probe that
    the snapshot, not the GPU, lacks it."""

    gpudiag_reason = Reason.NOT_RECORDED.value


CALL_LOG = 20_000  # NVML calls kept for cost tests (~160 KiB; a snapshot of 8 GPUs makes ~2,200)
_MAX_MIG_SLOTS = 7  # A100/H100: up to seven GPU instances
_NOT_AVAILABLE = ctypes.c_ulonglong(-1).value  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory

# pynvml functions that only reshape Python objects; every other nvml* function calls the
# C library (through the real module's globals), so the fake answers for it instead.
_PURE_HELPERS = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})
# The library loader and its state stay behind: the fake has its own.
_LOADER = frozenset(
    {"_nvmlGetFunctionPointer", "_nvmlGetFunctionPointer_cache", "_LoadNvmlLibrary", "nvmlLib", "_nvmlLib_refcount"}
)


def _calls_the_library(name: str, value: Any) -> bool:
    return isinstance(value, FunctionType) and name.startswith(("nvml", "c_nvml")) and name not in _PURE_HELPERS


_COPIED = {
    name: value
    for name, value in vars(pynvml).items()
    if not name.startswith("__") and name not in _LOADER and not _calls_the_library(name, value)
}
_LIBRARY_FUNCTIONS = tuple(n for n, v in vars(pynvml).items() if n.startswith("nvml") and _calls_the_library(n, v))


# The calls gpudiag.replay.fake_details answers (a test keeps this list and that module in step).
DETAIL_CALLS = (
    "nvmlDeviceGetAccountingBufferSize",
    "nvmlDeviceGetAccountingMode",
    "nvmlDeviceGetAddressingMode",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetBoardId",
    "nvmlDeviceGetBoardPartNumber",
    "nvmlDeviceGetC2cModeInfoV",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetConfComputeProtectedMemoryUsage",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetDefaultApplicationsClock",
    "nvmlDeviceGetDisplayActive",
    "nvmlDeviceGetDisplayMode",
    "nvmlDeviceGetEncoderStats",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetGspFirmwareMode",
    "nvmlDeviceGetGspFirmwareVersion",
    "nvmlDeviceGetInforomConfigurationChecksum",
    "nvmlDeviceGetInforomImageVersion",
    "nvmlDeviceGetInforomVersion",
    "nvmlDeviceGetJpgUtilization",
    "nvmlDeviceGetMarginTemperature",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetMemoryAffinity",
    "nvmlDeviceGetMemoryErrorCounter",
    "nvmlDeviceGetModuleId",
    "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetOfaUtilization",
    "nvmlDeviceGetP2PStatus",
    "nvmlDeviceGetPciInfoExt",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerManagementMode",
    "nvmlDeviceGetProcessUtilization",
    "nvmlDeviceGetRowRemapperHistogram",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetSramEccErrorStatus",
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetSupportedClocksThrottleReasons",
    "nvmlDeviceGetTopologyCommonAncestor",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetVbiosVersion",
)


class FakeHandle(msgspec.Struct, frozen=True):
    gpu: int
    mig_slot: int | None = None


def _raise(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


def _value(reading: Reading[Any]) -> Any:
    if reading.reason is Reason.NOT_RECORDED:
        raise NotRecordedError()
    if reading.reason is not None:
        _raise(_REASON_ERRORS[reading.reason])
    return reading.value


def _bus_id_key(bus_id: str) -> tuple[int, ...] | None:
    """``0000:18:00.0`` and ``00000000:18:00.0`` name the same device, as NVML reads them."""
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class FakeNvml(ModuleType):
    """Module stand-in for ``pynvml``. Swap the machine with :meth:`set_machine`."""

    def __init__(self, machine: Machine) -> None:
        super().__init__("pynvml", __doc__)
        namespace = self.__dict__
        namespace.update(_COPIED)
        namespace["__file__"] = __file__
        # Consumers (gpustat) cache function pointers here, as in nvidia-ml-py.
        namespace["_nvmlGetFunctionPointer_cache"] = {}
        self._machine = machine
        # The latest calls only: a replayed `memory --watch` or exporter runs for days, and a log of
        # every call grew by ~2 KiB a refresh on the 8-GPU example.
        self._calls: deque[str] = deque(maxlen=CALL_LOG)
        self._init_count = 0  # NVML counts nvmlInit calls; each needs its nvmlShutdown
        self._loaded = False  # the library stays loaded after a shutdown, as pynvml keeps it
        # Every NVML call is a module attribute (so vars() and star imports see it): the modelled
        # ones answer from the machine, the rest say this "driver" lacks them.
        modelled = {n for n in dir(type(self)) if n.startswith("nvml") or n == "_nvmlGetFunctionPointer"}
        for name in _LIBRARY_FUNCTIONS:
            if name not in modelled:
                namespace[name] = self._lacks(name)
        for name in modelled:
            namespace[name] = getattr(self, name)
        # The detail calls (list --details, snapshot) load gpudiag.replay.fake_details on first use,
        # so that a plain `list` replay never imports them.
        self._details_impl: Any = None
        for name in DETAIL_CALLS:
            if name not in modelled:  # a call this class answers itself prefers the details when recorded
                namespace[name] = self._detail_call(name)

    @property
    def calls(self) -> list[str]:
        """The NVML functions called, in order (the latest CALL_LOG of them), for cost tests."""
        return list(self._calls)

    @property
    def initialised(self) -> bool:
        return self._init_count > 0

    def set_machine(self, machine: Machine) -> None:
        """Change what the fake reports (a later sample); handles stay valid, as in NVML."""
        self._machine = machine

    # -- plumbing --------------------------------------------------------------------

    def _lacks(self, name: str) -> Callable[..., Any]:
        def missing(*_args: Any, **_kw: Any) -> Any:
            self._calls.append(name)
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

        missing.__name__ = missing.__qualname__ = name
        return missing

    def _detail_calls(self) -> Any:
        if self._details_impl is None:
            from gpudiag.replay.fake_details import FakeDetails

            self._details_impl = FakeDetails(self)
        return self._details_impl

    def _detail_call(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            return getattr(self._detail_calls(), name)(*args, **kw)

        call.__name__ = call.__qualname__ = name
        return call

    def _enter(self, name: str) -> None:
        self._calls.append(name)
        if name in self._machine.nvml.functions_missing:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if not self.initialised and name not in ("nvmlInit", "nvmlInitWithFlags"):
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: FakeHandle) -> Gpu:
        if not isinstance(handle, FakeHandle) or not 0 <= handle.gpu < len(self._machine.gpus):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self._machine.gpus[handle.gpu]
        if gpu.state is GpuState.LOST:
            _raise(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.state is GpuState.ERROR:
            _raise(pynvml.NVML_ERROR_UNKNOWN)
        return gpu

    def _mig(self, handle: FakeHandle) -> MigDevice:
        gpu = self._gpu(handle)
        for mig in gpu.mig_devices:
            if mig.index == handle.mig_slot:
                return mig
        _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # a full GPU's handle, as NVML answers

    def _full_gpu(self, handle: FakeHandle, mig_error: int = pynvml.NVML_ERROR_NOT_SUPPORTED) -> Gpu:
        """A GPU-level query: a MIG device's handle does not answer it."""
        gpu = self._gpu(handle)
        if handle.mig_slot is not None:
            _raise(mig_error)
        return gpu

    def _memory(self, handle: FakeHandle) -> Memory:
        owner = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        memory: Memory = _value(owner.memory)
        return memory

    # -- system ----------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._init("nvmlInit")

    def nvmlInitWithFlags(self, flags: int) -> None:
        self._init("nvmlInitWithFlags")

    def _init(self, name: str) -> None:
        self._enter(name)
        status = self._machine.nvml.status
        if status is not NvmlStatus.OK:
            _raise(_INIT_ERRORS[status])
        self._loaded = True
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(_value(self._machine.nvml.driver_version))

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(_value(self._machine.nvml.nvml_version))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(_value(self._machine.nvml.cuda_driver_version))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
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

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByUUID")
        wanted = _text(uuid)
        for gpu in self._machine.gpus:
            if gpu.uuid.value == wanted:
                return self._open(FakeHandle(gpu.index))
            for mig in gpu.mig_devices:
                if mig.uuid.value == wanted:
                    return self._open(FakeHandle(gpu.index, mig.index))
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByPciBusId")
        wanted = _bus_id_key(_text(bus_id))
        if wanted is None:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for gpu in self._machine.gpus:
            if gpu.pci_bus_id.value is not None and _bus_id_key(gpu.pci_bus_id.value) == wanted:
                return self._open(FakeHandle(gpu.index))
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def _open(self, handle: FakeHandle) -> FakeHandle:
        self._gpu(handle)
        return handle

    # -- identity --------------------------------------------------------------------

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetIndex")
        return self._full_gpu(handle, pynvml.NVML_ERROR_INVALID_ARGUMENT).index

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
        bus_id = str(_value(self._gpu(handle).pci_bus_id))
        info = pynvml.nvmlPciInfo_t()
        info.busId = bus_id.encode()
        key = _bus_id_key(bus_id)
        if key is not None:
            info.domain, info.bus, info.device = key[:3]
            info.busIdLegacy = f"{key[0]:04X}:{key[1]:02X}:{key[2]:02X}.{key[3]:X}".encode()  # 0000:00:06.0
        gpu = self._gpu(handle)
        if gpu.details.value is not None:  # device and subsystem ids are recorded with the details
            for attr, value in self._detail_calls().detail_pci(gpu).items():
                setattr(info, attr, value)
        return info

    def nvmlDeviceGetPciInfo_v3(self, handle: FakeHandle) -> Any:
        return self.nvmlDeviceGetPciInfo(handle)

    def nvmlDeviceGetMinorNumber(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetMinorNumber")
        return int(_value(self._gpu(handle).minor_number))

    # -- memory and load -------------------------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        """Without a version, NVML's v1 struct: used = total - free, the reserved memory included.

        With ``nvmlMemory_v2``: used excludes the reserved memory (as captured on an H100,
        driver 580: v1 used 480 MiB where v2 says used 0, reserved 480 MiB).
        """
        self._enter("nvmlDeviceGetMemoryInfo")
        m = self._memory(handle)
        if version:
            self._enter("nvmlDeviceGetMemoryInfo_v2")
            reserved = m.reserved_bytes
            if reserved.reason is Reason.FUNCTION_NOT_FOUND:
                _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            v2 = pynvml.c_nvmlMemory_v2_t()
            v2.version, v2.total, v2.reserved, v2.free, v2.used = (
                version,
                m.total_bytes,
                reserved.get(0),
                m.free_bytes,
                m.used_bytes,
            )
            return v2
        v1 = pynvml.c_nvmlMemory_t()
        v1.total, v1.free, v1.used = m.total_bytes, m.free_bytes, m.total_bytes - m.free_bytes
        return v1

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: FakeHandle) -> Any:
        if self._gpu(handle).details.value is not None:  # recorded with the details
            return self._detail_calls().nvmlDeviceGetBAR1MemoryInfo(handle)
        self._enter("nvmlDeviceGetBAR1MemoryInfo")
        _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a machine without details records no BAR1 figures

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates")
        u = _value(self._full_gpu(handle).utilization)
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu, rates.memory = u.gpu_percent, u.memory_percent
        return rates

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature")
        gpu = self._full_gpu(handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(_value(gpu.temperature_c))

    def nvmlDeviceGetTemperatureThreshold(self, handle: FakeHandle, threshold: int) -> int:
        self._enter("nvmlDeviceGetTemperatureThreshold")
        gpu = self._full_gpu(handle)
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return int(_value(gpu.temperature_slowdown_c))
        if threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return int(_value(gpu.temperature_shutdown_c))
        if gpu.details.value is None:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)  # other thresholds are recorded with the details
        return int(self._detail_calls().detail_threshold(handle, threshold))

    def nvmlDeviceGetFanSpeed(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetFanSpeed")
        return int(_value(self._full_gpu(handle).fan_percent))

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPowerUsage")
        return round(float(_value(self._full_gpu(handle).power_draw_w)) * 1000)

    # Clocks, energy and PCIe replays: from the recorded details (nvidia-smi -q) where the machine
    # has them, else from the exporter's own readings of the GPU (its cheap fact groups).

    def _has_details(self, handle: FakeHandle) -> bool:
        gpus = self._machine.gpus
        return handle.mig_slot is None and 0 <= handle.gpu < len(gpus) and gpus[handle.gpu].details.ok

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeHandle) -> int:
        if self._has_details(handle):
            return int(self._detail_calls().nvmlDeviceGetTotalEnergyConsumption(handle))
        self._enter("nvmlDeviceGetTotalEnergyConsumption")
        return int(_value(self._gpu(handle).energy_mj))

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, clock: int) -> int:
        if self._has_details(handle):
            return int(self._detail_calls().nvmlDeviceGetClockInfo(handle, clock))
        self._enter("nvmlDeviceGetClockInfo")
        gpu = self._gpu(handle)
        readings = {
            pynvml.NVML_CLOCK_SM: gpu.clock_sm_mhz,
            pynvml.NVML_CLOCK_MEM: gpu.clock_memory_mhz,
            pynvml.NVML_CLOCK_GRAPHICS: gpu.clock_graphics_mhz,
        }
        if clock not in readings:  # the video clock is recorded only with the details
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(_value(readings[clock]))

    def nvmlDeviceGetPcieReplayCounter(self, handle: FakeHandle) -> int:
        if self._has_details(handle):
            return int(self._detail_calls().nvmlDeviceGetPcieReplayCounter(handle))
        self._enter("nvmlDeviceGetPcieReplayCounter")
        return int(_value(self._gpu(handle).pcie_replays))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit")
        return round(float(_value(self._full_gpu(handle).power_limit_w)) * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeHandle) -> int:
        if self._gpu(handle).details.value is not None:  # the requested limit, recorded with the details
            return int(self._detail_calls().nvmlDeviceGetPowerManagementLimit(handle))
        # Without details the model keeps the enforced limit only; it is the management limit unless
        # an out-of-band cap is lower (both 700 W on the captured H100).
        self._enter("nvmlDeviceGetPowerManagementLimit")
        return round(float(_value(self._full_gpu(handle).power_limit_w)) * 1000)

    def nvmlDeviceGetPerformanceState(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPerformanceState")
        return int(_value(self._full_gpu(handle).pstate))

    # -- modes -----------------------------------------------------------------------

    def nvmlDeviceGetPersistenceMode(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetPersistenceMode")
        return int(bool(_value(self._full_gpu(handle).persistence_mode)))

    def nvmlDeviceGetComputeMode(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeMode")
        return int(COMPUTE_MODE_CODES[_value(self._full_gpu(handle).compute_mode)])

    def nvmlDeviceGetCudaComputeCapability(self, handle: FakeHandle) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability")
        major, minor = _value(self._gpu(handle).compute_capability)
        return int(major), int(minor)

    def nvmlDeviceGetEccMode(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetEccMode")
        gpu = self._full_gpu(handle)
        return [int(bool(_value(gpu.ecc_mode_current))), int(bool(_value(gpu.ecc_mode_pending)))]

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode")
        gpu = self._full_gpu(handle)
        return [int(bool(_value(gpu.mig_mode_current))), int(bool(_value(gpu.mig_mode_pending)))]

    def nvmlDeviceGetNumaNodeId(self, handle: FakeHandle) -> int:
        # The GPU memory's own NUMA node (coherent systems such as Grace Hopper), not the CPU
        # socket nearest the GPU: NOT_SUPPORTED on a PCIe/SXM H100 behind x86 (captured).
        self._enter("nvmlDeviceGetNumaNodeId")
        return int(_value(self._full_gpu(handle).numa_node))

    # -- PCIe ------------------------------------------------------------------------

    def _pcie(self, name: str, handle: FakeHandle, pick: Callable[[Any], Reading[int]]) -> int:
        self._enter(name)
        return int(_value(pick(self._full_gpu(handle).pcie)))

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
        ecc = self._full_gpu(handle).ecc_errors
        corrected = error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        if counter == pynvml.NVML_VOLATILE_ECC:
            reading = ecc.volatile_corrected if corrected else ecc.volatile_uncorrected
        else:
            reading = ecc.aggregate_corrected if corrected else ecc.aggregate_uncorrected
        return int(_value(reading))

    def nvmlDeviceGetRetiredPages(self, handle: FakeHandle, cause: int) -> list[int]:
        self._enter("nvmlDeviceGetRetiredPages")
        gpu = self._full_gpu(handle)
        if cause not in (
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # checked before support, as captured
        pages = _value(gpu.retired_pages)
        single = cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        recorded = self._detail_calls().detail_retired_addresses(gpu, single) if gpu.details.value is not None else None
        if recorded is not None:
            return list(recorded)
        n = pages.single_bit if single else pages.double_bit
        return [0x1000 * (i + 1) for i in range(n)]  # page addresses; only the count matters

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetRetiredPagesPendingStatus")
        return int(_value(self._full_gpu(handle).retired_pages).pending)

    def nvmlDeviceGetRemappedRows(self, handle: FakeHandle) -> tuple[int, int, int, int]:
        self._enter("nvmlDeviceGetRemappedRows")
        r = _value(self._full_gpu(handle).remapped_rows)
        return (r.correctable, r.uncorrectable, int(r.pending), int(r.failure))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons")
        return int(_value(self._full_gpu(handle).clock_event_reasons))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetCurrentClocksThrottleReasons")
        return int(_value(self._full_gpu(handle).clock_event_reasons))

    def nvmlDeviceValidateInforom(self, handle: FakeHandle) -> None:
        self._enter("nvmlDeviceValidateInforom")
        if not _value(self._full_gpu(handle).inforom_valid):
            _raise(pynvml.NVML_ERROR_CORRUPTED_INFOROM)

    def nvmlDeviceGetFieldValues(self, handle: FakeHandle, field_ids: list[int]) -> Any:
        self._enter("nvmlDeviceGetFieldValues")
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        code = self._fill_field_values(handle, field_ids, values)
        if code != pynvml.NVML_SUCCESS:
            _raise(code)
        return values

    def _fill_field_values(self, handle: FakeHandle, field_ids: list[Any], values: Any) -> int:
        try:
            gpu = self._full_gpu(handle)
        except pynvml.NVMLError as exc:
            return int(exc.value)
        for slot, field_id in zip(values, field_ids, strict=False):
            slot.fieldId = field_id[0] if isinstance(field_id, tuple) else field_id
            slot.scopeId = field_id[1] if isinstance(field_id, tuple) else 0
            slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            if slot.fieldId != pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION and gpu.details.value is not None:
                self._detail_calls().fill_field(gpu, field_id, slot)
            elif slot.fieldId == pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                action = gpu.recovery_action
                if action.reason is not None:
                    slot.nvmlReturn = _REASON_ERRORS[action.reason]
                else:
                    slot.nvmlReturn = pynvml.NVML_SUCCESS
                    slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                    slot.value.uiVal = action.value
        return int(pynvml.NVML_SUCCESS)

    # -- MIG -------------------------------------------------------------------------

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        """0 on a MIG-capable GPU with MIG off (captured); NOT_SUPPORTED where MIG is not."""
        self._enter("nvmlDeviceGetMaxMigDeviceCount")
        gpu = self._full_gpu(handle)
        if not _value(gpu.mig_mode_current):
            return 0
        return max([_MAX_MIG_SLOTS] + [m.index + 1 for m in gpu.mig_devices])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
        gpu = self._full_gpu(handle, pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if any(m.index == index for m in gpu.mig_devices):
            return FakeHandle(handle.gpu, index)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: FakeHandle) -> FakeHandle:
        self._enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        self._mig(handle)
        return FakeHandle(handle.gpu)

    def nvmlDeviceIsMigDeviceHandle(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceIsMigDeviceHandle")
        self._gpu(handle)
        return ctypes.c_uint(int(handle.mig_slot is not None))  # pynvml returns the c_uint itself

    def nvmlDeviceGetGpuInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId")
        return int(_value(self._mig(handle).gpu_instance_id))

    def nvmlDeviceGetComputeInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId")
        return int(_value(self._mig(handle).compute_instance_id))

    # -- processes -------------------------------------------------------------------

    def _procs(self, handle: FakeHandle, graphics: bool) -> list[GpuProcess]:
        """The processes NVML lists for this handle: a MIG device's handle sees its own only."""
        gpu = self._gpu(handle)
        wanted = (ProcessKind.GRAPHICS if graphics else ProcessKind.COMPUTE, ProcessKind.COMPUTE_GRAPHICS)
        procs = [p for p in _value(gpu.processes) if p.kind in wanted]
        if handle.mig_slot is not None:
            mig = self._mig(handle)
            gi, ci = mig.gpu_instance_id.value, mig.compute_instance_id.value
            procs = [p for p in procs if p.gpu_instance_id == gi and p.compute_instance_id == ci]
        return procs

    def _query_processes(self, symbol: str, handle: FakeHandle) -> list[Any]:
        """nvidia-ml-py's process wrapper: through the module's function-pointer lookup (which
        gpustat patches to fall back from v3 to v2), the sizing call, then friendly objects."""
        fn = self.__dict__["_nvmlGetFunctionPointer"](symbol)
        count = ctypes.c_uint(0)
        ret = fn(handle, ctypes.byref(count), None)
        if ret == pynvml.NVML_SUCCESS:
            return []
        if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
            _raise(ret)
        count.value = count.value * 2 + 5
        infos = (pynvml.c_nvmlProcessInfo_v3_t * count.value)()
        ret = fn(handle, ctypes.byref(count), infos)
        if ret != pynvml.NVML_SUCCESS:
            _raise(ret)
        out = []
        for i in range(count.value):
            obj = pynvml.nvmlStructToFriendlyObject(infos[i])
            if obj.usedGpuMemory == _NOT_AVAILABLE:
                obj.usedGpuMemory = None  # as pynvml maps NVML_VALUE_NOT_AVAILABLE
            out.append(obj)
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: FakeHandle) -> list[Any]:
        return self._query_processes("nvmlDeviceGetComputeRunningProcesses_v3", handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        return self._query_processes("nvmlDeviceGetComputeRunningProcesses_v2", handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        # nvidia-ml-py's unversioned wrapper calls the v3 entry point.
        return self._query_processes("nvmlDeviceGetComputeRunningProcesses_v3", handle)

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: FakeHandle) -> list[Any]:
        return self._query_processes("nvmlDeviceGetGraphicsRunningProcesses_v3", handle)

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: FakeHandle) -> list[Any]:
        return self._query_processes("nvmlDeviceGetGraphicsRunningProcesses_v2", handle)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        return self._query_processes("nvmlDeviceGetGraphicsRunningProcesses_v3", handle)

    # -- the C entry points ----------------------------------------------------------

    def _nvmlGetFunctionPointer(self, name: str) -> Callable[..., int]:
        """A stand-in for the C function ``name``, called with ctypes arguments.

        pynvml and its consumers (gpustat, nvitop) reach the versioned calls this way; the
        stand-in returns NVML's status code, as the C function does.
        """
        cache = self.__dict__["_nvmlGetFunctionPointer_cache"]
        if name in cache:
            return cache[name]  # type: ignore[no-any-return]
        if not self._loaded:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)
        self._enter(name)  # after a shutdown: UNINITIALIZED here rather than from the call
        c_function = self._c_function(name)
        if c_function is None:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return c_function

    def _c_function(self, name: str) -> Callable[..., int] | None:
        for family, graphics in (("Compute", False), ("Graphics", True), ("MPSCompute", None)):
            for suffix in ("", "_v2", "_v3"):
                if name == f"nvmlDeviceGet{family}RunningProcesses{suffix}":
                    return self._c_processes(graphics, with_instances=bool(suffix))
        if name == "nvmlDeviceGetMemoryInfo":
            return self._c_call(lambda h, ref: _fill_memory(ref._obj, self._memory(h), v2=False))
        if name == "nvmlDeviceGetMemoryInfo_v2":
            return self._c_call(lambda h, ref: _fill_memory(ref._obj, self._memory(h), v2=True))
        if name == "nvmlDeviceGetTemperature":
            return self._c_call(lambda h, sensor, ref: _set(ref._obj, self.nvmlDeviceGetTemperature(h, sensor.value)))
        if name == "nvmlDeviceGetFieldValues":
            return lambda h, count, ref: self._fill_field_values(
                h, [ref._obj[i].fieldId for i in range(count.value)], ref._obj
            )
        if name in ("nvmlDeviceGetDriverModel", "nvmlDeviceGetDriverModel_v2"):
            return lambda *_args: int(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a Windows-only setting
        return None

    def _c_call(self, body: Callable[..., None]) -> Callable[..., int]:
        def c_function(*args: Any) -> int:
            try:
                body(*args)
            except pynvml.NVMLError as exc:
                return int(exc.value)
            return int(pynvml.NVML_SUCCESS)

        return c_function

    def _c_processes(self, graphics: bool | None, with_instances: bool) -> Callable[..., int]:
        """``(device, unsigned *count, nvmlProcessInfo_t *infos)``, the sizing protocol included."""

        def c_function(handle: FakeHandle, count_ref: Any, array: Any) -> int:
            try:
                procs = [] if graphics is None else self._procs(handle, graphics)  # no MPS in the model
            except pynvml.NVMLError as exc:
                return int(exc.value)
            count = count_ref._obj  # ctypes.byref(c_uint)
            if array is None or count.value < len(procs):
                count.value = len(procs)
                return int(pynvml.NVML_SUCCESS if not procs else pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
            for i, proc in enumerate(procs):
                if with_instances:
                    _fill_process(array[i], proc)
                else:  # the v1 struct has no instance ids
                    array[i].pid = proc.pid
                    array[i].usedGpuMemory = proc.used_memory_bytes.get(_NOT_AVAILABLE)
            count.value = len(procs)
            return int(pynvml.NVML_SUCCESS)

        return c_function


def _fill_process(info: Any, proc: GpuProcess) -> None:
    info.pid = proc.pid
    info.usedGpuMemory = proc.used_memory_bytes.get(_NOT_AVAILABLE)
    info.gpuInstanceId = NO_INSTANCE if proc.gpu_instance_id is None else proc.gpu_instance_id
    info.computeInstanceId = NO_INSTANCE if proc.compute_instance_id is None else proc.compute_instance_id


def _fill_memory(struct: Any, memory: Memory, v2: bool) -> None:
    struct.total, struct.free = memory.total_bytes, memory.free_bytes
    if v2:
        struct.reserved, struct.used = memory.reserved_bytes.get(0), memory.used_bytes
    else:
        struct.used = memory.total_bytes - memory.free_bytes


def _set(c_value: Any, value: int) -> None:
    c_value.value = value
