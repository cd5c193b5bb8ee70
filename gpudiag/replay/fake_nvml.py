"""A fake NVML library that answers from a :class:`~gpudiag.model.Machine`, under the real pynvml.

:class:`FakeNvml` is a module like ``pynvml``: nvidia-ml-py's own classes, constants, structs and
functions (the same code, unmodified: :mod:`.c_boundary` binds them to a loader state of this fake's
own), and the library those functions load is this fake: each C function they reach through
``_nvmlGetFunctionPointer`` receives pynvml's ctypes arguments, writes its answer through the
pointers, arrays and string buffers pynvml passes, and returns NVML's code. So every answer a
consumer sees is the one pynvml's wrapper makes: its structs and arrays, its strings decoded as it
decodes them, its error classes.

What a C function answers is decided one level up, per NVML call, in Python (the methods named after
the calls): as the declared readings' rows say (``gpudiag.readings``' rows and the details' in
``gpudiag.details``): the recorded value encoded back into NVML's answer, the error its reason stands
for, or "not recorded" for what the snapshot does not hold; the rest by hand, as the hardware captures
in ``docs/hardware/`` show (the memory structs, reference-counted init, MIG answers). A call this fake
does not model is a symbol the library lacks (FUNCTION_NOT_FOUND, as a driver without it).
"""

from __future__ import annotations

import ctypes
import functools
from collections import deque
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

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
from gpudiag.readings import GPM_METRICS, NO_INSTANCE
from gpudiag.replay.c_boundary import CFake, address_of, unversioned
from gpudiag.replay.call_costs import CallCosts
from gpudiag.replay.fake_answers import REASON_ERRORS, FakeHandle, NotRecordedError, fail, recorded
from gpudiag.replay.fake_events import EventSet, FakeXidEvents
from gpudiag.replay.fake_rows import (
    FIELDS_OF_CALLS,
    ROW_CALLS,
    Answer,
    Call,
    answer_of,
    detail_rows_by_call,
    detail_rows_by_field,
    gpu_calls,
    gpu_fields,
)
from gpudiag.replay.replay_time import ReplayTime

_INIT_ERRORS = {
    NvmlStatus.LIBRARY_NOT_FOUND: pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
    NvmlStatus.DRIVER_NOT_LOADED: pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    NvmlStatus.VERSION_MISMATCH: pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NvmlStatus.NO_PERMISSION: pynvml.NVML_ERROR_NO_PERMISSION,
    NvmlStatus.ERROR: pynvml.NVML_ERROR_UNKNOWN,
}

CALL_LOG = 20_000  # NVML calls kept for cost tests (~160 KiB; a snapshot of 8 GPUs makes ~2,200)
_MAX_MIG_SLOTS = 7  # A100/H100: up to seven GPU instances
_NOT_AVAILABLE = ctypes.c_ulonglong(-1).value  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory

