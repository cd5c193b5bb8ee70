"""NVML's C boundary, for a fake library under the real pynvml.

:func:`bind` gives pynvml's own functions (the same code objects, unmodified)
a private copy of the module's loader state, so that a replay's fake library is what *they* load,
while the ``pynvml`` module itself and every other replay in the process keep theirs; :func:`installed`
puts a fake library into the real module for a whole program (``python -m gpudiag.replay``) and puts the
real loader state back after. :class:`Shaper` is the one layer that turns an answer (a recorded value,
encoded as NVML answers it) into what the C function writes through the pointers pynvml passes it:
numbers, strings as the driver's bytes (so pynvml decodes them, and raises on invalid UTF-8, as with a
real driver), pynvml's structs and arrays, opaque handles, and the two-call "insufficient size" protocol
of the list queries. :class:`CFake` is such a pynvml whose library is itself: it decodes each C
call's arguments (handles back to :class:`FakeHandle`) and has a subclass say what the call answers;
the replay's fake (:mod:`.fake_nvml`) and the capture replayer (tests/hardware/capture.py) are two.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CellType, FunctionType, ModuleType, SimpleNamespace
from typing import Any

import msgspec
import pynvml

from gpudiag.replay import call_costs
from gpudiag.replay.fake_answers import FakeHandle

_PYNVML: dict[str, Any] = vars(pynvml)
SUCCESS = int(pynvml.NVML_SUCCESS)
INSUFFICIENT_SIZE = int(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
CArg = type(ctypes.byref(ctypes.c_int()))  # what ctypes.byref returns
_SIMPLE: Any = ctypes.c_int.__mro__[1]  # ctypes' _SimpleCData
_POINTER: Any = ctypes.POINTER(ctypes.c_int).__mro__[1]  # ctypes' _Pointer
DEVICE_T = pynvml.c_nvmlDevice_t
# The list queries whose sizing call answers "insufficient size" even for an empty list: nvidia-ml-py's
# wrapper knows no other answer (it raises on success), and returns the empty list from the second call.
SIZED_EVEN_EMPTY = frozenset({"nvmlDeviceGetProcessUtilization"})


# -- pynvml's functions on a loader state of their own ---------------------------------------------


def _ours(value: Any) -> bool:
    return isinstance(value, FunctionType) and value.__globals__ is _PYNVML


@functools.cache
def _functions() -> tuple[tuple[str, FunctionType, bool], ...]:
    """pynvml's functions, each with whether it needs more than its code bound anew (a decorator's
    wrapper holds the function it wraps; wraps() leaves attributes; a keyword default)."""
    return tuple((n, v, bool(v.__closure__ or v.__dict__ or v.__kwdefaults__)) for n, v in _PYNVML.items() if _ours(v))


def _rebind(function: FunctionType, namespace: dict[str, Any]) -> FunctionType:
    closure = function.__closure__
    if closure is not None:  # a decorator's wrapper (convertStrBytes): the function it wraps too
        closure = tuple(
            CellType(_rebind(cell.cell_contents, namespace)) if _ours(cell.cell_contents) else cell for cell in closure
        )
    out = FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, closure)
    out.__kwdefaults__, out.__qualname__, out.__doc__ = function.__kwdefaults__, function.__qualname__, function.__doc__
    out.__dict__.update(function.__dict__)
    return out


def bind(namespace: dict[str, Any], load: Callable[[str], Any]) -> None:
    """Fill ``namespace`` with pynvml's: its classes, constants and structs themselves, its functions
    running on ``namespace``'s own loader state (``nvmlLib``, the function-pointer cache, the init count),
    the library loaded through ``load`` (in place of ``ctypes.CDLL``)."""
    name = namespace.get("__name__", "pynvml")
    namespace.update(_PYNVML)
    new = FunctionType
    for key, function, more in _functions():
        # The plain ones (nearly all) as cheaply as Python makes a function: its name, qualified name
        # and docstring come with its code.
        namespace[key] = (
            _rebind(function, namespace) if more else new(function.__code__, namespace, key, function.__defaults__)
        )
    namespace.update(
        __name__=name,
        nvmlLib=None,
        _nvmlLib_refcount=0,
        _nvmlGetFunctionPointer_cache={},
        libLoadLock=threading.Lock(),
        CDLL=load,
    )


@contextmanager
def installed(library: Any) -> Iterator[None]:
    """The real ``pynvml`` module with ``library`` as its loaded NVML, for one program; afterwards the
    module as it was (its own loader state, and whatever the program patched: gpustat replaces
    ``_nvmlGetFunctionPointer``), so a later nvmlInit in this process loads the real library again."""
    saved = dict(_PYNVML)
    _PYNVML.update(nvmlLib=library, _nvmlLib_refcount=0, _nvmlGetFunctionPointer_cache={})
    try:
        yield
    finally:
        _PYNVML.clear()
        _PYNVML.update(saved)


# -- answers into C ---------------------------------------------------------------------------------


def c_string(value: str | bytes) -> bytes:
    """A string as the driver's bytes: what a recording could not decode (kept as surrogate escapes)
    goes back as the bytes it was, for pynvml to decode, or fail to, as it does with a real driver."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


