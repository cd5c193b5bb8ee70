"""The replay's fake NVML is a pynvml module that answers like the real library.

Where docs/hardware/h100-80gb-hbm3-driver580/nvml-getters-*.json shows what NVML itself
returned on an H100 (driver 580), the fake must return the same on the example machines built
from that capture; elsewhere it follows nvidia-ml-py's own conventions.
"""

from __future__ import annotations

import ctypes
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pynvml
import pytest

from gpudiag.replay.c_boundary import address_of
from gpudiag.replay.fake_answers import FakeHandle, NotRecordedError
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.replay.fixtures import load

CAPTURE = Path(__file__).resolve().parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"


def fake(name: str, init: bool = True) -> FakeNvml:
    lib = FakeNvml(load(name)[0])
    if init:
        lib.nvmlInit()
    return lib


# --- a module, as consumers use it -------------------------------------------------------


def test_the_fake_is_a_module_with_pynvml_s_names() -> None:
    lib = fake("h100x8-healthy", init=False)
    assert isinstance(lib, ModuleType) and lib.__name__ == "pynvml"
    names = vars(lib)
    for name in ("NVML_ERROR_NOT_SUPPORTED", "NVMLError_NotSupported", "c_nvmlMemory_v2_t"):
        assert names[name] is getattr(pynvml, name)
    for name in ("nvmlExceptionClass", "nvmlDeviceGetMemoryInfo", "_nvmlGetFunctionPointer"):  # pynvml's code
        assert names[name].__code__ is getattr(pynvml, name).__code__
    assert callable(names["nvmlDeviceGetMemoryInfo"]) and callable(names["nvmlDeviceGetSamples"])
    assert not any(n in names for n in ("calls", "initialised"))  # test hooks stay off the namespace
    with pytest.raises(AttributeError):
        lib.nvmlNoSuchCall  # noqa: B018 - nvidia-ml-py has no such name either


def test_star_import_gives_the_calls_and_the_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = fake("h100x8-healthy", init=False)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", lib)
    scope: dict[str, Any] = {}
    exec("from pynvml import *", scope)
    assert scope["NVML_SUCCESS"] == 0 and scope["nvmlInit"] == lib.nvmlInit
    scope["nvmlInit"]()
    assert scope["nvmlDeviceGetCount"]() == 8


def test_errors_are_pynvml_s_own_classes() -> None:
    lib = fake("h100-driver580-idle")
    with pytest.raises(pynvml.NVMLError_NotSupported):
        lib.nvmlDeviceGetNumaNodeId(lib.nvmlDeviceGetHandleByIndex(0))
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        lib.nvmlDeviceGetSamples(FakeHandle(0), 0, 0)


# --- what the H100 capture shows ---------------------------------------------------------


def test_memory_v1_includes_the_reserved_memory_and_v2_does_not() -> None:
    lib = fake("h100-driver580-idle")
    h = lib.nvmlDeviceGetHandleByIndex(0)
    v1, v2 = lib.nvmlDeviceGetMemoryInfo(h), lib.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert isinstance(v1, pynvml.c_nvmlMemory_t) and isinstance(v2, pynvml.c_nvmlMemory_v2_t)
    assert (v1.total, v1.free, v1.used) == (85520809984, 85017493504, 503316480)  # as captured
    assert (v2.used, v2.reserved) == (0, 503316480)
    assert v1.used == v2.used + v2.reserved


def test_init_is_reference_counted() -> None:
    lib = fake("h100-driver580-idle", init=False)
    lib.nvmlInit()
    lib.nvmlInitWithFlags(0)
    lib.nvmlShutdown()
    assert lib.nvmlDeviceGetCount() == 1  # still initialised: one nvmlInit is left
    lib.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        lib.nvmlDeviceGetCount()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        lib.nvmlShutdown()


def test_max_mig_device_count_is_zero_on_a_mig_capable_gpu_with_mig_off() -> None:
    lib = fake("h100-driver580-idle")
    h = lib.nvmlDeviceGetHandleByIndex(0)
    assert lib.nvmlDeviceGetMigMode(h) == [0, 0]
    assert lib.nvmlDeviceGetMaxMigDeviceCount(h) == 0
    no_mig = fake("geforce-no-ecc-power")
    with pytest.raises(pynvml.NVMLError_NotSupported):
        no_mig.nvmlDeviceGetMaxMigDeviceCount(no_mig.nvmlDeviceGetHandleByIndex(0))


