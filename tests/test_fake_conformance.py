"""The replay's fake NVML answers in pynvml's own types: it is NVML's library under the real pynvml.

Every pynvml function gpudiag calls during full reads of every example machine is watched: it must be
nvidia-ml-py's own code (its wrapper ran, on the fake's C functions), and what it returned must be a
type pynvml's wrappers return (ctypes structs, arrays and numbers of pynvml's, lists, tuples, strings,
pynvml's friendly objects), never a Python stand-in (a namespace, a handle object, a msgspec struct).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator
from types import FunctionType
from typing import Any

import msgspec
import pynvml
import pytest

from gpudiag.model import GpuState, Reading
from gpudiag.probe.nvml import NvmlSession
from gpudiag.query import gpu_fields
from gpudiag.replay import c_boundary
from gpudiag.replay.fake_host import RecordedHost
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.replay.fixtures import example_names, load
from tests.conftest import Cli


@functools.cache
def _pynvml_code() -> frozenset[Any]:
    """The code objects of pynvml's functions (a decorated one's inner function too)."""
    codes = set()
    for value in vars(pynvml).values():
        while isinstance(value, FunctionType):
            codes.add(value.__code__)
            value = getattr(value, "__wrapped__", None)
    return frozenset(codes)


_CTYPES = (ctypes.Structure, ctypes.Union, ctypes.Array, c_boundary._SIMPLE, c_boundary._POINTER)


def pynvml_type(value: Any) -> bool:
    """Whether ``value`` is of a kind nvidia-ml-py's wrappers return."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return True
    if isinstance(value, list | tuple):
        return all(pynvml_type(item) for item in value)
    if isinstance(value, pynvml.nvmlFriendlyObject):
        return all(pynvml_type(item) for item in vars(value).values())
    if isinstance(value, ctypes.Array):
        return issubclass(value._type_, _CTYPES)
    if isinstance(value, _CTYPES):
        return type(value).__module__ in ("pynvml", "ctypes")
    return False


class Watch:
    """Every pynvml function called on the fakes made while it is on, and what it returned."""

    def __init__(self) -> None:
        self.answers: dict[str, set[str]] = {}
        self.strangers: list[tuple[str, str]] = []  # (function, type of its answer)

    def wrap(self, name: str, function: FunctionType) -> Any:
        def watched(*args: Any, **kwargs: Any) -> Any:
            answer = function(*args, **kwargs)
            self.answers.setdefault(name, set()).add(type(answer).__name__)
            if not pynvml_type(answer):
                self.strangers.append((name, type(answer).__name__))
            return answer

        return watched


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    seen = Watch()
    real_bind = c_boundary.bind

    def bind(namespace: dict[str, Any], load: Any) -> None:
        real_bind(namespace, load)
        for name, value in list(namespace.items()):
            if name.startswith("nvml") and isinstance(value, FunctionType):
                assert value.__code__ in _pynvml_code(), name  # pynvml's own code, nothing of the fake's
                namespace[name] = seen.wrap(name, value)

    monkeypatch.setattr(c_boundary, "bind", bind)
    yield seen


def _every_query_field() -> str:
    return ",".join(f.name for f in gpu_fields.fields())


FULL_READS = (
    ("list",),
    ("list", "-q"),
    ("list", "-q", "-x"),
    ("snapshot",),
    ("dmon", "--count", "1"),
    ("pmon", "--count", "1"),
    ("check", "--no-torch"),
    ("exporter", "--once"),
)


@pytest.mark.slow
@pytest.mark.parametrize("name", example_names())
def test_every_answer_of_a_full_read_comes_from_pynvml_s_wrapper(cli: Cli, watch: Watch, name: str) -> None:
    for args in (*FULL_READS, ("list", "--query", _every_query_field(), "--format", "csv")):
        code, _, err = cli.replay(name, *args)
        assert code != 70, (args, err)  # no internal error
    assert watch.strangers == [], name
    if load(name)[0].nvml.status.value == "ok":
        assert "nvmlDeviceGetCount" in watch.answers  # the watch saw the reads