class InsufficientSizeError(Exception):
    """An answer larger than the buffer pynvml passed (NVML_ERROR_INSUFFICIENT_SIZE)."""


@functools.cache
def _field_types(struct: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for klass in reversed(struct.__mro__):
        for entry in vars(klass).get("_fields_", ()):
            out[entry[0]] = entry[1]
    return out


def _items(value: Any) -> Any:
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, SimpleNamespace):
        return vars(value).items()
    if isinstance(value, msgspec.Struct):
        return ((f, getattr(value, f)) for f in value.__struct_fields__)
    raise TypeError(f"cannot write {type(value).__name__} into a struct")


class Shaper:
    """Writes answers into what pynvml passes a C function. ``address`` gives the pointer value for an
    opaque object (a device handle, an event set, a GPM sample) that a C function hands back."""

    def __init__(self, address: Callable[[Any], int]) -> None:
        self.address = address

    def outputs(self, symbol: str, answer: Any, outs: list[Any]) -> int:
        """Write ``answer`` through ``outs`` (the pointers and arrays among the call's arguments, in
        order): one answer per pointer, or a list through a count and an array (the sizing protocol)."""
        n = len(outs)
        if n == 0:
            return SUCCESS
        if n == 1:
            return self.store(outs[0], answer)
        if n == 2:
            array = next((o for o in outs if o is None or _is_array(o)), False)
            count = next((o for o in outs if isinstance(o, _SIMPLE)), None)
            if array is not False and count is not None:
                return self.listed(symbol, answer, array, count)
        for out, value in zip(outs, answer, strict=True):
            code = self.store(out, value)
            if code != SUCCESS:
                return code
        return SUCCESS

    def listed(self, symbol: str, items: Any, array: Any, count: Any) -> int:
        """NVML's list protocol: the size asked with no array (or too small a one), then filled."""
        items = list(items)
        if array is None or count.value < len(items):
            count.value = len(items)
            return INSUFFICIENT_SIZE if items or symbol in SIZED_EVEN_EMPTY else SUCCESS
        for i, item in enumerate(items):
            self.element(array, i, item)
        count.value = len(items)
        return SUCCESS

    def store(self, target: Any, value: Any) -> int:
        """One answer into the object one pointer argument points at."""
        try:
            if isinstance(target, _SIMPLE):
                target.value = value.value if isinstance(value, _SIMPLE) else value
            elif isinstance(target, ctypes.Array):
                if target._type_ is ctypes.c_char:
                    data = c_string(value)
                    if len(data) >= len(target):
                        return INSUFFICIENT_SIZE
                    target.value = data
                else:
                    for i, item in enumerate(list(value)[: len(target)]):
                        self.element(target, i, item)
            elif isinstance(target, ctypes.Structure | ctypes.Union):
                self.fill(target, value)
            elif isinstance(target, _POINTER):
                self.point(target, value)
            else:
                raise TypeError(f"cannot write into {type(target).__name__}")
        except InsufficientSizeError:
            return INSUFFICIENT_SIZE
        return SUCCESS

    def element(self, array: Any, i: int, item: Any) -> None:
        kind = array._type_
        if issubclass(kind, ctypes.Structure | ctypes.Union):
            self.fill(array[i], item)
        elif issubclass(kind, _POINTER):
            array[i] = ctypes.cast(self.address(item), kind)
        else:
            array[i] = item

    def point(self, target: Any, value: Any) -> None:
        """Make a pointer (an opaque handle pynvml holds) point where ``value``'s handle says."""
        ctypes.c_void_p.from_buffer(target).value = self.address(value)

    def fill(self, struct: Any, value: Any) -> None:
        """A struct's members from an answer: a struct (copied), or a dict, namespace or msgspec struct
        of members (nested structs and arrays from nested ones and lists; strings as the driver's bytes)."""
        if isinstance(value, ctypes.Structure | ctypes.Union):
            if type(value) is type(struct):
                ctypes.memmove(ctypes.addressof(struct), ctypes.addressof(value), ctypes.sizeof(struct))
                return
            value = {name: getattr(value, name) for name in _field_types(type(value)) if name != "version"}
        kind_of: Any = type(struct)
        types = _field_types(kind_of)
        if not isinstance(value, dict | SimpleNamespace | msgspec.Struct):  # what a wrapper returns of the struct
            members = [name for name in types if name != "version"]
            if isinstance(value, list | tuple) and len(value) == len(members):  # its members, in order
                value = dict(zip(members, value, strict=True))
            elif len(members) != 1:
                raise TypeError(f"cannot write {type(value).__name__} into {type(struct).__name__}")
            else:
                value = {members[0]: value}
        for name, item in _items(value):
            kind = types.get(name)
            if kind is None:
                raise TypeError(f"{type(struct).__name__} has no member {name!r}")
            if issubclass(kind, ctypes.Structure | ctypes.Union):
                self.fill(getattr(struct, name), item)
            elif issubclass(kind, ctypes.Array):
                if kind._type_ is ctypes.c_char:
                    data = c_string(item)
                    if len(data) > kind._length_:
                        raise InsufficientSizeError(name)
                    object.__setattr__(struct, name, data)
                else:
                    array = object.__getattribute__(struct, name)
                    for i, element in enumerate(list(item)[: len(array)]):
                        self.element(array, i, element)
            elif issubclass(kind, _POINTER):
                object.__setattr__(struct, name, ctypes.cast(self.address(item), kind))
            elif kind is ctypes.c_char:
                data = bytes([item]) if isinstance(item, int) else c_string(item)
                object.__setattr__(struct, name, data[:1] or b"\0")
            else:
                object.__setattr__(struct, name, item)


