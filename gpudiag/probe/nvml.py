"""The one module that calls NVML.

It works on any object shaped like the ``pynvml`` module (nvidia-ml-py): the real one on
a live machine, :mod:`gpudiag.replay.fake_nvml` in tests and replays. No NVML exception
leaves this module: init failures become an explained :class:`NvmlInfo`, per-field
failures become a :class:`Reading` with its reason, a lost GPU becomes a row that says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from msgspec.structs import replace

from gpudiag.model import (
    ALL_GROUPS,
    EccCounts,
    FactGroup,
    Gpu,
    GpuProcess,
    GpuState,
    HostProcess,
    Memory,
    MigDevice,
    NvmlInfo,
    NvmlStatus,
    PcieLink,
    ProcessKind,
    Reading,
    Reason,
    RemappedRows,
    RetiredPages,
    Utilization,
)
from gpudiag.readings import COMPUTE_MODES, NO_INSTANCE

T = TypeVar("T")

HostResolver = Callable[[int], HostProcess]

# Tried in order; the first one this driver has is used for the rest of the session.
PROCESS_QUERY_APIS = ("_v3", "_v2", "_v1")


class _GpuLostError(Exception):
    """Raised inside a GPU read when NVML reports the GPU lost; ends that GPU's read."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _init_status(lib: Any, exc: Exception) -> tuple[NvmlStatus, str]:
    """Turn an nvmlInit failure into a status and a one-line, actionable explanation."""
    if isinstance(exc, lib.NVMLError_LibraryNotFound):
        return NvmlStatus.LIBRARY_NOT_FOUND, (
            "NVML library (libnvidia-ml.so.1) not found: the NVIDIA driver is not installed, "
            "or this container was started without the NVIDIA runtime"
        )
    if isinstance(exc, lib.NVMLError_DriverNotLoaded):
        return NvmlStatus.DRIVER_NOT_LOADED, (
            "NVIDIA driver not loaded: no GPU kernel module is running (is this a GPU machine? "
            "check `lsmod | grep nvidia`)"
        )
    if isinstance(exc, lib.NVMLError_LibRmVersionMismatch):
        return NvmlStatus.VERSION_MISMATCH, (
            "NVIDIA driver/library version mismatch: the driver was upgraded but the old kernel "
            "module is still loaded; reboot, or unload and reload the nvidia modules"
        )
    if isinstance(exc, lib.NVMLError_NoPermission):
        return NvmlStatus.NO_PERMISSION, (
            "no permission to open the NVIDIA devices (/dev/nvidia*): add this user to the "
            "group that owns them, or run inside the job's cgroup"
        )
    return NvmlStatus.ERROR, f"NVML failed to initialise: {exc}"


def _unusable(status: NvmlStatus, detail: str, kernel_module_version: Reading[str]) -> NvmlInfo:
    """NVML state when it cannot be used at all: every system reading says why."""
    missing: Reading[str] = Reading.missing(Reason.UNAVAILABLE, detail)
    return NvmlInfo(
        status=status,
        detail=detail,
        driver_version=missing,
        nvml_version=missing,
        cuda_driver_version=Reading.missing(Reason.UNAVAILABLE, detail),
        kernel_module_version=kernel_module_version,
        process_query_api="",
        functions_missing=(),
    )


class _Handles(msgspec.Struct):
    gpu: Any  # NVML handle, or None when it could not be obtained
    state: GpuState
    state_detail: str
    mig: list[tuple[int, Any]]
    # Readings that cannot change while the driver stays loaded (name, bus id, thresholds, the
    # PCIe maxima), kept once read: handles, and so these, are fetched afresh on every reopen, which
    # a long-running reader does when NVML restarts under it. Only answers are kept, never errors.
    fixed: dict[tuple[str, tuple[Any, ...]], Reading[Any]] = msgspec.field(default_factory=dict)