def test_the_answers_named_in_issue_32_are_pynvml_s_types(watch: Watch) -> None:
    """BAR1 (whole GPU and MIG device), row remapper histogram, protected memory, bridge chips, GRID
    licences, C2C, FBC, device attributes, NVLink remote PCI info, CPU and memory affinity, encoder
    stats, an XID event: what the wrapper returns, filled by the fake's C functions."""
    lib = FakeNvml(load("a100-mig")[0])
    lib.nvmlInit()
    gpu = lib.nvmlDeviceGetHandleByIndex(0)
    mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    assert isinstance(lib.nvmlDeviceGetBAR1MemoryInfo(mig), pynvml.c_nvmlBAR1Memory_t)
    assert isinstance(lib.nvmlDeviceGetAttributes_v2(mig), pynvml.c_nvmlDeviceAttributes)
    busy = FakeNvml(load("h100-driver580-busy")[0])
    busy.nvmlInit()
    h = busy.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(busy.nvmlDeviceGetBAR1MemoryInfo(h), pynvml.c_nvmlBAR1Memory_t)
    assert isinstance(busy.nvmlDeviceGetCpuAffinity(h, 1), ctypes.Array)
    assert isinstance(busy.nvmlDeviceGetMemoryAffinity(h, 1, 0), ctypes.Array)
    for call in (
        "nvmlDeviceGetRowRemapperHistogram",
        "nvmlDeviceGetConfComputeProtectedMemoryUsage",
        "nvmlDeviceGetBridgeChipInfo",
        "nvmlDeviceGetGridLicensableFeatures",
        "nvmlDeviceGetC2cModeInfoV",
        "nvmlDeviceGetFBCStats",
        "nvmlDeviceGetEncoderStats",
    ):
        try:
            answer = getattr(busy, call)(h)
        except pynvml.NVMLError:
            continue  # the recorded answer is an error: pynvml's own class
        assert pynvml_type(answer) and not isinstance(answer, list), (call, type(answer))
    assert isinstance(busy.nvmlDeviceGetEncoderStats(h), tuple)
    events = busy.nvmlEventSetCreate()
    busy.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, events)
    busy.inject_xid(0, 79)
    data = busy.nvmlEventSetWait_v2(events, 0)
    assert isinstance(data, pynvml.c_nvmlEventData_t) and (data.eventType, data.eventData) == (
        pynvml.nvmlEventTypeXidCriticalError,
        79,
    )
    assert busy.nvmlDeviceGetIndex(data.device) == 0  # the event's device is a handle pynvml can use
    assert watch.strangers == []


def test_invalid_utf8_in_a_recorded_name_raises_as_pynvml_raises() -> None:
    """The name holds bytes that are not UTF-8 (kept as surrogate escapes): the fake's C function
    writes them back as those bytes, and pynvml's own decoding raises UnicodeDecodeError, as it does
    on a driver that answers them."""
    machine, _ = load("h100-driver580-idle")
    gpu = msgspec.structs.replace(machine.gpus[0], name=Reading.of("NVIDIA H\udcff100"))
    lib = FakeNvml(msgspec.structs.replace(machine, gpus=(gpu,)))
    lib.nvmlInit()
    handle = lib.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(UnicodeDecodeError) as raised:
        lib.nvmlDeviceGetName(handle)
    assert raised.value.object == b"NVIDIA H\xff100"
    tb = raised.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code in _pynvml_code()  # raised by pynvml's own decoding
    assert lib.nvmlDeviceGetUUID(handle) == gpu.uuid.value  # the rest still answers
    # gpudiag's probe reads it as that reading's error, as with a real driver; the GPU reads on.
    session = NvmlSession(FakeNvml(msgspec.structs.replace(machine, gpus=(gpu,))), RecordedHost(machine))
    session.open(machine.nvml.kernel_module_version)
    read = session.read_gpus()[0]
    assert (
        read.name.value is None and "nvmlDeviceGetName" in read.name.detail and "UnicodeDecodeError" in read.name.detail
    )
    assert read.state is GpuState.OK and read.uuid.value == gpu.uuid.value