# How _decode takes an argument, by its type.
_IN, _OUT, _DEVICE, _NULL, _ARRAY, _BUFFER, _NUMBER, _POINTER_IN = (
    "in",
    "out",
    "device",
    "null",
    "array",
    "buffer",
    "number",
    "pointer",
)
_ORDER = sys.byteorder
_KINDS: dict[type, str] = {CArg: _OUT, DEVICE_T: _DEVICE, type(None): _NULL, int: _IN, bytes: _IN, str: _IN}


def _kind(kind: Any) -> str:
    if issubclass(kind, ctypes.Array):
        found = _BUFFER if kind._type_ is ctypes.c_char else _ARRAY
    elif issubclass(kind, _SIMPLE):
        found = _NUMBER
    elif issubclass(kind, _POINTER):
        found = _POINTER_IN
    else:
        found = _IN
    _KINDS[kind] = found
    return found


def _is_array(value: Any) -> bool:
    return isinstance(value, ctypes.Array) and value._type_ is not ctypes.c_char


def address_of(pointer: Any) -> int:
    """The address a ctypes pointer (an NVML handle) holds; 0 for a null one."""
    return int.from_bytes(bytes(pointer), sys.byteorder)  # its own bytes: several times cheaper than a cast


def unversioned(symbol: str) -> str:
    """``nvmlDeviceGetCount_v2`` -> ``nvmlDeviceGetCount``: the call a versioned entry point answers."""
    head, sep, tail = symbol.rpartition("_v")
    return head if sep and tail.isdigit() else symbol


# Device handles are pointers whose address says the GPU (its position) and the MIG device; event sets
# and GPM samples are pointers to the fake's own objects. None is dereferenced.
_DEVICE_TAG = 0x6E76_0000_0000
_OPAQUE_TAG = 0x6F70_0000_0000
_ERROR_STRINGS = {**pynvml.NVMLError._errcode_to_string, pynvml.NVML_ERROR_NOT_READY: "Not Ready"}


class _Library:
    """What pynvml loads as libnvidia-ml: each attribute a C function of the fake, or AttributeError
    (pynvml's FUNCTION_NOT_FOUND) for a symbol the fake does not model or the driver lacks."""

    def __init__(self, fake: CFake) -> None:
        self._fake = fake

    def __getattr__(self, symbol: str) -> Callable[..., Any]:
        if symbol.startswith("__") or self._fake._lacks(symbol):
            raise AttributeError(symbol)
        function = self._fake._c_symbol(symbol)
        if function is None:
            raise AttributeError(symbol)
        costs = self._fake.costs
        if costs is not None:  # what the driver charges for it (opt-in: call_costs)
            function = call_costs.charged(function, costs.of(symbol))
        self.__dict__[symbol] = function  # pynvml caches it too, and sets its restype on it
        return function