def _call(lib: FakeNvml, key: str) -> Any:
    """``nvmlDeviceGetX(0, 1)`` as the capture names it: the call on GPU 0 with those arguments."""
    match = re.fullmatch(r"(\w+)(?:\((.*)\))?", key)
    assert match
    args = [int(a) for a in (match.group(2) or "").replace(" ", "").split(",") if a]
    try:
        return {"ok": getattr(lib, match.group(1))(lib.nvmlDeviceGetHandleByIndex(0), *args)}
    except pynvml.NVMLError as exc:
        return {"error": type(exc).__name__}


# Getters whose answer is a property of the GPU, its driver or its settings, not of the moment.
_CONSTANT = [
    "nvmlDeviceGetName",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    *(f"nvmlDeviceGetTemperatureThreshold({n},)" for n in range(8)),  # 2 and 3 recorded with the details
    *(f"nvmlDeviceGetTotalEccErrors({e}, {c})" for e in (0, 1) for c in (0, 1)),
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPages(1,)",
    "nvmlDeviceGetRetiredPages(2,)",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGraphicsRunningProcesses",
]
# A machine without details (a snapshot of an older gpudiag) does not record thresholds 2 and 3
# (memory and GPU max operating temperature), BAR1 or the video clock: the fake says they are not
# recorded (NVML's "unknown error" to its consumers), never that the GPU does not support them.
_NOT_RECORDED = [
    "nvmlDeviceGetTemperatureThreshold(2,)",
    "nvmlDeviceGetTemperatureThreshold(3,)",
    "nvmlDeviceGetBAR1MemoryInfo",
    "nvmlDeviceGetClockInfo(3,)",
]


@pytest.mark.parametrize(("name", "capture"), [("h100-driver580-idle", "idle"), ("h100-driver580-busy", "busy")])
@pytest.mark.parametrize("key", _CONSTANT)
def test_the_fake_answers_as_nvml_did_on_the_h100(name: str, capture: str, key: str) -> None:
    captured = json.loads((CAPTURE / f"nvml-getters-{capture}.json").read_text())["device0"][key]
    answer = _call(fake(name), key)
    if "ok" in answer and not isinstance(answer["ok"], int | str | list):
        answer = {"ok": list(answer["ok"])}
    if "ok" in answer and isinstance(answer["ok"], tuple):
        answer = {"ok": list(answer["ok"])}
    assert answer == captured


@pytest.mark.parametrize("key", _NOT_RECORDED)
def test_what_the_snapshot_does_not_record_is_not_recorded_never_not_supported(key: str) -> None:
    assert _call(fake("h100x8-healthy"), key) == {"error": "NotRecordedError"}
    assert issubclass(NotRecordedError, pynvml.NVMLError_Unknown)


def test_idle_and_busy_answers_match_the_moment_captured() -> None:
    """Moment-dependent getters, against the gpudiag snapshot of the same moment."""
    idle, busy = fake("h100-driver580-idle"), fake("h100-driver580-busy")
    h = FakeHandle(0)
    assert idle.nvmlDeviceGetCurrentClocksEventReasons(h) == 1  # GpuIdle, as in nvml-getters-idle
    assert busy.nvmlDeviceGetCurrentClocksEventReasons(h) == 0
    assert idle.nvmlDeviceGetComputeRunningProcesses(h) == []
    (proc,) = busy.nvmlDeviceGetComputeRunningProcesses(h)
    assert (proc.pid, proc.usedGpuMemory, proc.gpuInstanceId, proc.computeInstanceId) == (
        485,
        13428064256,
        0xFFFFFFFF,
        0xFFFFFFFF,
    )
    assert isinstance(idle.nvmlDeviceIsMigDeviceHandle(h), ctypes.c_uint)  # pynvml returns the c_uint
    assert idle.nvmlDeviceIsMigDeviceHandle(h).value == 0


# --- handles, MIG, and the C entry points consumers use ------------------------------------


