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
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec.structs import replace

from gpudiag.model import (
    ALL_GROUPS,
    Bar1,
    FactGroup,
    Gpu,
    GpuState,
    Memory,
    MigAttributes,
    MigDevice,
    NvmlInfo,
    NvmlStatus,
    Reading,
    Reason,
    RetiredPages,
    failed_gpu,
)
from gpudiag.probe.nvml_errors import GpuLostError, decoded, init_status, undecodable, unusable
from gpudiag.probe.nvml_processes import HostResolver, ProcessReading, no_process_stats
from gpudiag.probe.read_plan import NOT_READ, blank_for, not_read_fields, rows_of
from gpudiag.readings import (
    Spec,
    field_key,
    integer,
    pick,
    text,
    truth,
)

if TYPE_CHECKING:
    from gpudiag.probe.xid_watch import XidWatch

T = TypeVar("T")


def _decode_part(decode: Callable[[Any], Any], part: int | str, raw: Any) -> Any:
    return decode(pick(raw, part))


# How read_specs reads a row: the only row of its call; the same, asked once per session; one of the
# rows of a call; a field value; a composite reading.
_ALONE, _FIXED, _SHARED, _FIELD, _CUSTOM = range(5)

# nvmlFieldValue_t's value member by its valueType (nvmlValueType_t).
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class _Handles(msgspec.Struct):
    gpu: Any  # NVML handle, or None when it could not be obtained
    state: GpuState
    state_detail: str
    mig: list[tuple[int, Any]]
    mig_enabled: bool = False  # MIG mode on at discovery (it changes only with a GPU reset: new handles)
    # Readings that cannot change while the driver stays loaded (rows with ``fixed``: name, bus id,
    # thresholds, the PCIe maxima), by key, kept once read: handles, and so these, are fetched afresh on
    # every reopen, which a long-running reader does when NVML restarts under it. Only answers are
    # kept, never errors.
    fixed: dict[str, Reading[Any]] = msgspec.field(default_factory=dict)
    # The session's slow rows (NvmlSession.slow_keys) as last read, with when, by key.
    slow: dict[str, tuple[float, Reading[Any]]] = msgspec.field(default_factory=dict)
    gpm: Any = None  # probe.gpm.GpuSamples: the GPU's GPM samples, made on its first profiling read