class NvmlSession:
    """An initialised NVML with cached device handles, for one or many reads.

    Watch loops keep one session: handles are fetched once, not on every refresh.
    """

    def __init__(self, lib: Any, host: HostResolver) -> None:
        self._lib = lib
        self._host = host
        self._handles: list[_Handles] = []
        self._process_api: str = ""
        self._missing: list[str] = []
        self.info: NvmlInfo
        self.opened = False
        # For details: host view of GPU processes, and the CPU count behind NVML's affinity masks.
        self.process_stats: Any = no_process_stats
        self.cpu_count = os.cpu_count() or 1
        self._details: Any = None
        # Replays: GPUs whose snapshot holds no details answer with this instead of being read.
        self.unrecorded_details: dict[int, Reading[Any]] = {}

    # -- lifecycle -------------------------------------------------------------------

    def open(self, kernel_module_version: Reading[str]) -> NvmlInfo:
        lib = self._lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            status, detail = _init_status(lib, exc)
            self.info = _unusable(status, detail, kernel_module_version)
            return self.info
        self.opened = True
        try:
            self._discover()
        except NvmlDiscoveryError as exc:
            detail = f"NVML initialised but cannot count the GPUs: {exc}"
            self.info = _unusable(NvmlStatus.ERROR, detail, kernel_module_version)
            return self.info
        self.info = self._system_info(kernel_module_version)
        return self.info

    def close(self) -> None:
        if self.opened:
            with contextlib.suppress(self._lib.NVMLError):  # nothing useful to do about it
                self._lib.nvmlShutdown()
            self.opened = False

    def set_host(self, host: HostResolver) -> None:
        """Resolve PIDs with ``host`` from now on (a long-running reader caches them)."""
        self._host = host

    def still_valid(self) -> bool:
        """Whether the handles still answer: False once NVML was shut down or restarted under a
        long-running reader (driver reload, a GPU reset) or the GPU count changed."""
        if not self.opened:
            return False
        try:
            return int(self._lib.nvmlDeviceGetCount()) == len(self._handles)
        except self._lib.NVMLError:
            return False

    def reopen(self) -> NvmlInfo:
        """Initialise again and fetch fresh handles (after :meth:`still_valid` said no)."""
        kernel_module_version = self.info.kernel_module_version
        self.close()
        self._missing = []
        self._process_api = ""
        return self.open(kernel_module_version)

    def __enter__(self) -> NvmlSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------

    def _reason(self, exc: Exception, function: str) -> tuple[Reason, str]:
        lib = self._lib
        if getattr(exc, "gpudiag_reason", None) == Reason.NOT_RECORDED.value:  # a replay's snapshot lacks it
            return Reason.NOT_RECORDED, ""
        if isinstance(exc, lib.NVMLError_NotSupported):
            return Reason.NOT_SUPPORTED, ""
        if isinstance(exc, lib.NVMLError_NoPermission):
            return Reason.NO_PERMISSION, f"{function}: insufficient permissions"
        if isinstance(exc, lib.NVMLError_GpuIsLost):
            return Reason.GPU_LOST, "GPU is lost"
        if isinstance(exc, lib.NVMLError_FunctionNotFound):
            if function not in self._missing:
                self._missing.append(function)
            return Reason.FUNCTION_NOT_FOUND, f"{function} is not in this driver"
        if isinstance(exc, lib.NVMLError_NotFound):
            return Reason.NOT_FOUND, ""
        return Reason.UNKNOWN_ERROR, f"{function}: {exc}"

    def _fixed(
        self, handles: _Handles, function: str, *args: Any, convert: Callable[[Any], T] | None = None
    ) -> Reading[T]:
        """:meth:`_read` of a reading that cannot change while the driver stays loaded: asked once
        per NVML session (an error is asked again next time)."""
        key = (function, args[1:])  # args[0] is this GPU's handle
        found: Reading[T] | None = handles.fixed.get(key)
        if found is None:
            found = self._read(function, *args, convert=convert)
            if found.value is not None:
                handles.fixed[key] = found
        return found

    def _read(self, function: str, *args: Any, convert: Callable[[Any], T] | None = None) -> Reading[T]:
        """Call one NVML function; errors become a reason, a lost GPU ends the GPU's read."""
        try:
            raw = getattr(self._lib, function)(*args)
        except self._lib.NVMLError as exc:
            reason, detail = self._reason(exc, function)
            if reason is Reason.GPU_LOST:
                raise _GpuLostError(f"{function}: GPU is lost") from None
            return Reading.missing(reason, detail)
        return Reading(value=convert(raw) if convert else raw)

    # -- discovery -------------------------------------------------------------------

    def _discover(self) -> None:
        lib = self._lib
        try:
            count = lib.nvmlDeviceGetCount()
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, "nvmlDeviceGetCount")
            raise NvmlDiscoveryError(detail or reason.label) from None
        self._handles = []
        for index in range(count):
            try:
                handle = lib.nvmlDeviceGetHandleByIndex(index)
            except lib.NVMLError as exc:
                reason, detail = self._reason(exc, "nvmlDeviceGetHandleByIndex")
                state = GpuState.LOST if reason is Reason.GPU_LOST else GpuState.ERROR
                message = (
                    "GPU is lost (fallen off the bus, XID 79): reset the GPU or reboot the node"
                    if state is GpuState.LOST
                    else f"cannot open GPU {index}: {detail or reason.label}"
                )
                self._handles.append(_Handles(None, state, message, []))
                continue
            self._handles.append(_Handles(handle, GpuState.OK, "", self._mig_handles(handle)))

    def _mig_handles(self, handle: Any) -> list[tuple[int, Any]]:
        lib = self._lib
        try:
            current, _pending = lib.nvmlDeviceGetMigMode(handle)
            if current != lib.NVML_DEVICE_MIG_ENABLE:
                return []
            slots = lib.nvmlDeviceGetMaxMigDeviceCount(handle)
        except lib.NVMLError:
            return []  # not a MIG-capable GPU; the mode reading says why later
        found = []
        for slot in range(slots):
            try:
                found.append((slot, lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
            except lib.NVMLError:
                continue  # an empty slot answers NOT_FOUND
        return found

    def _system_info(self, kernel_module_version: Reading[str]) -> NvmlInfo:
        driver = self._read("nvmlSystemGetDriverVersion", convert=_text)
        nvml_version = self._read("nvmlSystemGetNVMLVersion", convert=_text)
        cuda = self._read("nvmlSystemGetCudaDriverVersion", convert=int)
        return NvmlInfo(
            status=NvmlStatus.OK,
            detail="",
            driver_version=driver,
            nvml_version=nvml_version,
            cuda_driver_version=cuda,
            kernel_module_version=kernel_module_version,
            process_query_api="",
            functions_missing=(),
        )

    # -- reading ---------------------------------------------------------------------

    def read_gpus(self, facts: frozenset[FactGroup] = ALL_GROUPS) -> tuple[Gpu, ...]:
        """Read the ``facts`` of every GPU (the rest stay NOT_READ). Safe to call repeatedly;
        handles are reused."""
        gpus = []
        for index, handles in enumerate(self._handles):
            if handles.gpu is None:
                gpus.append(failed_gpu(index, handles.state, handles.state_detail))
                continue
            try:
                gpus.append(self._read_gpu(index, handles, facts))
            except _GpuLostError as lost:
                gpus.append(failed_gpu(index, GpuState.LOST, f"GPU is lost ({lost.detail})"))
        if FactGroup.DETAILS in facts:
            gpus = self._with_details(gpus, links=FactGroup.LINKS in facts)
        self.info = msgspec.structs.replace(
            self.info,
            process_query_api=self._process_api,
            functions_missing=tuple(self._missing),
        )
        return tuple(gpus)

    def _with_details(self, gpus: list[Gpu], links: bool) -> list[Gpu]:
        from gpudiag.probe.details import DetailsProbe, with_nvlink_counts

        if self._details is None:
            self._details = DetailsProbe(self._lib, self._read, self.process_stats, self.cpu_count)
        opened = [(i, hs.gpu) for i, hs in enumerate(self._handles) if hs.gpu is not None]
        found: list[Any] = []
        for index, gpu in enumerate(gpus):
            handle = self._handles[index].gpu
            if handle is None or gpu.state is not GpuState.OK or index in self.unrecorded_details:
                found.append(None)
                continue
            peers = [(other, oh) for other, oh in opened if other != index]
            try:
                found.append(self._details.read(index, handle, peers, links))
            except _GpuLostError as lost:
                found.append(None)
                gpus[index] = failed_gpu(index, GpuState.LOST, f"GPU is lost ({lost.detail})")
        found = with_nvlink_counts(found, [g.pci_bus_id.value for g in gpus])
        out = [g if d is None else replace(g, details=Reading.of(d)) for g, d in zip(gpus, found, strict=True)]
        return [
            replace(g, details=self.unrecorded_details[i])
            if i in self.unrecorded_details and g.state is GpuState.OK
            else g
            for i, g in enumerate(out)
        ]

    def _read_gpu(self, index: int, handles: _Handles, facts: frozenset[FactGroup]) -> Gpu:
        h = handles.gpu
        identity: dict[str, Any] = {
            # Asked every time, first: the cheap call that finds a GPU lost since the last read.
            "uuid": self._read("nvmlDeviceGetUUID", h, convert=_text),
            "pci_bus_id": self._fixed(handles, "nvmlDeviceGetPciInfo", h, convert=lambda p: _text(p.busId)),
            "name": self._fixed(handles, "nvmlDeviceGetName", h, convert=_text),
            "minor_number": self._fixed(handles, "nvmlDeviceGetMinorNumber", h, convert=int),
        }
        fields = {**_not_read_fields(), **identity}
        for group in FactGroup:  # declaration order: the same NVML call order whatever the set
            if group in facts and group in _FACT_READERS:  # DETAILS: read across GPUs, in read_gpus
                fields.update(_FACT_READERS[group](self, h, handles))
        return Gpu(index=index, state=GpuState.OK, state_detail="", **fields)

    # -- one reader per group of facts: each returns the Gpu fields of its group ------

    def _memory_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"memory": self._memory(h)}

    def _utilization_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {
            "utilization": self._read(
                "nvmlDeviceGetUtilizationRates",
                h,
                convert=lambda u: Utilization(gpu_percent=int(u.gpu), memory_percent=int(u.memory)),
            )
        }

    def _thermal_facts(self, h: Any, handles: _Handles) -> dict[str, Any]:
        lib = self._lib
        return {
            "temperature_c": self._read("nvmlDeviceGetTemperature", h, lib.NVML_TEMPERATURE_GPU, convert=int),
            "temperature_slowdown_c": self._fixed(
                handles, "nvmlDeviceGetTemperatureThreshold", h, lib.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, convert=int
            ),
            "temperature_shutdown_c": self._fixed(
                handles, "nvmlDeviceGetTemperatureThreshold", h, lib.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, convert=int
            ),
            "fan_percent": self._read("nvmlDeviceGetFanSpeed", h, convert=int),
        }

    def _power_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {
            "power_draw_w": self._read("nvmlDeviceGetPowerUsage", h, convert=_milliwatts),
            "power_limit_w": self._read("nvmlDeviceGetEnforcedPowerLimit", h, convert=_milliwatts),
        }

    def _performance_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"pstate": self._read("nvmlDeviceGetPerformanceState", h, convert=int)}

    def _clock_event_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"clock_event_reasons": self._clock_events(h)}

    def _modes_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {
            "persistence_mode": self._read("nvmlDeviceGetPersistenceMode", h, convert=bool),
            "compute_mode": self._read("nvmlDeviceGetComputeMode", h, convert=COMPUTE_MODES.__getitem__),
        }

    def _capability_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {
            "compute_capability": self._read(
                "nvmlDeviceGetCudaComputeCapability", h, convert=lambda cc: (int(cc[0]), int(cc[1]))
            )
        }

    def _pcie_facts(self, h: Any, handles: _Handles) -> dict[str, Any]:
        return {
            "pcie": PcieLink(
                gen_current=self._read("nvmlDeviceGetCurrPcieLinkGeneration", h, convert=int),
                gen_max=self._fixed(handles, "nvmlDeviceGetMaxPcieLinkGeneration", h, convert=int),
                gen_gpu_max=self._fixed(handles, "nvmlDeviceGetGpuMaxPcieLinkGeneration", h, convert=int),
                width_current=self._read("nvmlDeviceGetCurrPcieLinkWidth", h, convert=int),
                width_max=self._fixed(handles, "nvmlDeviceGetMaxPcieLinkWidth", h, convert=int),
            )
        }

    def _numa_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"numa_node": self._read("nvmlDeviceGetNumaNodeId", h, convert=int)}

    def _ecc_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        ecc: Reading[list[int]] = self._read("nvmlDeviceGetEccMode", h)
        return {
            "ecc_mode_current": ecc.map(lambda m: bool(m[0])),
            "ecc_mode_pending": ecc.map(lambda m: bool(m[1])),
            "ecc_errors": self._ecc_counts(h),
        }

    def _memory_health_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {
            "retired_pages": self._retired_pages(h),
            "remapped_rows": self._read(
                "nvmlDeviceGetRemappedRows",
                h,
                convert=lambda r: RemappedRows(
                    correctable=int(r[0]), uncorrectable=int(r[1]), pending=bool(r[2]), failure=bool(r[3])
                ),
            ),
        }

    def _inforom_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"inforom_valid": self._inforom(h)}

    def _recovery_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"recovery_action": self._recovery_action(h)}

    def _mig_facts(self, h: Any, handles: _Handles) -> dict[str, Any]:
        lib = self._lib
        mig: Reading[list[int]] = self._read("nvmlDeviceGetMigMode", h)
        return {
            "mig_mode_current": mig.map(lambda m: m[0] == lib.NVML_DEVICE_MIG_ENABLE),
            "mig_mode_pending": mig.map(lambda m: m[1] == lib.NVML_DEVICE_MIG_ENABLE),
            "mig_devices": tuple(self._mig_device(slot, mh) for slot, mh in handles.mig),
        }

    def _processes_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"processes": self._processes(h)}

    def _clock_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        lib = self._lib
        return {
            "clock_sm_mhz": self._read("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_SM, convert=int),
            "clock_memory_mhz": self._read("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_MEM, convert=int),
            "clock_graphics_mhz": self._read("nvmlDeviceGetClockInfo", h, lib.NVML_CLOCK_GRAPHICS, convert=int),
        }

    def _energy_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"energy_mj": self._read("nvmlDeviceGetTotalEnergyConsumption", h, convert=int)}

    def _pcie_replay_facts(self, h: Any, _handles: _Handles) -> dict[str, Any]:
        return {"pcie_replays": self._read("nvmlDeviceGetPcieReplayCounter", h, convert=int)}

    def _memory(self, h: Any) -> Reading[Memory]:
        lib = self._lib
        try:
            m = lib.nvmlDeviceGetMemoryInfo(h, lib.nvmlMemory_v2)
        except lib.NVMLError_FunctionNotFound:
            # Drivers before R510 have only the v1 struct, without the reserved figure.
            if "nvmlDeviceGetMemoryInfo_v2" not in self._missing:
                self._missing.append("nvmlDeviceGetMemoryInfo_v2")
            return self._read(
                "nvmlDeviceGetMemoryInfo",
                h,
                convert=lambda m: Memory(
                    int(m.total),
                    int(m.used),
                    int(m.free),
                    Reading.missing(Reason.FUNCTION_NOT_FOUND, "nvmlDeviceGetMemoryInfo_v2 is not in this driver"),
                ),
            )
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, "nvmlDeviceGetMemoryInfo")
            if reason is Reason.GPU_LOST:
                raise _GpuLostError("nvmlDeviceGetMemoryInfo: GPU is lost") from None
            return Reading.missing(reason, detail)
        return Reading.of(Memory(int(m.total), int(m.used), int(m.free), Reading.of(int(m.reserved))))

    def _ecc_counts(self, h: Any) -> EccCounts:
        lib = self._lib

        def count(error_type: int, counter: int) -> Reading[int]:
            return self._read("nvmlDeviceGetTotalEccErrors", h, error_type, counter, convert=int)

        corrected, uncorrected = lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        return EccCounts(
            volatile_corrected=count(corrected, lib.NVML_VOLATILE_ECC),
            volatile_uncorrected=count(uncorrected, lib.NVML_VOLATILE_ECC),
            aggregate_corrected=count(corrected, lib.NVML_AGGREGATE_ECC),
            aggregate_uncorrected=count(uncorrected, lib.NVML_AGGREGATE_ECC),
        )

    def _retired_pages(self, h: Any) -> Reading[RetiredPages]:
        lib = self._lib
        sbe = self._read(
            "nvmlDeviceGetRetiredPages", h, lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, convert=len
        )
        if sbe.value is None:
            return Reading.missing_like(sbe)
        dbe = self._read(
            "nvmlDeviceGetRetiredPages", h, lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, convert=len
        )
        pending = self._read("nvmlDeviceGetRetiredPagesPendingStatus", h, convert=bool)
        if dbe.value is None or pending.value is None:
            bad = dbe if dbe.value is None else pending
            return Reading.missing_like(bad)
        return Reading.of(RetiredPages(single_bit=sbe.value, double_bit=dbe.value, pending=pending.value))

    def _clock_events(self, h: Any) -> Reading[int]:
        events = self._read("nvmlDeviceGetCurrentClocksEventReasons", h, convert=int)
        if events.reason is Reason.FUNCTION_NOT_FOUND:
            # Drivers before R535 name it "throttle reasons"; same bits.
            return self._read("nvmlDeviceGetCurrentClocksThrottleReasons", h, convert=int)
        return events

    def _inforom(self, h: Any) -> Reading[bool]:
        lib = self._lib
        try:
            lib.nvmlDeviceValidateInforom(h)
        except lib.NVMLError_CorruptedInforom:
            return Reading.of(False)
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, "nvmlDeviceValidateInforom")
            if reason is Reason.GPU_LOST:
                raise _GpuLostError("nvmlDeviceValidateInforom: GPU is lost") from None
            return Reading.missing(reason, detail)
        return Reading.of(True)

    def _recovery_action(self, h: Any) -> Reading[int]:
        lib = self._lib
        values: Reading[Any] = self._read("nvmlDeviceGetFieldValues", h, [lib.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])
        if values.value is None:
            return Reading.missing_like(values)
        field = values.value[0]
        if field.nvmlReturn != lib.NVML_SUCCESS:
            try:
                raise lib.NVMLError(field.nvmlReturn)
            except lib.NVMLError as exc:
                reason, detail = self._reason(exc, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION")
                return Reading.missing(reason, detail)
        return Reading.of(int(field.value.uiVal))

    def _mig_device(self, slot: int, mh: Any) -> MigDevice:
        return MigDevice(
            index=slot,
            uuid=self._read("nvmlDeviceGetUUID", mh, convert=_text),
            gpu_instance_id=self._read("nvmlDeviceGetGpuInstanceId", mh, convert=int),
            compute_instance_id=self._read("nvmlDeviceGetComputeInstanceId", mh, convert=int),
            name=self._read("nvmlDeviceGetName", mh, convert=_text),
            memory=self._read(
                "nvmlDeviceGetMemoryInfo", mh, convert=lambda m: Memory(int(m.total), int(m.used), int(m.free))
            ),
        )

    # -- processes -------------------------------------------------------------------

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
                    raise _GpuLostError("process query: GPU is lost") from None
                return Reading.missing(reason, detail)
            for proc in procs:
                pid = int(proc.pid)
                if pid not in merged:
                    merged[pid] = (kind, proc)
                elif merged[pid][0] is not kind:  # in both lists; a repeat within one list stays one kind
                    merged[pid] = (ProcessKind.COMPUTE_GRAPHICS, merged[pid][1])
        result = []
        for pid, (kind, proc) in merged.items():
            used = getattr(proc, "usedGpuMemory", None)
            gi = getattr(proc, "gpuInstanceId", NO_INSTANCE)
            ci = getattr(proc, "computeInstanceId", NO_INSTANCE)
            result.append(
                GpuProcess(
                    pid=pid,
                    kind=kind,
                    used_memory_bytes=(
                        Reading.of(int(used))
                        if used is not None
                        else Reading.missing(Reason.NOT_SUPPORTED, "NVML gives no per-process memory here")
                    ),
                    host=self._host(pid),
                    gpu_instance_id=None if gi == NO_INSTANCE else int(gi),
                    compute_instance_id=None if ci == NO_INSTANCE else int(ci),
                )
            )
        return Reading.of(tuple(result))


def no_process_stats(pid: int) -> tuple[Reading[float], Reading[int], Reading[float]]:
    missing: Reading[Any] = Reading.missing(Reason.UNAVAILABLE, "no host view of processes")
    return missing, missing, missing


class NvmlDiscoveryError(Exception):
    """NVML initialised but could not count the GPUs."""


def _milliwatts(value: Any) -> float:
    return round(int(value) / 1000.0, 3)


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


def failed_gpu(index: int, state: GpuState, detail: str) -> Gpu:
    """A GPU row whose handle is unusable: every reading says why."""
    reason = Reason.GPU_LOST if state is GpuState.LOST else Reason.UNKNOWN_ERROR
    return blank_gpu(index, state, detail, Reading.missing(reason, detail))


NOT_READ: Reading[Any] = Reading.missing(Reason.NOT_READ)

# Which reader fills each group: adding a group is a FactGroup member, a reader method and one line here.
_FACT_READERS: dict[FactGroup, Callable[[NvmlSession, Any, _Handles], dict[str, Any]]] = {
    FactGroup.MEMORY: NvmlSession._memory_facts,
    FactGroup.UTILIZATION: NvmlSession._utilization_facts,
    FactGroup.THERMAL: NvmlSession._thermal_facts,
    FactGroup.POWER: NvmlSession._power_facts,
    FactGroup.PERFORMANCE: NvmlSession._performance_facts,
    FactGroup.CLOCK_EVENTS: NvmlSession._clock_event_facts,
    FactGroup.MODES: NvmlSession._modes_facts,
    FactGroup.CAPABILITY: NvmlSession._capability_facts,
    FactGroup.PCIE: NvmlSession._pcie_facts,
    FactGroup.NUMA: NvmlSession._numa_facts,
    FactGroup.ECC: NvmlSession._ecc_facts,
    FactGroup.MEMORY_HEALTH: NvmlSession._memory_health_facts,
    FactGroup.INFOROM: NvmlSession._inforom_facts,
    FactGroup.RECOVERY: NvmlSession._recovery_facts,
    FactGroup.MIG: NvmlSession._mig_facts,
    FactGroup.PROCESSES: NvmlSession._processes_facts,
    FactGroup.CLOCKS: NvmlSession._clock_facts,
    FactGroup.ENERGY: NvmlSession._energy_facts,
    FactGroup.PCIE_REPLAYS: NvmlSession._pcie_replay_facts,
}

_GPU_FIXED = ("index", "state", "state_detail")


def blank_gpu(index: int, state: GpuState, detail: str, missing: Reading[Any]) -> Gpu:
    """A GPU whose every reading is ``missing`` (nested link and ECC readings too), no MIG devices."""
    return Gpu(index=index, state=state, state_detail=detail, **_blank_fields(missing))


def _blank_fields(missing: Reading[Any]) -> dict[str, Any]:
    """Every Gpu field but index and state, each ``missing``: found from the Struct, so a new
    reading field needs no line here."""
    values: dict[str, Any] = {}
    kinds = _gpu_field_types()
    for name in Gpu.__struct_fields__:
        if name in _GPU_FIXED:
            continue
        kind = kinds[name]
        if typing.get_origin(kind) is tuple:
            values[name] = ()
        elif isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            values[name] = kind(**{inner: missing for inner in kind.__struct_fields__})
        else:
            values[name] = missing
    return values


@functools.cache
def _not_read_fields() -> dict[str, Any]:
    """The blank fields of a read GPU, built once: every read copies them (a watch or exporter reads often)."""
    return _blank_fields(NOT_READ)


@functools.cache
def _gpu_field_types() -> dict[str, Any]:
    # GpuDetails is named only under TYPE_CHECKING (gpudiag.details loads where details are read);
    # its field is a plain Reading here, so a stand-in resolves it.
    return typing.get_type_hints(Gpu, localns={"GpuDetails": object})