def test_handles_by_uuid_and_pci_bus_id() -> None:
    lib = fake("a100-mig")
    gpu = address_of(lib.nvmlDeviceGetHandleByIndex(0))  # pynvml's handles are pointers: the same GPU, the same address
    uuid = lib.nvmlDeviceGetUUID(lib.nvmlDeviceGetHandleByIndex(0))
    assert (
        address_of(lib.nvmlDeviceGetHandleByUUID(uuid))
        == gpu
        == address_of(lib.nvmlDeviceGetHandleByUUID(uuid.encode()))
    )
    bus = lib.nvmlDeviceGetPciInfo(lib.nvmlDeviceGetHandleByIndex(0)).busId  # str, as nvidia-ml-py 12+ gives it
    assert address_of(lib.nvmlDeviceGetHandleByPciBusId(bus)) == gpu
    assert address_of(lib.nvmlDeviceGetHandleByPciBusId(bus[4:])) == gpu  # NVML also takes the short domain
    mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(lib.nvmlDeviceGetHandleByIndex(0), 0)
    assert address_of(lib.nvmlDeviceGetHandleByUUID(lib.nvmlDeviceGetUUID(mig))) == address_of(mig) != gpu
    assert address_of(lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)) == gpu
    with pytest.raises(pynvml.NVMLError_NotFound):
        lib.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        lib.nvmlDeviceGetHandleByPciBusId("not a bus id")


def test_the_process_query_honours_the_mig_instance_asked() -> None:
    lib = fake("a100-mig")
    gpu = lib.nvmlDeviceGetHandleByIndex(0)
    everyone = {p.pid for p in lib.nvmlDeviceGetComputeRunningProcesses(gpu)}
    per_instance = []
    for slot in range(lib.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot)
        except pynvml.NVMLError_NotFound:
            continue
        gi, ci = lib.nvmlDeviceGetGpuInstanceId(mig), lib.nvmlDeviceGetComputeInstanceId(mig)
        procs = lib.nvmlDeviceGetComputeRunningProcesses(mig)
        assert all((p.gpuInstanceId, p.computeInstanceId) == (gi, ci) for p in procs)
        per_instance.append({p.pid for p in procs})
    assert len([s for s in per_instance if s]) >= 2
    assert set().union(*per_instance) == everyone and sum(map(len, per_instance)) == len(everyone)