# NVML's answer to an argument a call does not know, where it is not NOT_SUPPORTED.
_UNKNOWN_ARGUMENT = {
    "nvmlDeviceGetTemperature": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetClockInfo": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetMaxClockInfo": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetApplicationsClock": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetDefaultApplicationsClock": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_INVALID_ARGUMENT,
    "nvmlDeviceGetPcieThroughput": pynvml.NVML_ERROR_INVALID_ARGUMENT,
}
# GPM metric ids by the model.Profiling field that keeps each, and the factor from GPM's unit to the model's.
_GPM_FIELDS = {metric: (name, factor) for name, metric, factor in GPM_METRICS}
# nvmlFieldValue_t's value member by its valueType (nvmlValueType_t).
_OK = GpuState.OK
_VALUE_MEMBERS = {1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# Per-link field ids (the link is the scope), answered from the recorded NVLinks, and their value types.
_NVLINK_FIELDS = {
    pynvml.NVML_FI_DEV_NVLINK_GET_SPEED: pynvml.NVML_VALUE_TYPE_UNSIGNED_INT,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX: pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
    pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX: pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
}


def _bus_id_key(bus_id: str) -> tuple[int, ...] | None:
    """``0000:18:00.0`` and ``00000000:18:00.0`` name the same device, as NVML reads them."""
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _address(sample: Any) -> int:
    """The address an opaque pointer (a GPM sample) holds, or the address itself."""
    if isinstance(sample, int):
        return sample
    try:
        return address_of(sample)
    except (TypeError, ctypes.ArgumentError):
        return 0


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class FakeNvml(FakeXidEvents, CFake):
    """A ``pynvml`` whose library is this fake. Swap the machine with :meth:`set_machine`."""

    RAW = frozenset(
        {
            "nvmlDeviceGetGpuInstances",
            "nvmlGpuInstanceGetComputeInstances",
            "nvmlDeviceGetPciInfoExt",
            "nvmlDeviceGetSramEccErrorStatus",
            "nvmlGpmMetricsGet",
        }
    )

    def __init__(self, machine: Machine, costs: CallCosts | None = None) -> None:
        self._machine = machine
        super().__init__(__doc__, costs)
        # The latest calls only: a replayed `memory --watch` or exporter runs for days, and a log of
        # every call grew by ~2 KiB a refresh on the 8-GPU example.
        self._calls: deque[str] = deque(maxlen=CALL_LOG)
        self._init_count = 0  # NVML counts nvmlInit calls; each needs its nvmlShutdown
        self._details_impl: Any = None
        self._mig_impl: Any = None  # MIG's layout calls (gpudiag.replay.fake_mig), on the first
        self._event_sets: list[EventSet] = []  # XID event sets (check --level 2-4)
        # GPM sample buffers (nvmlGpmSampleAlloc), by address: the GPU sampled into each (its position)
        # and its profiling reading then, or None while the buffer holds no sample.
        self._gpm_samples: dict[int, tuple[int, Reading[Any]] | None] = {}
        self.replay_time: ReplayTime | None = None  # told of each GPM sample (a replay's clock)
        self._unrecorded_fields: set[int] = set()  # addresses of field slots answered "not recorded"

    def _load(self, path: str) -> Any:
        """``ctypes.CDLL`` for pynvml's loader: this fake, unless the recorded machine has no NVML."""
        if self._machine.nvml.status is NvmlStatus.LIBRARY_NOT_FOUND:
            raise OSError(f"{path}: cannot open shared object file")
        return self.library

    # -- the C boundary --------------------------------------------------------------

    def _lacks(self, symbol: str) -> bool:
        if symbol in self._machine.nvml.functions_missing:
            self._calls.append(symbol)  # asked for, and lacking (the probe's fallbacks count on it)
            return True
        return False

    def _c_fallback(self, symbol: str) -> Callable[..., Any] | None:
        if symbol in ("nvmlDeviceGetDriverModel", "nvmlDeviceGetDriverModel_v2"):
            return lambda *_args: int(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a Windows-only setting
        return None

    def _answerer(self, symbol: str) -> tuple[str, Callable[..., Any] | None]:
        """The method (or the readings' rows) answering the C function ``symbol``."""
        names = [symbol]
        if unversioned(symbol) != symbol:
            names.append(unversioned(symbol))
        for name in names:
            method = getattr(type(self), name, None)
            if method is not None and name.startswith("nvml"):
                return name, method.__get__(self)
            if name in ROW_CALLS:
                return name, self._row_call(name)
        for name in names:
            later = self._later(name)
            if later is not None:
                return name, later
        return symbol, None

    def _c_special(self, symbol: str) -> Callable[..., Any] | None:
        for family, graphics in (("Compute", False), ("Graphics", True), ("MPSCompute", None)):
            for suffix in ("", "_v2", "_v3"):
                if symbol == f"nvmlDeviceGet{family}RunningProcesses{suffix}":
                    return self._c_processes(symbol, graphics, with_instances=bool(suffix))
        if symbol == "nvmlDeviceGetFieldValues":
            return self._c_field_values
        if symbol == "nvmlDeviceGetMemoryInfo_v2":  # the versioned struct says which answer
            return self._c_memory_v2
        return super()._c_special(symbol)

    @property
    def calls(self) -> list[str]:
        """The NVML functions called, in order (the latest CALL_LOG of them), for cost tests."""
        return list(self._calls)

    @property
    def initialised(self) -> bool:
        return self._init_count > 0

    def models(self, name: str) -> bool:
        """Whether the fake answers the NVML call ``name`` (the rest answer as a driver without them)."""
        from gpudiag.replay.fake_details import FakeDetails

        hand = name.startswith("nvml") and callable(getattr(type(self), name, None))
        from gpudiag.replay.fake_mig import FakeMig

        return (
            hand
            or self._c_special(name) is not None
            or name in ROW_CALLS
            or name in detail_rows_by_call()
            or hasattr(FakeDetails, name)
            or hasattr(FakeMig, name)
        )

    def set_machine(self, machine: Machine) -> None:
        """Change what the fake reports (a later sample); handles stay valid, as in NVML."""
        self._machine = machine

    # -- plumbing --------------------------------------------------------------------

    def _mig_calls(self) -> Any:
        if self._mig_impl is None:
            from gpudiag.replay.fake_mig import FakeMig

            self._mig_impl = FakeMig(self._enter, self._gpu, self._full_gpu)
        return self._mig_impl

    def _detail_calls(self) -> Any:
        if self._details_impl is None:
            from gpudiag.replay.fake_details import FakeDetails

            self._details_impl = FakeDetails(self._enter, self._gpu)
        return self._details_impl

    def _later(self, name: str) -> Callable[..., Any] | None:
        """A call only the details or MIG answer: from the details' rows, by fake_details or fake_mig
        (loaded on the first such call, so that a plain `list` replay never imports them)."""
        if name in detail_rows_by_call():
            return functools.partial(self.answer, name)
        from gpudiag.replay.fake_details import FakeDetails
        from gpudiag.replay.fake_mig import FakeMig

        if hasattr(FakeDetails, name):
            return getattr(self._detail_calls(), name)  # type: ignore[no-any-return]
        if hasattr(FakeMig, name):
            return getattr(self._mig_calls(), name)  # type: ignore[no-any-return]
        return None

    def _row_call(self, name: str) -> Callable[..., Any]:
        own: Call | None = None  # the call's rows, indexed on its first use

        def call(handle: FakeHandle, *args: Any) -> Any:
            nonlocal own
            self._enter(name)
            gpu = self._gpu(handle)
            if own is None:
                own = gpu_calls()[name]
            found = own.simple.get(args)
            # The common case, kept short (a replayed watch or exporter asks often): one row, a plain
            # value, a GPU without details, its own handle.
            if found is not None and gpu.details.value is None and handle.mig_slot is None:
                read, encode = found
                value = encode(recorded(read(gpu)))
                return answer_of(name, value) if isinstance(value, dict) else value  # a dict: a struct's
            return self._answer(name, gpu, handle, own, args)

        call.__name__ = call.__qualname__ = name
        return call

    def answer(self, name: str, handle: FakeHandle, *args: Any) -> Any:
        """The answer to ``name(handle, *args)`` from the readings whose rows declare that call (a
        subclass that overrides a call for a test gives the rest to this)."""
        self._enter(name)
        return self._answer(name, self._gpu(handle), handle, gpu_calls().get(name), args)

    def _answer(self, name: str, gpu: Gpu, handle: FakeHandle, own: Call | None, args: tuple[Any, ...]) -> Any:
        found = self._rows(gpu, handle, own, detail_rows_by_call, name, args)
        if found is None:
            fail(_UNKNOWN_ARGUMENT.get(name, pynvml.NVML_ERROR_NOT_SUPPORTED))
        values = [encode(recorded(read(gpu))) for read, encode in zip(found.reads, found.encodes, strict=True)]
        return found.assemble(values)

    def _rows(
        self,
        gpu: Gpu,
        handle: FakeHandle,
        own: Call | None,
        detailed: Callable[[], dict[Any, Call]],
        name: Any,
        args: tuple[Any, ...],
    ) -> Answer | None:
        """The rows with these arguments that answer: the GPU's recorded details' where they have the
        reading (a clock, the energy), else its own; a detail row of a GPU without details answers
        "not recorded"."""
        if own is not None and own.whole_gpu and handle.mig_slot is not None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)  # a GPU-level query: a MIG device's handle does not answer it
        found = own.by_args.get(args) if own is not None else None
        if found is not None and gpu.details.value is None:
            return found  # without reading the details' rows: a plain `list` replay never loads them
        theirs = detailed().get(name)
        return (theirs.by_args.get(args) if theirs is not None else None) or found

    def _enter(self, name: str) -> None:
        self._calls.append(name)
        if name in self._machine.nvml.functions_missing:
            fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if not self.initialised and name not in ("nvmlInit", "nvmlInitWithFlags"):
            fail(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: FakeHandle) -> Gpu:
        gpus = self._machine.gpus
        if handle.__class__ is not FakeHandle or not 0 <= handle.gpu < len(gpus):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = gpus[handle.gpu]
        if gpu.state is not _OK:
            fail(pynvml.NVML_ERROR_GPU_IS_LOST if gpu.state is GpuState.LOST else pynvml.NVML_ERROR_UNKNOWN)
        return gpu

    def _mig(self, handle: FakeHandle) -> MigDevice:
        gpu = self._gpu(handle)
        for mig in gpu.mig_devices:
            if mig.index == handle.mig_slot:
                return mig
        fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # a full GPU's handle, as NVML answers

    def _full_gpu(self, handle: FakeHandle, mig_error: int = pynvml.NVML_ERROR_NOT_SUPPORTED) -> Gpu:
        """A GPU-level query: a MIG device's handle does not answer it."""
        gpu = self._gpu(handle)
        if handle.mig_slot is not None:
            fail(mig_error)
        return gpu

    def _memory(self, handle: FakeHandle) -> Memory:
        owner = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        memory: Memory = recorded(owner.memory)
        return memory

    # -- system ----------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._init("nvmlInit")

    def nvmlInitWithFlags(self, flags: int) -> None:
        self._init("nvmlInitWithFlags" if flags else "nvmlInit")  # pynvml's nvmlInit is the one without flags

    def _init(self, name: str) -> None:
        self._enter(name)
        status = self._machine.nvml.status
        if status is not NvmlStatus.OK:
            fail(_INIT_ERRORS[status])
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(recorded(self._machine.nvml.driver_version))

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(recorded(self._machine.nvml.nvml_version))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(recorded(self._machine.nvml.cuda_driver_version))

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return int(recorded(self._machine.nvml.cuda_driver_version))

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._machine.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._machine.gpus):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
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
        fail(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByPciBusId")
        wanted = _bus_id_key(_text(bus_id))
        if wanted is None:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        for gpu in self._machine.gpus:
            if gpu.pci_bus_id.value is not None and _bus_id_key(gpu.pci_bus_id.value) == wanted:
                return self._open(FakeHandle(gpu.index))
        fail(pynvml.NVML_ERROR_NOT_FOUND)

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
        return str(recorded(source.uuid))

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        self._enter("nvmlDeviceGetName")
        source = self._mig(handle) if handle.mig_slot is not None else self._gpu(handle)
        return str(recorded(source.name))

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> Any:
        self._enter("nvmlDeviceGetPciInfo")
        bus_id = str(recorded(self._gpu(handle).pci_bus_id))
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
        return type(self).nvmlDeviceGetPciInfo(self, handle)

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
                fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
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

    def nvmlDeviceGetPowerManagementLimit(self, handle: FakeHandle) -> int:
        if self._gpu(handle).details.value is not None:  # the requested limit, recorded with the details
            return int(self.answer("nvmlDeviceGetPowerManagementLimit", handle))
        # Without details the model keeps the enforced limit only; it is the management limit unless
        # an out-of-band cap is lower (both 700 W on the captured H100).
        self._enter("nvmlDeviceGetPowerManagementLimit")
        return round(float(recorded(self._full_gpu(handle).power_limit_w)) * 1000)

    # -- MIG devices' own answers (nvitop reads BAR1 of each) ---------------------------

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: FakeHandle) -> Any:
        if handle.mig_slot is None:  # the GPU's own: from its details' row
            return self.answer("nvmlDeviceGetBAR1MemoryInfo", handle)
        self._enter("nvmlDeviceGetBAR1MemoryInfo")
        bar1 = recorded(self._mig(handle).bar1)
        return SimpleNamespace(bar1Total=bar1.total_bytes, bar1Used=bar1.used_bytes, bar1Free=bar1.free_bytes)

    def nvmlDeviceGetAttributes_v2(self, handle: FakeHandle) -> Any:
        """A MIG device's share of its GPU; a whole GPU answers NOT_SUPPORTED (captured on the H100)."""
        self._enter("nvmlDeviceGetAttributes_v2")
        if handle.mig_slot is None:
            self._gpu(handle)
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        a = recorded(self._mig(handle).attributes)
        return SimpleNamespace(
            multiprocessorCount=a.multiprocessors,
            sharedCopyEngineCount=a.copy_engines,
            sharedDecoderCount=a.decoders,
            sharedEncoderCount=a.encoders,
            sharedJpegCount=a.jpeg_decoders,
            sharedOfaCount=a.ofas,
            gpuInstanceSliceCount=a.gpu_instance_slices,
            computeInstanceSliceCount=a.compute_instance_slices,
            memorySizeMB=a.memory_mib,
        )

    def nvmlDeviceGetAttributes(self, handle: FakeHandle) -> Any:
        return type(self).nvmlDeviceGetAttributes_v2(self, handle)

    # -- health ----------------------------------------------------------------------

    def nvmlDeviceGetRetiredPages(self, handle: FakeHandle, cause: int) -> list[int]:
        self._enter("nvmlDeviceGetRetiredPages")
        gpu = self._full_gpu(handle)
        if cause not in (
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # checked before support, as captured
        pages = recorded(gpu.retired_pages)
        single = cause == pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        details = self._detail_calls() if gpu.details.value is not None else None
        addresses = details.detail_retired_addresses(gpu, single) if details is not None else None
        if addresses is not None:
            return list(addresses)
        n = pages.single_bit if single else pages.double_bit
        return [0x1000 * (i + 1) for i in range(n)]  # page addresses; only the count matters

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetRetiredPagesPendingStatus")
        return int(recorded(self._full_gpu(handle).retired_pages).pending)

    def nvmlDeviceValidateInforom(self, handle: FakeHandle) -> None:
        self._enter("nvmlDeviceValidateInforom")
        if not recorded(self._full_gpu(handle).inforom_valid):
            fail(pynvml.NVML_ERROR_CORRUPTED_INFOROM)

    def field_not_recorded(self, slot: Any) -> bool:
        """Whether a field value this fake answered with an error is one the snapshot does not hold
        (NVML's unknown error to gpustat and nvitop; gpudiag's probe asks, to say "not recorded")."""
        return ctypes.addressof(slot) in self._unrecorded_fields

    def _fill_field_values(self, handle: FakeHandle, count: int, values: Any) -> int:
        """The first ``count`` slots of ``values``: each one's id and scope as pynvml set them, its
        status, value type and value answered (set as the C library sets them, not through pynvml's
        struct conversions)."""
        self._unrecorded_fields.clear()  # the slots of the latest call only
        try:
            gpu = self._full_gpu(handle)
        except pynvml.NVMLError as exc:
            return int(exc.value)
        get, put = ctypes.Structure.__getattribute__, ctypes.Structure.__setattr__
        for i in range(count):
            slot = values[i]
            try:
                value, value_type = self._field(gpu, handle, int(get(slot, "fieldId")), int(get(slot, "scopeId")))
            except pynvml.NVMLError as exc:
                put(slot, "nvmlReturn", int(exc.value))
                if isinstance(exc, NotRecordedError):
                    self._unrecorded_fields.add(ctypes.addressof(slot))
                continue
            put(slot, "nvmlReturn", pynvml.NVML_SUCCESS)
            put(slot, "valueType", value_type)
            put(get(slot, "value"), _VALUE_MEMBERS.get(value_type, "uiVal"), value)
        return int(pynvml.NVML_SUCCESS)

    def _field(self, gpu: Gpu, handle: FakeHandle, field_id: int, scope: int) -> tuple[int, int]:
        """One field value and its nvmlValueType_t, from the row that declares the field (or the call)."""
        # A row answers only the scope it declares (readings.field_key): the all-links NVLink data
        # (ALL_LINKS) is not one link's, and a scoped power field (the module's) is its own row.
        key = (field_id, scope) if scope else field_id
        rows = gpu_fields().get(key)
        if rows is None and field_id in FIELDS_OF_CALLS:  # a field no row reads: the call's rows say
            call, value_type, args = FIELDS_OF_CALLS[field_id]
            found = self._rows(gpu, handle, gpu_calls().get(call), detail_rows_by_call, call, args)
        else:
            found = self._rows(gpu, handle, rows, detail_rows_by_field, key, ())
            value_type = found.specs[0].value_type if found is not None else 0
        if found is not None:
            return int(found.encodes[0](recorded(found.reads[0](gpu)))), value_type
        if gpu.details.value is not None and field_id in _NVLINK_FIELDS:
            value_type = _NVLINK_FIELDS[field_id]
            return self._detail_calls().nvlink_field(gpu, field_id, scope), value_type
        return fail(pynvml.NVML_ERROR_NOT_SUPPORTED)

    # -- MIG -------------------------------------------------------------------------

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        """0 on a MIG-capable GPU with MIG off (captured); NOT_SUPPORTED where MIG is not."""
        self._enter("nvmlDeviceGetMaxMigDeviceCount")
        gpu = self._full_gpu(handle)
        if not recorded(gpu.mig_mode_current):
            return 0
        return max([_MAX_MIG_SLOTS] + [m.index + 1 for m in gpu.mig_devices])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex")
        gpu = self._full_gpu(handle, pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if any(m.index == index for m in gpu.mig_devices):
            return FakeHandle(handle.gpu, index)
        fail(pynvml.NVML_ERROR_NOT_FOUND)

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
        return int(recorded(self._mig(handle).gpu_instance_id))

    def nvmlDeviceGetComputeInstanceId(self, handle: FakeHandle) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId")
        return int(recorded(self._mig(handle).compute_instance_id))

    # -- processes -------------------------------------------------------------------

    def _procs(self, handle: FakeHandle, graphics: bool) -> list[GpuProcess]:
        """The processes NVML lists for this handle: a MIG device's handle sees its own only."""
        gpu = self._gpu(handle)
        wanted = (ProcessKind.GRAPHICS if graphics else ProcessKind.COMPUTE, ProcessKind.COMPUTE_GRAPHICS)
        procs = [p for p in recorded(gpu.processes) if p.kind in wanted]
        if handle.mig_slot is not None:
            mig = self._mig(handle)
            gi, ci = mig.gpu_instance_id.value, mig.compute_instance_id.value
            procs = [p for p in procs if p.gpu_instance_id == gi and p.compute_instance_id == ci]
        return procs

    # -- GPM (profiling metrics) ----------------------------------------------------
    # The recorded figures are what the GPU did over a window: nvmlGpmMetricsGet answers the ones the
    # GPU's second sample was taken under (a later sample after set_machine sees the new ones).

    def nvmlGpmQueryDeviceSupport(self, handle: FakeHandle) -> Any:
        self._enter("nvmlGpmQueryDeviceSupport")
        profiling = self._full_gpu(handle).profiling
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        if profiling.reason is Reason.NOT_SUPPORTED:
            support.isSupportedDevice = 0  # an older GPU: NVML answers, and says no
            return support
        if profiling.reason not in (None, Reason.UNAVAILABLE):  # UNAVAILABLE: GPM, but no figures recorded
            recorded(profiling)  # "not recorded" where the snapshot does not say, else the error recorded
        support.isSupportedDevice = 1
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        address = self.new_address()  # a buffer of the driver's; the caller holds its pointer
        self._gpm_samples[address] = None
        return address

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._enter("nvmlGpmSampleFree")
        if self._gpm_samples.pop(_address(sample), False) is False:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlGpmSampleGet(self, handle: FakeHandle, sample: Any) -> Any:
        self._enter("nvmlGpmSampleGet")
        gpu = self._full_gpu(handle)
        address = _address(sample)
        if address not in self._gpm_samples:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._gpm_samples[address] = (handle.gpu, gpu.profiling)
        if self.replay_time is not None:
            self.replay_time.sampled(handle.gpu)
        return sample

    def nvmlGpmMetricsGet(self, ref: Any) -> int:
        """``(nvmlGpmMetricsGet_t *)``: each metric asked gets its status and value."""
        self._enter("nvmlGpmMetricsGet")
        query = ref._obj
        if query.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self._gpm_samples.get(_address(query.sample1))
        second = self._gpm_samples.get(_address(query.sample2))
        if first is None or second is None or first[0] != second[0]:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # not filled, or two GPUs' samples
        profiling = second[1]
        metrics = query.metrics
        # Set as the C library sets them, not through pynvml's struct conversions (the fake's own cost).
        get, put = ctypes.Structure.__getattribute__, ctypes.Structure.__setattr__
        for i in range(min(int(query.numMetrics), len(metrics))):
            slot = metrics[i]
            known = _GPM_FIELDS.get(int(get(slot, "metricId")))
            if known is None:
                put(slot, "nvmlReturn", pynvml.NVML_ERROR_NOT_SUPPORTED)  # a metric the model does not keep
                continue
            name, factor = known
            reading = getattr(profiling.value, name) if profiling.value is not None else profiling
            if reading.value is None:
                put(slot, "nvmlReturn", REASON_ERRORS[reading.reason or Reason.UNKNOWN_ERROR])
            else:
                put(slot, "nvmlReturn", pynvml.NVML_SUCCESS)
                put(slot, "value", float(reading.value) / factor)  # back to GPM's unit (percent, MiB/s)
        return int(pynvml.NVML_SUCCESS)

    # -- events (XIDs) ---------------------------------------------------------------

    # -- C functions answered at the boundary itself ---------------------------------

    def _c_processes(self, symbol: str, graphics: bool | None, with_instances: bool) -> Callable[..., int]:
        """``(device, unsigned *count, nvmlProcessInfo_t *infos)``, the sizing protocol included."""

        def c_function(device: Any, count_ref: Any, array: Any) -> int:
            handle = self.handle(device)
            try:
                if array is None:
                    self._enter(symbol)  # one query: its sizing call
                elif symbol in self._machine.nvml.functions_missing:
                    fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
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

    def _c_memory_v2(self, device: Any, ref: Any) -> int:
        """``(device, nvmlMemory_v2_t *)``: the struct's version is the one asked for."""
        handle = self.handle(device)
        try:
            if ref._obj.version != pynvml.nvmlMemory_v2:
                fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            answer = type(self).nvmlDeviceGetMemoryInfo(self, handle, int(ref._obj.version))
        except pynvml.NVMLError as exc:
            if getattr(exc, "gpudiag_reason", None) is not None:
                raise
            return int(exc.value)
        return self._shaper.store(ref._obj, answer)

    def _c_field_values(self, device: Any, count: Any, ref: Any) -> int:
        """``(device, int count, nvmlFieldValue_t *values)``: each slot's id and scope asked, its value,
        type and status answered."""
        handle = self.handle(device)
        try:
            self._enter("nvmlDeviceGetFieldValues")
        except pynvml.NVMLError as exc:
            return int(exc.value)
        n = int(count.value if isinstance(count, ctypes._SimpleCData) else count)
        return self._fill_field_values(handle, n, ref._obj)


def _fill_process(info: Any, proc: GpuProcess) -> None:
    put = ctypes.Structure.__setattr__  # as the C library writes the struct, past pynvml's conversions
    put(info, "pid", proc.pid)
    put(info, "usedGpuMemory", proc.used_memory_bytes.get(_NOT_AVAILABLE))
    put(info, "gpuInstanceId", NO_INSTANCE if proc.gpu_instance_id is None else proc.gpu_instance_id)
    put(info, "computeInstanceId", NO_INSTANCE if proc.compute_instance_id is None else proc.compute_instance_id)