class CFake(ModuleType):
    """A ``pynvml`` (see :func:`bind`) whose library is this object: a subclass says what each call
    answers (:meth:`_answerer`: a Python answer, which :class:`Shaper` writes through the C function's
    pointers; or :meth:`_c_special`: a C function of its own). ``RAW`` names the answerers that take
    the C function's own arguments (device handles decoded) and write through its pointers themselves.
    ``costs``: what each C function costs (:mod:`.call_costs`); by default none, or the profile
    ``GPUDIAG_FAKE_NVML_COSTS`` names."""

    RAW: frozenset[str] = frozenset()

    def __init__(self, doc: str | None = None, costs: call_costs.CallCosts | None = None) -> None:
        super().__init__("pynvml", doc)
        self.costs = costs if costs is not None else call_costs.from_environment()
        self.library = _Library(self)
        bind(self.__dict__, self._load)
        self._shaper = Shaper(self._address_of)
        self._handles: dict[int, FakeHandle] = {}  # device handles by address
        self._opaque: dict[int, Any] = {}  # event sets by address
        self._next_opaque = 0

    def _load(self, path: str) -> Any:
        return self.library

    def _lacks(self, symbol: str) -> bool:
        """Whether this driver lacks ``symbol`` (looked up: FUNCTION_NOT_FOUND)."""
        return False

    def _answerer(self, symbol: str) -> tuple[str, Callable[..., Any] | None]:
        """The name and Python answer of the C function ``symbol`` (None: not modelled)."""
        return symbol, None

    def _c_special(self, symbol: str) -> Callable[..., Any] | None:
        """A C function answered at the boundary itself (None: the generic one, from :meth:`_answerer`)."""
        if symbol == "nvmlErrorString":  # pynvml sets restype c_char_p: the bytes themselves
            return lambda code: _ERROR_STRINGS.get(int(code), "Unknown Error").encode()
        return None

    def _c_fallback(self, symbol: str) -> Callable[..., Any] | None:
        """A C function for a symbol no answerer models."""
        return None

    def new_address(self) -> int:
        """A fresh pointer value for a driver-side object the caller holds (a GPM sample)."""
        self._next_opaque += 1
        return _OPAQUE_TAG | self._next_opaque << 4

    def _address_of(self, value: Any) -> int:
        """The pointer a C function hands back for ``value``: a device handle, an address, an object."""
        if isinstance(value, FakeHandle):
            address = _DEVICE_TAG | (value.gpu + 1) << 8 | (0 if value.mig_slot is None else value.mig_slot + 1)
            self._handles[address] = value
            return address
        if isinstance(value, int):
            return value
        for address, known in self._opaque.items():
            if known is value:
                return address
        address = self.new_address()
        self._opaque[address] = value
        return address

    def handle(self, device: Any) -> Any:
        """The FakeHandle a device handle (pynvml's pointer, or a FakeHandle itself) stands for."""
        if type(device) is not DEVICE_T:
            return device
        return self._handles.get(address_of(device)) or FakeHandle(-1)  # a null or foreign pointer: no GPU

    def _decode(self, args: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
        """A C call's arguments: its inputs (handles as FakeHandle, numbers, bytes) and its outputs
        (what its pointers point at, arrays, string buffers; a null pointer as None). A string
        buffer's size, the argument after it, is no input."""
        ins: list[Any] = []
        outs: list[Any] = []
        sized = False
        kinds, handles = _KINDS, self._handles
        for arg in args:
            kind = kinds.get(arg.__class__) or _kind(arg.__class__)
            if kind is _OUT:
                outs.append(arg._obj)
                sized = False
                continue
            if kind is _DEVICE:
                ins.append(handles.get(int.from_bytes(bytes(arg), _ORDER)) or FakeHandle(-1))
            elif kind is _NUMBER:
                if not sized:
                    ins.append(arg.value)
            elif kind is _IN:
                ins.append(arg)
            elif kind is _NULL or kind is _ARRAY:
                outs.append(arg)
            elif kind is _BUFFER:
                outs.append(arg)
                sized = True
                continue
            else:  # another pointer: an object of the fake's (an event set), or one a raw answerer decodes
                ins.append(self._opaque.get(address_of(arg), arg))
            sized = False
        return ins, outs

    def _c_symbol(self, symbol: str) -> Callable[..., Any] | None:
        """The C function ``symbol``, or None where this fake does not model it."""
        special = self._c_special(symbol)
        if special is not None:
            return special
        name, answer = self._answerer(symbol)
        if answer is None:
            return self._c_fallback(symbol)
        shaper, decode = self._shaper, self._decode
        if name in self.RAW:

            def raw(*args: Any) -> int:
                try:
                    code = answer(*(self.handle(a) for a in args))
                except pynvml.NVMLError as exc:
                    if getattr(exc, "gpudiag_reason", None) is not None:
                        raise
                    return int(exc.value)
                return SUCCESS if code is None else int(code)

            return raw

        def c_function(*args: Any) -> int:
            ins, outs = decode(args)
            try:
                value = answer(*ins)
            except pynvml.NVMLError as exc:
                # What a snapshot lacks, or an error it recorded with a reason, leaves as pynvml's own
                # exception carrying why (gpudiag's probe reads it): what the wrapper would raise.
                if getattr(exc, "gpudiag_reason", None) is not None:
                    raise
                return int(exc.value)
            return shaper.outputs(symbol, value, outs)

        return c_function