def test_gpu_level_calls_on_a_mig_handle_are_not_supported() -> None:
    lib = fake("a100-mig")
    mig = lib.nvmlDeviceGetMigDeviceHandleByIndex(lib.nvmlDeviceGetHandleByIndex(0), 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        lib.nvmlDeviceGetPowerUsage(mig)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        lib.nvmlDeviceGetIndex(mig)
    assert lib.nvmlDeviceIsMigDeviceHandle(mig).value == 1


def test_power_management_limit_and_bar1() -> None:
    lib = fake("h100-driver580-idle")
    h = lib.nvmlDeviceGetHandleByIndex(0)
    assert lib.nvmlDeviceGetPowerManagementLimit(h) == lib.nvmlDeviceGetEnforcedPowerLimit(h) == 700000
    assert lib.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total == 137438953472  # recorded with the details
    without = fake("h100x8-healthy")
    with pytest.raises(NotRecordedError):
        without.nvmlDeviceGetBAR1MemoryInfo(without.nvmlDeviceGetHandleByIndex(0))


def test_c_entry_points_for_versioned_calls() -> None:
    """What nvitop calls through ``_nvmlGetFunctionPointer``, with ctypes arguments."""
    lib = fake("h100-driver580-busy")
    h = lib.nvmlDeviceGetHandleByIndex(0)
    memory = pynvml.c_nvmlMemory_v2_t()
    memory.version = pynvml.nvmlMemory_v2
    assert lib._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")(h, ctypes.byref(memory)) == 0
    assert (memory.used, memory.reserved) == (13437304832, 503316480)
    plain = pynvml.c_nvmlMemory_t()
    assert lib._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo")(h, ctypes.byref(plain)) == 0
    assert plain.used == plain.total - plain.free
    count = ctypes.c_uint(0)
    query = lib._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    assert query(h, ctypes.byref(count), None) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE and count.value == 1
    temperature = ctypes.c_uint(0)
    read = lib._nvmlGetFunctionPointer("nvmlDeviceGetTemperature")
    assert read(h, ctypes.c_uint(0), ctypes.byref(temperature)) == 0 and temperature.value == 35
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        lib._nvmlGetFunctionPointer("nvmlDeviceGetRunningProcessDetailList")


def test_function_pointers_need_the_library_loaded_and_honour_what_the_driver_lacks() -> None:
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake("h100-driver580-idle", init=False)._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo")
    old = fake("old-driver-v1-processes")
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        old._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
    # nvidia-ml-py's unversioned wrapper is v3, and says so where the driver lacks it
    with pytest.raises((pynvml.NVMLError_FunctionNotFound, getattr(pynvml, "NVMLLibraryMismatchError", OSError))):
        old.nvmlDeviceGetComputeRunningProcesses(FakeHandle(0))
    assert old._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses") is not None


def test_a_patched_function_pointer_lookup_is_used_by_the_process_wrappers() -> None:
    """gpustat patches ``pynvml._nvmlGetFunctionPointer`` to fall back from v3 to v2."""
    lib = fake("h100-driver580-busy")
    original = lib._nvmlGetFunctionPointer
    asked: list[str] = []

    def patched(name: str) -> Any:
        asked.append(name)
        return original(name)

    lib._nvmlGetFunctionPointer = patched  # type: ignore[method-assign]
    assert len(lib.nvmlDeviceGetComputeRunningProcesses(FakeHandle(0))) == 1
    assert asked == ["nvmlDeviceGetComputeRunningProcesses_v3"]


def test_the_call_log_keeps_the_latest_calls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replayed watch or exporter runs for days: the log of calls must not grow with it."""
    from gpudiag.replay import fake_nvml

    monkeypatch.setattr(fake_nvml, "CALL_LOG", 50)
    lib = FakeNvml(load("h100x8-healthy")[0])
    lib.nvmlInit()
    for _ in range(200):
        lib.nvmlDeviceGetCount()
    lib.nvmlShutdown()
    assert len(lib.calls) == 50
    assert lib.calls[-2:] == ["nvmlDeviceGetCount", "nvmlShutdown"]


def test_a_field_row_answers_its_own_scope_and_a_link_answers_for_itself() -> None:
    """NVLink data (field 138): the exporter's row reads the sum of every link (ALL_LINKS), `nvlink -gt d`
    reads each link (the link is the scope): one field id, two answers, neither standing in for the other."""
    import msgspec

    from gpudiag.model import Reading
    from gpudiag.readings import ALL_LINKS

    machine = load("h100x8-nvswitch")[0]
    gpu = msgspec.structs.replace(machine.gpus[0], nvlink_data_tx_kib=Reading.of(123_456_789))
    fake = FakeNvml(msgspec.structs.replace(machine, gpus=(gpu, *machine.gpus[1:])))
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    field = pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
    whole, link0 = fake.nvmlDeviceGetFieldValues(handle, [(field, ALL_LINKS), (field, 0)])
    assert (whole.nvmlReturn, whole.value.ullVal) == (pynvml.NVML_SUCCESS, 123_456_789)
    details = gpu.details.value
    assert details is not None and details.nvlinks.value is not None
    assert (link0.nvmlReturn, link0.value.ullVal) == (pynvml.NVML_SUCCESS, details.nvlinks.value[0].data_tx_kib.value)


# --- the real pynvml: untouched by a replay, borrowed by python -m gpudiag.replay -------------------


def test_a_replay_leaves_the_real_pynvml_alone() -> None:
    """Each fake has pynvml's functions on a loader state of its own: two replays at once answer each
    for its machine, and the real module never loads anything."""
    healthy, lost = fake("h100x8-healthy"), fake("gpu-lost")
    assert (healthy.nvmlDeviceGetCount(), lost.nvmlDeviceGetCount()) == (8, len(load("gpu-lost")[0].gpus))
    assert pynvml.nvmlLib is None and pynvml._nvmlGetFunctionPointer_cache == {}
    assert healthy.nvmlLib is healthy.library and lost.nvmlLib is lost.library


def test_python_m_gpudiag_replay_runs_a_program_on_the_real_pynvml_and_puts_it_back(tmp_path: Path) -> None:
    from gpudiag.replay import run

    script = tmp_path / "reader.py"
    script.write_text(
        "import json, sys, pynvml\n"
        "pynvml.nvmlInit()\n"
        "h = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
        "read = [pynvml.nvmlDeviceGetName(h), type(pynvml.nvmlDeviceGetMemoryInfo(h)).__name__]\n"
        "json.dump(read, open(sys.argv[1], 'w'))\n"
        "pynvml._nvmlGetFunctionPointer = None  # a program's own patch (gpustat makes one)\n"
    )
    before, argv = dict(vars(pynvml)), list(sys.argv)
    assert run.main(["h100-driver580-idle", str(script), str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text()) == ["NVIDIA H100 80GB HBM3", "c_nvmlMemory_t"]
    assert vars(pynvml) == before  # its loader state and the program's patch undone
    assert pynvml.nvmlLib is None and sys.argv == argv
