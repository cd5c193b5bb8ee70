"""The real NVML source (NvmlSession) against the fake pynvml, condition by condition.

The fake raises pynvml's own error classes, so these tests exercise the exact `except`
clauses that run on a real driver; subclasses of the fake inject failures the example
machines cannot express (a GPU lost mid-read, an error from one particular call).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pynvml
import pytest

from gpudiag.model import FactGroup, GpuState, HostProcess, HostState, Machine, NvmlStatus, ProcessKind, Reading, Reason
from gpudiag.probe.nvml import NvmlSession
from gpudiag.replay import fixtures
from gpudiag.replay.fake_answers import FakeHandle
from gpudiag.replay.fake_host import RecordedHost
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.serialize import to_data
from gpudiag.sources import collect

Load = Callable[[str], Machine]
PACKAGE = Path(__file__).resolve().parent.parent / "gpudiag"


def session(machine: Machine, lib: Any = None) -> tuple[NvmlSession, Any]:
    fake = lib or FakeNvml(machine)
    s = NvmlSession(fake, RecordedHost(machine))
    s.open(machine.nvml.kernel_module_version)
    return s, fake


def with_gpu(machine: Machine, index: int, **changes: Any) -> Machine:
    gpus = list(machine.gpus)
    gpus[index] = msgspec.structs.replace(gpus[index], **changes)
    return msgspec.structs.replace(machine, gpus=tuple(gpus))


class FailsOneCall(FakeNvml):
    """Raises NVML error ``code`` whenever ``fail`` is called, as a driver might."""

    def __init__(self, machine: Machine, fail: str, code: int) -> None:
        super().__init__(machine)
        self.fail, self.code = fail, code

    def _enter(self, name: str) -> None:
        super()._enter(name)
        if name == self.fail:
            raise pynvml.NVMLError(self.code)


# --- initialisation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        ("no-nvml-library", NvmlStatus.LIBRARY_NOT_FOUND, "libnvidia-ml.so.1"),
        ("no-driver", NvmlStatus.DRIVER_NOT_LOADED, "not loaded"),
        ("driver-mismatch", NvmlStatus.VERSION_MISMATCH, "reboot"),
        ("no-permission", NvmlStatus.NO_PERMISSION, "/dev/nvidia"),
    ],
)
def test_init_failures_become_explained_states(machine: Load, name: str, status: NvmlStatus, words: str) -> None:
    s, _ = session(machine(name))
    assert s.info.status is status
    assert words in s.info.detail
    assert "\n" not in s.info.detail
    assert s.info.driver_version.reason is Reason.UNAVAILABLE
    assert s.info.cuda_driver_version.reason is Reason.UNAVAILABLE
    assert not s.opened


def test_an_unexpected_init_error_is_reported_not_raised(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, _ = session(m, FailsOneCall(m, "nvmlInit", pynvml.NVML_ERROR_UNKNOWN))
    assert s.info.status is NvmlStatus.ERROR
    assert s.info.detail.startswith("NVML failed to initialise: ")


def test_failing_to_count_gpus_is_an_error_state_and_nvml_is_still_shut_down(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, fake = session(m, FailsOneCall(m, "nvmlDeviceGetCount", pynvml.NVML_ERROR_NO_PERMISSION))
    assert s.info.status is NvmlStatus.ERROR
    assert "cannot count the GPUs" in s.info.detail
    assert s.read_gpus() == ()
    s.close()
    assert fake.calls[-1] == "nvmlShutdown"  # nvmlInit succeeded, so it is balanced


def test_mismatch_keeps_the_loaded_kernel_module_version() -> None:
    m = collect("driver-mismatch")
    assert m.nvml.status is NvmlStatus.VERSION_MISMATCH
    assert m.nvml.kernel_module_version.value == "535.129.03"
    assert m.gpus == ()


def test_system_facts_of_a_working_driver(machine: Load) -> None:
    s, _ = session(machine("h100x8-healthy"))
    assert (s.info.status, s.info.detail) == (NvmlStatus.OK, "")
    assert s.info.driver_version.value == "550.54.15"
    assert s.info.cuda_driver_version_text.value == "12.4"


# --- GPUs that cannot be read ---------------------------------------------------------


def test_lost_gpu_is_a_row_and_the_others_still_read() -> None:
    m = collect("gpu-lost")
    assert [g.state for g in m.gpus] == [GpuState.OK, GpuState.OK, GpuState.LOST, GpuState.OK]
    lost = m.gpus[2]
    assert lost.memory.reason is Reason.GPU_LOST
    assert "XID 79" in lost.state_detail
    assert m.gpus[3].memory.value is not None


def test_a_gpu_that_cannot_be_opened_for_another_reason_is_an_error_row(machine: Load) -> None:
    m = machine("h100x8-healthy")
    m = with_gpu(m, 5, state=GpuState.ERROR)
    gpus = session(m)[0].read_gpus()
    assert gpus[5].state is GpuState.ERROR
    assert gpus[5].state_detail.startswith("cannot open GPU 5: nvmlDeviceGetHandleByIndex")
    assert gpus[5].temperature_c.reason is Reason.UNKNOWN_ERROR
    assert [g.state for g in gpus].count(GpuState.OK) == 7


class LosesGpuMidRead(FakeNvml):
    """The handle opens, then the GPU falls off the bus before the temperature read."""

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        if handle.gpu == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return int(self.answer("nvmlDeviceGetTemperature", handle, sensor))


def test_gpu_lost_in_the_middle_of_a_read(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, _ = session(m, LosesGpuMidRead(m))
    gpus = s.read_gpus()
    assert gpus[1].state is GpuState.LOST
    assert "nvmlDeviceGetTemperature" in gpus[1].state_detail
    assert gpus[1].uuid.reason is Reason.GPU_LOST  # nothing half-read survives
    assert all(g.state is GpuState.OK for g in gpus if g.index != 1)


def test_later_samples_see_changes_through_the_same_session(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, fake = session(m)
    assert s.read_gpus()[3].state is GpuState.OK
    fake.set_machine(with_gpu(m, 3, state=GpuState.LOST))
    assert s.read_gpus()[3].state is GpuState.LOST


# --- no NVML error escapes, whichever call fails --------------------------------------


def _calls_made(name: str) -> list[str]:
    """The NVML calls a full read of this machine makes and its driver has."""
    m = fixtures.load(name)[0]
    s, fake = session(m)
    s.read_gpus()
    s.close()
    return sorted(set(fake.calls) - set(m.nvml.functions_missing))


# Discovery-time MIG enumeration: an error there leaves the GPU without MIG rows, unreported.
_SWALLOWED = {"nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex"}
# The quick loop fails one call of each kind the assertions below tell apart (the start, the count, a
# handle, a swallowed MIG enumeration, the end, a reading) on the MIG machine, a reading with each other
# error; the full suite injects every error into every call of both machines.
_QUICK = {
    (pynvml.NVML_ERROR_UNKNOWN, fn)
    for fn in (
        "nvmlInit",
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlShutdown",
        "nvmlDeviceGetMemoryInfo",
        "nvmlGpuInstanceGetComputeInstances",
    )
} | {
    (pynvml.NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetTemperature"),
    (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetTemperature"),
}
_INJECTED = [
    pytest.param(
        name,
        fn,
        code,
        marks=() if name == "a100-mig" and (code, fn) in _QUICK else pytest.mark.slow,
    )
    for name in ("a100-mig", "old-driver-v1-processes")
    for fn in _calls_made(name)
    for code in (
        pynvml.NVML_ERROR_UNKNOWN,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        *((pynvml.NVML_ERROR_GPU_IS_LOST,) if fn.startswith("nvmlDevice") else ()),
    )
]


@pytest.mark.parametrize(("name", "fail", "code"), _INJECTED, ids=lambda v: str(v))
def test_an_error_from_any_one_call_is_contained(machine: Load, name: str, fail: str, code: int) -> None:
    m = machine(name)
    s, _ = session(m, FailsOneCall(m, fail, code))
    gpus = s.read_gpus()  # must not raise
    s.close()
    if fail in ("nvmlInit", "nvmlDeviceGetCount"):
        assert s.info.status is not NvmlStatus.OK and s.info.detail
        return
    assert s.info.status is NvmlStatus.OK
    assert len(gpus) == len(m.gpus)
    states = {g.state for g in gpus}
    if code == pynvml.NVML_ERROR_GPU_IS_LOST and fail not in _SWALLOWED:
        assert states == {GpuState.LOST}, fail
        return
    if fail == "nvmlDeviceGetHandleByIndex":
        assert states == {GpuState.ERROR}
    else:
        assert states == {GpuState.OK}
    if fail in _SWALLOWED or fail == "nvmlShutdown":
        return
    said = json.dumps(to_data((s.info, gpus)))
    assert fail.split("_v")[0] in said, f"no reading names {fail}"
    if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
        assert fail in s.info.functions_missing or f"{fail}_v2" in s.info.functions_missing


# --- reasons ----------------------------------------------------------------------------


def test_missing_readings_keep_their_reason() -> None:
    gpu = collect("geforce-no-ecc-power").gpus[0]
    assert gpu.power_draw_w.reason is Reason.NOT_SUPPORTED
    assert gpu.ecc_errors.volatile_uncorrected.reason is Reason.NOT_SUPPORTED
    assert gpu.remapped_rows.reason is Reason.NOT_SUPPORTED
    assert gpu.recovery_action.reason is Reason.NOT_SUPPORTED  # a per-field status inside a successful call
    v100 = collect("v100x4-tutorial").gpus[0]
    assert v100.numa_node.reason is Reason.FUNCTION_NOT_FOUND
    assert "nvmlDeviceGetNumaNodeId" in v100.numa_node.detail


def test_a_reading_the_snapshot_lacks_replays_as_not_recorded_not_as_unsupported() -> None:
    """The file predates clocks and energy: the fake says so (an NVML "unknown error" to its other
    consumers) and the probe reads "not recorded", which says nothing about the GPU."""
    gpu = collect("a100-ecc-errors").gpus[0]
    assert gpu.clock_sm_mhz.reason is Reason.NOT_RECORDED and gpu.energy_mj.reason is Reason.NOT_RECORDED
    lib = FakeNvml(fixtures.load("a100-ecc-errors")[0])
    lib.nvmlInit()
    with pytest.raises(pynvml.NVMLError_Unknown):
        lib.nvmlDeviceGetClockInfo(FakeHandle(0), pynvml.NVML_CLOCK_SM)
    assert collect("h100x8-healthy").gpus[0].clock_sm_mhz.value == 345  # recorded: replayed as it is


class DeniesTemperature(FakeNvml):
    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)


def test_no_permission_is_distinct_from_not_supported(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, _ = session(m, DeniesTemperature(m))
    reading = s.read_gpus()[0].temperature_c
    assert reading.reason is Reason.NO_PERMISSION
    assert "insufficient permissions" in reading.detail


# --- old drivers: fallbacks, recorded -------------------------------------------------


@pytest.mark.parametrize("name", ["v100x4-tutorial", "old-driver-v1-processes", "gtx1050-desktop"])
def test_old_driver_falls_back_to_v1_process_query_and_v1_memory(name: str) -> None:
    m = collect(name)
    assert m.nvml.process_query_api == "_v1"
    missing = m.nvml.functions_missing
    assert missing.index("nvmlDeviceGetComputeRunningProcesses_v3") < missing.index(
        "nvmlDeviceGetComputeRunningProcesses_v2"
    )
    assert "nvmlDeviceGetMemoryInfo_v2" in missing
    for gpu in m.gpus:
        assert gpu.memory.value is not None
        assert gpu.memory.value.reserved_bytes.reason is Reason.FUNCTION_NOT_FOUND
        for proc in gpu.processes.value or ():
            assert proc.gpu_instance_id is None  # v1 structs have no MIG ids
            assert proc.used_memory_bytes.value is not None


def test_v1_process_figures_and_empty_gpus() -> None:
    m = collect("old-driver-v1-processes")
    procs = [g.processes.value for g in m.gpus]
    assert [[p.pid for p in ps or ()] for ps in procs] == [[24811], [24812], [], []]
    assert procs[0] is not None and procs[0][0].used_memory_bytes.value == 9012 * 1024 * 1024
    v100 = collect("v100x4-tutorial").gpus[0].processes.value
    assert v100 is not None and v100[0].used_memory_bytes.value == 10944 * 1024 * 1024


def test_the_process_api_is_found_once_then_kept(machine: Load) -> None:
    s, fake = session(machine("old-driver-v1-processes"))
    for _ in range(3):
        s.read_gpus()
    assert fake.calls.count("nvmlDeviceGetComputeRunningProcesses_v3") == 1
    assert fake.calls.count("nvmlDeviceGetComputeRunningProcesses_v2") == 1
    assert fake.calls.count("nvmlDeviceGetComputeRunningProcesses") == 3 * 4  # v1, per GPU per read


def test_clock_events_fall_back_to_throttle_reasons(machine: Load) -> None:
    s, fake = session(machine("old-driver-v1-processes"))
    gpus = s.read_gpus()
    assert [g.clock_event_reasons.value for g in gpus] == [0x4, 0x4, 0x1, 0x1]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls
    assert "nvmlDeviceGetCurrentClocksEventReasons" in s.info.functions_missing


def test_v2_is_used_when_v3_is_missing(machine: Load) -> None:
    m = machine("h100x8-healthy")
    missing = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3")
    m = msgspec.structs.replace(m, nvml=msgspec.structs.replace(m.nvml, functions_missing=missing))
    s, _ = session(m)
    s.read_gpus()
    s.read_gpus()
    assert s.info.process_query_api == "_v2"
    assert s.info.functions_missing == ("nvmlDeviceGetComputeRunningProcesses_v3",)


def test_new_driver_uses_v3_and_memory_v2(machine: Load) -> None:
    s, _ = session(machine("h100x8-healthy"))
    gpu = s.read_gpus()[0]
    assert s.info.process_query_api == "_v3"
    assert s.info.functions_missing == ()
    # 480 MiB, as the captured idle H100 reports
    assert gpu.memory.value is not None and gpu.memory.value.reserved_bytes.value == 503316480


def test_without_any_process_query_the_processes_say_why(machine: Load) -> None:
    m = machine("h100x8-healthy")
    gone = ("_v3", "_v2", "")
    names = tuple(f"nvmlDeviceGet{f}RunningProcesses{v}" for f in ("Compute", "Graphics") for v in gone)
    m = msgspec.structs.replace(m, nvml=msgspec.structs.replace(m.nvml, functions_missing=names))
    s, _ = session(m)
    procs = s.read_gpus()[0].processes
    assert procs.reason is Reason.FUNCTION_NOT_FOUND
    assert "nvmlDeviceGetComputeRunningProcesses" in procs.detail


@pytest.mark.parametrize("name", ["h100x8-training-64procs", "old-driver-v1-processes"])
def test_per_process_memory_that_nvml_cannot_give_is_not_supported(machine: Load, name: str) -> None:
    m = machine(name)
    gpu = m.gpus[0]
    assert gpu.processes.value
    blind = msgspec.structs.replace(gpu.processes.value[0], used_memory_bytes=Reading.missing(Reason.NOT_SUPPORTED))
    m = with_gpu(m, 0, processes=Reading.of((blind, *gpu.processes.value[1:])))
    first = session(m)[0].read_gpus()[0].processes.value
    assert first is not None
    assert first[0].used_memory_bytes.reason is Reason.NOT_SUPPORTED
    assert first[0].used_memory_bytes.detail  # says why there is no figure


# --- processes ------------------------------------------------------------------------


def test_compute_and_graphics_of_one_pid_merge_as_c_plus_g(machine: Load) -> None:
    m = machine("gtx1050-desktop")
    gpu = m.gpus[0]
    assert gpu.processes.value is not None
    both = msgspec.structs.replace(gpu.processes.value[0], kind=ProcessKind.COMPUTE_GRAPHICS)
    m = with_gpu(m, 0, processes=Reading.of((both,)))
    procs = session(m)[0].read_gpus()[0].processes.value
    assert procs is not None and [(p.pid, p.kind) for p in procs] == [(4242, ProcessKind.COMPUTE_GRAPHICS)]


def test_graphics_and_compute_kinds_of_a_desktop() -> None:
    procs = collect("gtx1050-desktop").gpus[0].processes.value
    assert procs is not None
    assert {(p.host.name.value, p.kind) for p in procs} == {
        ("python", ProcessKind.COMPUTE),
        ("Xorg", ProcessKind.GRAPHICS),
        ("compiz", ProcessKind.GRAPHICS),
    }


def test_a_pid_listed_twice_as_compute_stays_compute(machine: Load) -> None:
    """A repeat within one list (e.g. one entry per context) is not graphics work."""
    m = machine("h100x8-training-64procs")
    gpu = m.gpus[0]
    assert gpu.processes.value is not None
    first = gpu.processes.value[0]
    m = with_gpu(m, 0, processes=Reading.of((first, first)))
    procs = session(m)[0].read_gpus()[0].processes.value
    assert procs is not None and [(p.pid, p.kind) for p in procs] == [(first.pid, ProcessKind.COMPUTE)]


def test_vanished_and_hidden_pids_come_from_the_host_resolver() -> None:
    gpus = collect("hidepid-processes").gpus
    assert gpus[0].processes.value is not None and gpus[1].processes.value is not None
    assert [p.host.state for p in gpus[0].processes.value] == [HostState.FOUND, HostState.NO_PERMISSION]
    assert gpus[0].processes.value[1].host.command.reason is Reason.NO_PERMISSION
    assert gpus[1].processes.value[0].host.state is HostState.VANISHED


def test_container_pids_are_explained_as_host_pids() -> None:
    m = collect("container-pids")
    assert m.host.in_container
    for gpu in m.gpus:
        assert gpu.processes.value
        assert {p.host.state for p in gpu.processes.value} == {HostState.OTHER_NAMESPACE}


def test_unknown_pid_resolves_as_vanished(machine: Load) -> None:
    host = RecordedHost(machine("h100x8-healthy"))
    answer: HostProcess = host(999999)
    assert answer.state is HostState.VANISHED


# --- MIG ------------------------------------------------------------------------------


def test_mig_devices_and_instance_ids() -> None:
    gpu = collect("a100-mig").gpus[0]
    assert gpu.mig_mode_current.value is True
    assert [d.gpu_instance_id.value for d in gpu.mig_devices] == [1, 5, 13]
    assert [d.compute_instance_id.value for d in gpu.mig_devices] == [0, 0, 0]
    assert gpu.mig_devices[0].uuid.value == "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"
    assert gpu.mig_devices[1].name.value == "NVIDIA A100-SXM4-40GB MIG 2g.10gb"
    assert gpu.mig_devices[1].memory.value is not None
    assert gpu.mig_devices[1].memory.value.used_bytes == 1167065088
    assert gpu.utilization.reason is Reason.NOT_SUPPORTED
    procs = gpu.processes.value
    assert procs is not None
    assert {(p.pid, p.gpu_instance_id, p.compute_instance_id) for p in procs} == {(20817, 1, 0), (20990, 5, 0)}


def test_mig_enabled_without_instances_has_no_mig_rows() -> None:
    gpu = collect("a100-mig-no-instances").gpus[0]
    assert gpu.mig_mode_current.value is True
    assert gpu.mig_devices == ()


def test_handles_are_fetched_once_across_reads(machine: Load) -> None:
    s, fake = session(machine("h100x8-healthy"))
    for _ in range(5):
        s.read_gpus()
    assert fake.calls.count("nvmlDeviceGetHandleByIndex") == 8
    assert fake.calls.count("nvmlInit") == 1
    mig, mig_fake = session(machine("a100-mig"))
    for _ in range(5):
        mig.read_gpus()
    assert mig_fake.calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 7  # each slot probed once
    assert mig_fake.calls.count("nvmlDeviceGetGpuInstanceId") == 5 * 3


# --- health fields --------------------------------------------------------------------


def test_health_fields_read_through() -> None:
    gpu = collect("a100-ecc-errors").gpus[0]
    assert gpu.ecc_errors.volatile_uncorrected.value == 2
    assert gpu.ecc_errors.aggregate_corrected.value == 4031
    assert gpu.remapped_rows.value is not None and gpu.remapped_rows.value.pending
    assert gpu.recovery_action.value == 1
    assert gpu.clock_event_reasons.value == 0x48  # HwSlowdown | HwThermalSlowdown


def test_retired_pages_are_counted(machine: Load) -> None:
    from gpudiag.model import RetiredPages

    m = with_gpu(machine("v100x4-tutorial"), 0, retired_pages=Reading.of(RetiredPages(3, 1, True)))
    assert session(m)[0].read_gpus()[0].retired_pages.value == RetiredPages(3, 1, True)


def test_corrupted_inforom_reads_as_invalid(machine: Load) -> None:
    m = with_gpu(machine("h100x8-healthy"), 0, inforom_valid=Reading.of(False))
    assert session(m)[0].read_gpus()[0].inforom_valid.value is False


# --- the fake itself, and who may import pynvml ----------------------------------------


def test_the_fake_passes_constants_through_and_lacks_what_it_does_not_model(machine: Load) -> None:
    fake = FakeNvml(machine("h100x8-healthy"))
    assert fake.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    assert fake.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    fake.nvmlInit()
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        fake.nvmlDeviceGetSamples(FakeHandle(0), 0, 0)


@pytest.mark.parametrize(
    ("name", "reason"),
    [("h100x8-healthy", ""), ("zero-gpus", "NVML sees no GPU"), ("no-driver", "NVML does not initialise: ")],
)
def test_the_gpu_marker_runs_only_where_nvml_sees_a_gpu(
    machine: Load, monkeypatch: pytest.MonkeyPatch, name: str, reason: str
) -> None:
    from tests.conftest import gpu_unavailable_reason

    fake = FakeNvml(machine(name))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    said = gpu_unavailable_reason.__wrapped__()
    assert said.startswith(reason) and bool(said) is bool(reason)
    assert not fake.initialised  # shut down again


# --- facts fixed while the driver stays loaded ----------------------------------------

FIXED = (
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
)


def test_fixed_facts_are_asked_once_per_session_and_again_after_a_reopen(machine: Load) -> None:
    s, fake = session(machine("h100x8-healthy"))
    # The details read names etc. their own way; GPM's figures are each read's own window.
    facts = frozenset(FactGroup) - {FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PROFILING}
    first = s.read_gpus(facts)
    asked = len(fake.calls)
    second = s.read_gpus(facts)
    later = fake.calls[asked:]
    assert not set(later) & set(FIXED)
    assert later.count("nvmlDeviceGetUUID") == 8  # asked every time: it finds a GPU lost since
    assert later.count("nvmlDeviceGetTemperature") == 8  # what can change is read again
    assert second == first
    s.reopen()  # NVML restarted under a long-running reader: new handles, everything asked again
    asked = len(fake.calls)
    assert s.read_gpus(facts) == first
    assert fake.calls[asked:].count("nvmlDeviceGetTemperatureThreshold") == 2 * 8


def test_a_fixed_fact_that_failed_is_asked_again(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, fake = session(m, FailsOneCall(m, "nvmlDeviceGetName", pynvml.NVML_ERROR_UNKNOWN))
    assert s.read_gpus()[0].name.reason is Reason.UNKNOWN_ERROR
    fake.fail = ""  # the driver answers again
    assert s.read_gpus()[0].name.value == m.gpus[0].name.value