class NvmlSession(ProcessReading):
    """An initialised NVML with cached device handles, for one or many reads.

    Watch loops keep one session: handles are fetched once, not on every refresh.
    """

    def __init__(self, lib: Any, host: HostResolver) -> None:
        self._lib = lib
        self._host = host
        self._handles: list[_Handles] = []
        self._plans: dict[tuple[Any, ...], Any] = {}  # how to read each tuple of rows (see _plan)
        self._process_api: str = ""
        self._kept_processes: dict[int, dict[tuple[Any, ...], Any]] = {}  # see ProcessReading._processes
        self._missing: list[str] = []
        self.info: NvmlInfo
        self.opened = False
        # For details: host view of GPU processes, and the CPU count behind NVML's affinity masks.
        self.process_stats: Any = no_process_stats
        self.cpu_count = os.cpu_count() or 1
        self._details: Any = None
        # Replays: GPUs whose snapshot holds no details answer with this instead of being read.
        self.unrecorded_details: dict[int, Reading[Any]] = {}
        # GPM (FactGroup.PROFILING, probe.gpm): the window and whether a read without an earlier sample
        # waits for it (one-shot readers do; the exporter measures since its previous scrape instead).
        # None: probe.gpm's one-shot window, and the time module's clock and sleep.
        self.gpm_window_s: float | None = None
        self.gpm_wait = True
        self.gpm_clock: Callable[[], float] | None = None
        self.gpm_sleep: Callable[[float], None] | None = None
        self._gpm: Any = None
        # Rows that change seldom and cost a driver round trip each (the exporter's: ECC and MIG modes,
        # retired pages, remapped rows, vGPU licence), read at most once per ``slow_every_s`` on the
        # ``slow_clock``; none by default: a one-shot read asks everything it shows.
        self.slow_keys: frozenset[str] = frozenset()
        self.slow_every_s = 0.0
        # Rows a long-running reader asks once per session besides those declared ``fixed`` (the
        # exporter's UUID: its many other calls per read find a GPU lost since the last).
        self.fixed_keys: frozenset[str] = frozenset()
        # Rows a reader asks as a field value (row key, field id) in the read's one
        # nvmlDeviceGetFieldValues call instead of their own call: the exporter's ECC totals.
        self.as_fields: tuple[tuple[str, int], ...] = ()
        self.slow_clock: Callable[[], float] = time.monotonic

    # -- lifecycle -------------------------------------------------------------------

    def open(self, kernel_module_version: Reading[str]) -> NvmlInfo:
        lib = self._lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            status, detail = init_status(lib, exc)
            self.info = unusable(status, detail, kernel_module_version)
            return self.info
        self.opened = True
        try:
            self._discover()
        except NvmlDiscoveryError as exc:
            detail = f"NVML initialised but cannot count the GPUs: {exc}"
            self.info = unusable(NvmlStatus.ERROR, detail, kernel_module_version)
            return self.info
        self.info = self._system_info(kernel_module_version)
        return self.info

    def close(self) -> None:
        if self._gpm is not None:  # GPM's buffers go back before NVML shuts down
            for handles in self._handles:
                if handles.gpm is not None:
                    self._gpm.free(handles.gpm)
                    handles.gpm = None
            self._gpm = None
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
        except Exception:  # NVML's error, or an answer that is not a count: open again
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

    def forget_slow(self) -> None:
        """Read the slow rows afresh on the next read (an Xid may come with a retired page or a remap)."""
        for handles in self._handles:
            handles.slow.clear()

    def watch_xids(self) -> XidWatch:
        """Start collecting the critical XID events of every usable GPU (``check --level 2-4``)."""
        from gpudiag.probe.xid_watch import XidWatch  # only `check --level 2-4` watches them

        return XidWatch(self._lib, [(i, h.gpu) for i, h in enumerate(self._handles) if h.gpu is not None])

    # -- helpers ---------------------------------------------------------------------

    def _reason(self, exc: Exception, function: str, missing_function: bool = True) -> tuple[Reason, str]:
        """Why ``function`` gave no answer; a call the driver lacks is noted (``missing_function``)."""
        lib = self._lib
        recorded = getattr(exc, "gpudiag_reason", None)  # a replay: what its snapshot says (or lacks)
        if recorded is not None:
            return Reason(recorded), getattr(exc, "gpudiag_detail", "")
        if isinstance(exc, lib.NVMLError_NotSupported):
            return Reason.NOT_SUPPORTED, ""
        if isinstance(exc, lib.NVMLError_NoPermission):
            return Reason.NO_PERMISSION, f"{function}: insufficient permissions"
        if isinstance(exc, lib.NVMLError_GpuIsLost):
            return Reason.GPU_LOST, "GPU is lost"
        if isinstance(exc, lib.NVMLError_FunctionNotFound):
            if missing_function and function not in self._missing:
                self._missing.append(function)
            return Reason.FUNCTION_NOT_FOUND, f"{function} is not in this driver"
        if isinstance(exc, lib.NVMLError_NotFound):
            return Reason.NOT_FOUND, ""
        if getattr(exc, "value", None) == getattr(lib, "NVML_ERROR_NOT_READY", None):  # e.g. no InfoROM BBX flush yet
            return Reason.UNAVAILABLE, f"{function}: not ready"
        return Reason.UNKNOWN_ERROR, f"{function}: {exc}"

    @property
    def lib(self) -> Any:
        """The pynvml module (or the fake) this session calls."""
        return self._lib

    def read(self, function: str, *args: Any, convert: Callable[[Any], T] | None = None) -> Reading[T]:
        """:meth:`_read`, for the details probe."""
        return self._read(function, *args, convert=convert)

    def missing_for(self, code: int, what: str) -> Reading[Any]:
        """The reading an NVML status code of one item of an answer (a field value, a GPM metric) stands for."""
        lib = self._lib
        try:
            raise lib.NVMLError(code)
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, what, missing_function=False)
        return Reading.missing(reason, detail)

    def decoded(self, function: str, raw: Any, convert: Callable[[Any], T] | None = None) -> Reading[T]:
        """:func:`decoded`: an answer already in hand (an item of a call's answer) decoded under the guard."""
        return decoded(function, raw, convert)

    def _read(self, function: str, *args: Any, convert: Callable[[Any], T] | None = None) -> Reading[T]:
        """The one guarded entry to NVML: call ``function`` and decode its answer with ``convert``.
        NVML's errors become a reason (a lost GPU ends the GPU's read); a binding that lacks the
        call, an exception of the binding itself (pynvml's UnicodeDecodeError on a string that is
        not UTF-8) and an answer ``convert`` does not expect become this reading's error."""
        lib = self._lib
        call = getattr(lib, function, None)
        if call is None:
            return Reading.missing(Reason.FUNCTION_NOT_FOUND, f"{function} is not in this nvidia-ml-py")
        try:
            raw = call(*args)
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, function)
            if reason is Reason.GPU_LOST:
                raise GpuLostError(f"{function}: GPU is lost") from None
            return Reading.missing(reason, detail)
        except Exception as exc:  # the binding's own failure: this reading alone is lost
            return undecodable(function, exc)
        return decoded(function, raw, convert)

    # -- discovery -------------------------------------------------------------------

    def _discover(self) -> None:
        lib = self._lib
        try:
            count = int(lib.nvmlDeviceGetCount())
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, "nvmlDeviceGetCount")
            raise NvmlDiscoveryError(detail or reason.label) from None
        except Exception as exc:  # an answer that is not a count
            raise NvmlDiscoveryError(undecodable("nvmlDeviceGetCount", exc).detail) from None
        self._handles = []
        self._kept_processes.clear()  # keyed by the handles of the session that ends
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
            except Exception as exc:  # the binding's own failure: this GPU cannot be opened, the rest can
                message = f"cannot open GPU {index}: {undecodable('nvmlDeviceGetHandleByIndex', exc).detail}"
                self._handles.append(_Handles(None, GpuState.ERROR, message, []))
                continue
            enabled, mig = self._mig_handles(handle)
            self._handles.append(_Handles(handle, GpuState.OK, "", mig, enabled))

    def _mig_handles(self, handle: Any) -> tuple[bool, list[tuple[int, Any]]]:
        lib = self._lib
        try:
            current, _pending = lib.nvmlDeviceGetMigMode(handle)
            if current != lib.NVML_DEVICE_MIG_ENABLE:
                return False, []
            slots = int(lib.nvmlDeviceGetMaxMigDeviceCount(handle))
        except Exception:  # NVML's error or an unexpected answer: the mode reading says which
            return False, []  # not a MIG-capable GPU; the mode reading says why later
        found = []
        for slot in range(slots):
            try:
                found.append((slot, lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
            except lib.NVMLError:
                continue  # an empty slot answers NOT_FOUND
            except Exception:  # a binding's failure: the slot is not seen, the rest are
                continue
        return True, found

    def _system_info(self, kernel_module_version: Reading[str]) -> NvmlInfo:
        driver = self._read("nvmlSystemGetDriverVersion", convert=text)
        nvml_version = self._read("nvmlSystemGetNVMLVersion", convert=text)
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

    def read_gpus(
        self, facts: frozenset[FactGroup] = ALL_GROUPS, only: frozenset[str] | None = None
    ) -> tuple[Gpu, ...]:
        """Read the ``facts`` of every GPU (the rest stay NOT_READ); of their rows only the keys in
        ``only`` when given (identity is always read). Safe to call repeatedly; handles are reused."""
        gpus = []
        for index, handles in enumerate(self._handles):
            if handles.gpu is None:
                gpus.append(failed_gpu(index, handles.state, handles.state_detail))
                continue
            try:
                gpus.append(self._read_gpu(index, handles, facts, only))
            except GpuLostError as lost:
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
        from gpudiag.details import PEERS_READ_UP_TO
        from gpudiag.probe.details import DetailsProbe, with_nvlink_counts

        if self._details is None:
            self._details = DetailsProbe(self, self.process_stats, self.cpu_count)
        opened = [(i, hs.gpu) for i, hs in enumerate(self._handles) if hs.gpu is not None]
        read_peers = len(opened) <= PEERS_READ_UP_TO  # beyond, N² calls: `gpudiag topo`'s to make
        found: list[Any] = []
        for index, gpu in enumerate(gpus):
            handle = self._handles[index].gpu
            if handle is None or gpu.state is not GpuState.OK or index in self.unrecorded_details:
                found.append(None)
                continue
            peers = [(other, oh) for other, oh in opened if other != index] if read_peers else []
            try:
                found.append(self._details.read(index, handle, peers, links))
            except GpuLostError as lost:
                found.append(None)
                gpus[index] = failed_gpu(index, GpuState.LOST, f"GPU is lost ({lost.detail})")
        found = with_nvlink_counts(found, [g.pci_bus_id.value for g in gpus])
        out = [g if d is None else replace(g, details=Reading.of(d)) for g, d in zip(gpus, found, strict=True)]
        for i, g in enumerate(out):
            if g.state is GpuState.OK and g.mig_devices:
                try:
                    out[i] = self._mig_details(g, self._handles[i])
                except GpuLostError as lost:
                    out[i] = failed_gpu(i, GpuState.LOST, f"GPU is lost ({lost.detail})")
        return [
            replace(g, details=self.unrecorded_details[i])
            if i in self.unrecorded_details and g.state is GpuState.OK
            else g
            for i, g in enumerate(out)
        ]

    def _read_gpu(
        self, index: int, handles: _Handles, facts: frozenset[FactGroup], only: frozenset[str] | None = None
    ) -> Gpu:
        h = handles.gpu
        rows, build = rows_of(facts, only)
        read = self.read_specs(handles, h, rows, functools.partial(_custom_reading, self, h, handles))
        fields = {**not_read_fields(), **build(read)}
        return Gpu(index=index, state=GpuState.OK, state_detail="", **fields)

    def read_specs(
        self,
        handles: _Handles | None,
        h: Any,
        specs: tuple[Spec, ...],
        custom: Callable[[str], dict[str, Any]],
    ) -> dict[str, Any]:
        """The readings of ``specs`` (gpudiag.readings rows) by key. A call several rows read is made
        once; the rows' field values are read together, in one nvmlDeviceGetFieldValues call where
        the first of them is; a composite row is read by ``custom(key)``, which may fill several keys."""
        ids, steps = self._plan(specs)
        fields: dict[Any, Reading[Any]] | None = None
        answers: dict[tuple[Any, ...], Reading[Any]] = {}
        out: dict[str, Any] = {}
        slow = self.slow_keys if handles is not None else frozenset()
        now = self.slow_clock() if slow else 0.0
        for key, kind, call, args, decode, spec in steps:
            if key in slow:
                kept = handles.slow.get(key)  # type: ignore[union-attr]
                if kept is not None and now - kept[0] < self.slow_every_s:
                    out[key] = kept[1]
                    continue
            if kind is _FIXED and handles is not None:
                found = handles.fixed.get(key)
                if found is not None:
                    out[key] = found
                    continue
            if kind is _CUSTOM:
                if key not in out:
                    out.update(self._composite(key, spec, custom))
                continue
            if kind is _FIELD or kind is _SHARED:
                if kind is _FIELD:
                    if fields is None:  # where the first field's row is: the NVML calls keep the rows' order
                        fields = self.field_values(h, ids)
                    raw = fields[args]
                else:
                    asked = (call, *args)
                    raw = answers.get(asked)  # type: ignore[assignment]
                    if raw is None:
                        raw = answers[asked] = self._ask(h, spec, args)
                if raw.value is None or (decode is integer and raw.value.__class__ is int):
                    found = raw  # integer() would give that very value: no second Reading
                else:
                    found = decoded(call, raw.value, decode)
            else:  # the only row of its call: decoded as it is read (one Reading, not two)
                found = self._ask(h, spec, args, decode)
            if kind is _FIXED and handles is not None and found.value is not None:
                handles.fixed[key] = found  # only answers are kept, never errors
            out[key] = found
        for key in slow.intersection(out):
            kept = handles.slow.get(key)  # type: ignore[union-attr]
            if kept is None or kept[1] is not out[key]:
                handles.slow[key] = (now, out[key])  # type: ignore[union-attr]
        for spec in specs:  # a composite that failed leaves the keys it would have filled: they say why
            if spec.key not in out:
                out[spec.key] = blank_for(spec.key, out.get(_failed_composite))
        out.pop(_failed_composite, None)
        return out

    def _composite(self, key: str, spec: Spec, custom: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """A composite row's readings (``custom(key)``), under the guard: a reader that fails on an
        answer it did not expect loses its own readings, never the GPU's or the command's."""
        try:
            return custom(key)
        except GpuLostError:
            raise
        except Exception as exc:  # this composite alone is lost, with why
            error = undecodable(spec.call or key, exc)
            return {key: blank_for(key, error), _failed_composite: error}

    # -- a command's own rows (dmon, pmon, stat, topo, nvlink) --------------------------

    def gpu_handles(self) -> list[tuple[int, Any]]:
        """(position, NVML handle) of every GPU whose handle opened: fetched once per session, so a
        monitor reads through them interval after interval."""
        return [(position, h.gpu) for position, h in enumerate(self._handles) if h.gpu is not None]

    def read_rows(
        self,
        position: int,
        rows: tuple[Spec, ...],
        composite: Mapping[str, Callable[[int, Any], Reading[Any]]] | None = None,
    ) -> dict[str, Reading[Any]] | None:
        """The readings of ``rows`` (gpudiag.readings rows, a tuple kept for the program's life: its
        plan is made once) of the GPU at ``position``, and nothing else: a monitor reads per interval
        only what its columns show. A composite row is read by ``composite[key](position, handle)``,
        or as every read does (processes, memory, ...). None when the GPU is lost (now, or at discovery)."""
        handles = self._handles[position]
        h = handles.gpu
        if h is None:
            return None
        extra = composite or {}

        def custom(key: str) -> dict[str, Any]:
            if key in extra:
                return {key: extra[key](position, h)}
            return _custom_reading(self, h, handles, key)

        try:
            return self.read_specs(handles, h, rows, custom)
        except GpuLostError:
            return None

    def _plan(self, specs: tuple[Spec, ...]) -> tuple[list[Any], list[tuple[Any, ...]]]:
        """How to read ``specs``: their field ids (see readings.field_key), and each row's key, kind (see
        _ALONE), call and arguments (NVML's constants looked up), decoder, and the row. Made once per
        tuple of rows, which live as long as the program."""
        which = (id(specs), self.fixed_keys, self.as_fields)
        plan = self._plans.get(which)
        if plan is None:
            as_fields = dict(self.as_fields)
            calls = [(s.call, s.args) for s in specs if not s.field and not s.custom and s.key not in as_fields]
            steps = []
            for spec in specs:
                call = spec.call
                args: Any = tuple(getattr(self._lib, a) if isinstance(a, str) else a for a in spec.args)
                decode = spec.codec.decode
                if spec.pick is not None:
                    decode = functools.partial(_decode_part, decode, spec.pick)
                if spec.custom:
                    kind = _CUSTOM
                elif spec.field or spec.key in as_fields:
                    kind, args = _FIELD, field_key(spec) if spec.field else as_fields[spec.key]
                    call = f"field {args}"
                elif calls.count((spec.call, spec.args)) > 1:
                    kind = _SHARED
                else:
                    kind = _FIXED if spec.fixed or spec.key in self.fixed_keys else _ALONE
                steps.append((spec.key, kind, call, args, decode, spec))
            plan = self._plans[which] = ([step[3] for step in steps if step[1] is _FIELD], steps)
        return plan

    def _ask(
        self, h: Any, spec: Spec, args: tuple[Any, ...], decode: Callable[[Any], Any] | None = None
    ) -> Reading[Any]:
        """NVML's answer to a row's call (its older name when the driver lacks it), raw or ``decode``d
        (its error then named after the row's call, whichever name answered)."""
        answer = self._row_read(spec.call, spec, h, args, decode)
        if answer.reason is Reason.FUNCTION_NOT_FOUND and spec.fallback:
            answer = self._row_read(spec.fallback, spec, h, args)
            return answer if answer.value is None or decode is None else decoded(spec.call, answer.value, decode)
        return answer

    def _row_read(
        self, call: str, spec: Spec, h: Any, args: tuple[Any, ...], decode: Callable[[Any], Any] | None = None
    ) -> Reading[Any]:
        """A row's call: its answer, or the struct it filled by reference (``Spec.struct``), raw or
        ``decode``d."""
        if not hasattr(self._lib, call) or (spec.struct and not hasattr(self._lib, spec.struct)):
            return _not_in_bindings(spec)
        if not spec.struct:
            return self._read(call, h, *args, convert=decode)
        try:
            struct = getattr(self._lib, spec.struct)()
            by_reference = ctypes.byref(struct)
        except Exception as exc:  # a binding whose struct cannot be made
            return undecodable(call, exc)
        code: Reading[Any] = self._read(call, h, *args, by_reference)
        if code.value is None:
            return code
        if isinstance(code.value, int) and code.value != self._lib.NVML_SUCCESS:
            # nvidia-ml-py's nvmlDeviceGetCapabilities returns NVML's code where its other wrappers raise it
            try:
                raise self._lib.NVMLError(code.value)
            except self._lib.NVMLError as exc:
                reason, detail = self._reason(exc, call)
            if reason is Reason.GPU_LOST:
                raise GpuLostError(f"{call}: GPU is lost")
            return Reading.missing(reason, detail)
        return decoded(call, struct, decode)

    def field_values(self, h: Any, ids: list[Any]) -> dict[Any, Reading[Any]]:
        """Field values (an id, or an (id, scope) pair) in one call, each with its own status."""
        # Each id as an (id, scope) pair: nvidia-ml-py takes a plain id by catching a TypeError.
        asked = [(fid, 0) if isinstance(fid, int) else fid for fid in ids]
        raw: Reading[Any] = self._read("nvmlDeviceGetFieldValues", h, asked)
        if raw.value is None:
            return {fid: Reading.missing_like(raw) for fid in ids}
        answers = decoded("nvmlDeviceGetFieldValues", raw.value, list)
        if answers.value is None or len(answers.value) != len(ids):
            wrong = (
                answers
                if answers.value is None
                else Reading.missing(
                    Reason.UNKNOWN_ERROR,
                    f"nvmlDeviceGetFieldValues: unexpected answer ({len(answers.value)} values for {len(ids)} fields)",
                )
            )
            return {fid: Reading.missing_like(wrong) for fid in ids}
        struct = getattr(self._lib, "c_nvmlFieldValue_t", None)
        return {fid: self._field_value(fid, value, struct) for fid, value in zip(ids, answers.value, strict=True)}

    def _field_value(self, fid: Any, value: Any, struct: Any = None) -> Reading[Any]:
        """One nvmlFieldValue_t: its value by its type, or why it has none (under the guard: a
        value that is not a field value is this field's error). nvidia-ml-py's own struct (``struct``)
        is read through its fields, past its __getattribute__ (a bytes check on every attribute)."""
        lib = self._lib
        try:
            plain = struct is not None and type(value) is struct
            code = struct.nvmlReturn.__get__(value, struct) if plain else int(value.nvmlReturn)
            if code == lib.NVML_SUCCESS:
                kind = struct.valueType.__get__(value, struct) if plain else int(getattr(value, "valueType", 1))
                union = struct.value.__get__(value, struct) if plain else value.value
                found = getattr(union, _VALUE_MEMBERS.get(kind, "uiVal"))
        except Exception as exc:  # whatever the answer, this field alone is lost
            return undecodable(f"field {fid}", exc)
        if code == lib.NVML_SUCCESS:
            return Reading(value=found) if found is not None else decoded(f"field {fid}", found)
        if getattr(lib, "field_not_recorded", None) is not None and lib.field_not_recorded(value):
            return Reading.missing(Reason.NOT_RECORDED)  # a replay's snapshot lacks it
        return self.missing_for(code, f"field {fid}")

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
                raise GpuLostError("nvmlDeviceGetMemoryInfo: GPU is lost") from None
            return Reading.missing(reason, detail)
        except Exception as exc:  # the binding's own failure
            return undecodable("nvmlDeviceGetMemoryInfo", exc)
        return decoded(
            "nvmlDeviceGetMemoryInfo",
            m,
            lambda m: Memory(int(m.total), int(m.used), int(m.free), Reading.of(int(m.reserved))),
        )

    def _retired_pages(self, h: Any) -> Reading[RetiredPages]:
        lib = self._lib
        sbe = self._read(
            "nvmlDeviceGetRetiredPages",
            h,
            lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            convert=_page_count,
        )
        if sbe.value is None:
            return Reading.missing_like(sbe)
        dbe = self._read(
            "nvmlDeviceGetRetiredPages", h, lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, convert=_page_count
        )
        pending = self._read("nvmlDeviceGetRetiredPagesPendingStatus", h, convert=truth)
        if dbe.value is None or pending.value is None:
            bad = dbe if dbe.value is None else pending
            return Reading.missing_like(bad)
        return Reading.of(RetiredPages(single_bit=sbe.value, double_bit=dbe.value, pending=pending.value))

    def _profiling(self, h: Any, handles: _Handles) -> Reading[Any]:
        """The GPU's GPM figures (probe.gpm), over the window since a sample kept from an earlier read."""
        from gpudiag.probe import gpm

        if self._gpm is None:
            self._gpm = gpm.GpmReader(
                self,
                gpm.ONE_SHOT_WINDOW_S if self.gpm_window_s is None else self.gpm_window_s,
                self.gpm_wait,
                self.gpm_clock,
                self.gpm_sleep,
            )
        if handles.gpm is None:
            handles.gpm = gpm.GpuSamples()
        return self._gpm.read(handles.gpm, h, self._gpm_samples)  # type: ignore[no-any-return]

    def _gpm_samples(self) -> list[tuple[Any, Any]]:
        """Every usable GPU's GPM state and handle (a one-shot read samples them all before its one wait)."""
        from gpudiag.probe.gpm import GpuSamples

        out = []
        for handles in self._handles:
            if handles.gpu is not None and handles.state is GpuState.OK:
                if handles.gpm is None:
                    handles.gpm = GpuSamples()
                out.append((handles.gpm, handles.gpu))
        return out

    def _inforom(self, h: Any) -> Reading[bool]:
        lib = self._lib
        try:
            lib.nvmlDeviceValidateInforom(h)
        except lib.NVMLError_CorruptedInforom:
            return Reading.of(False)
        except lib.NVMLError as exc:
            reason, detail = self._reason(exc, "nvmlDeviceValidateInforom")
            if reason is Reason.GPU_LOST:
                raise GpuLostError("nvmlDeviceValidateInforom: GPU is lost") from None
            return Reading.missing(reason, detail)
        except Exception as exc:  # the binding's own failure
            return undecodable("nvmlDeviceValidateInforom", exc)
        return Reading.of(True)

    def _mig_device(self, slot: int, mh: Any) -> MigDevice:
        return MigDevice(
            index=slot,
            uuid=self._read("nvmlDeviceGetUUID", mh, convert=text),
            gpu_instance_id=self._read("nvmlDeviceGetGpuInstanceId", mh, convert=int),
            compute_instance_id=self._read("nvmlDeviceGetComputeInstanceId", mh, convert=int),
            name=self._read("nvmlDeviceGetName", mh, convert=text),
            memory=self._read(
                "nvmlDeviceGetMemoryInfo", mh, convert=lambda m: Memory(int(m.total), int(m.used), int(m.free))
            ),
            bar1=NOT_READ,  # read with the details (_mig_details)
            attributes=NOT_READ,
        )

    def _mig_details(self, gpu: Gpu, handles: _Handles) -> Gpu:
        """The MIG devices' BAR1 and attributes, read with the details (`-q`'s MIG Devices section)."""
        by_slot = dict(handles.mig)
        migs = tuple(
            replace(
                mig,
                bar1=self._read(
                    "nvmlDeviceGetBAR1MemoryInfo",
                    by_slot[mig.index],
                    convert=lambda b: Bar1(int(b.bar1Total), int(b.bar1Used), int(b.bar1Free)),
                ),
                attributes=self._read("nvmlDeviceGetAttributes_v2", by_slot[mig.index], convert=_mig_attributes),
            )
            for mig in gpu.mig_devices
            if mig.index in by_slot
        )
        return replace(gpu, mig_devices=migs) if migs else gpu


class NvmlDiscoveryError(Exception):
    """NVML initialised but could not count the GPUs."""


def _page_count(pages: Any) -> int:
    """How many addresses nvmlDeviceGetRetiredPages gave (each one a number)."""
    return len([integer(page) for page in pages])


def _mig_attributes(a: Any) -> MigAttributes:
    return MigAttributes(
        multiprocessors=int(a.multiprocessorCount),
        copy_engines=int(a.sharedCopyEngineCount),
        decoders=int(a.sharedDecoderCount),
        encoders=int(a.sharedEncoderCount),
        jpeg_decoders=int(a.sharedJpegCount),
        ofas=int(a.sharedOfaCount),
        gpu_instance_slices=int(a.gpuInstanceSliceCount),
        compute_instance_slices=int(a.computeInstanceSliceCount),
        memory_mib=int(a.memorySizeMB),
    )


def _not_in_bindings(spec: Spec) -> Reading[Any]:
    return Reading.missing(Reason.FUNCTION_NOT_FOUND, f"{spec.call} is not in this nvidia-ml-py")


# read_specs' note of why a composite failed, under a key no row has.
_failed_composite = "\0failed"


def _mig_layout(key: str, session: NvmlSession, h: Any, handles: _Handles) -> Reading[Any]:
    """MIG's profiles or instances (probe.mig); a GPU whose MIG mode is off has none, at no call."""
    if not handles.mig_enabled:
        return Reading.missing(Reason.NOT_SUPPORTED, "MIG is not enabled on this GPU")
    from gpudiag.probe import mig

    return mig.profiles(session, h) if key == "mig_profiles" else mig.instances(session, h)


# The composite per-GPU readings (rows with custom=True in gpudiag.readings), each read by hand.
_CUSTOM_READERS: dict[str, Callable[[NvmlSession, Any, _Handles], Any]] = {
    "memory": lambda session, h, _handles: session._memory(h),
    "retired_pages": lambda session, h, _handles: session._retired_pages(h),
    "inforom_valid": lambda session, h, _handles: session._inforom(h),
    "mig_devices": lambda session, _h, handles: tuple(session._mig_device(slot, mh) for slot, mh in handles.mig),
    "processes": lambda session, h, _handles: session._processes(h),
    "profiling": lambda session, h, handles: session._profiling(h, handles),
    "mig_profiles": functools.partial(_mig_layout, "mig_profiles"),
    "mig_instances": functools.partial(_mig_layout, "mig_instances"),
}


def _custom_reading(session: NvmlSession, h: Any, handles: _Handles, key: str) -> dict[str, Any]:
    return {key: _CUSTOM_READERS[key](session, h, handles)}
