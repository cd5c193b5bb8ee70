"""The real NVML source (NvmlSession) against the fake pynvml, condition by condition."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from gpudiag.model import GpuState, HostProcess, HostState, Machine, NvmlStatus, ProcessKind, Reading, Reason
from gpudiag.probe.collect import collect
from gpudiag.probe.nvml import NvmlSession
from gpudiag.testing.fake_host import RecordedHost
from gpudiag.testing.fake_nvml import FakeHandle, FakeNvml

Load = Callable[[str], Machine]


def session(machine: Machine, lib: Any = None) -> tuple[NvmlSession, Any]:
    fake = lib or FakeNvml(machine)
    s = NvmlSession(fake, RecordedHost(machine))
    s.open(machine.nvml.kernel_module_version)
    return s, fake


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
    assert not s.opened


def test_mismatch_keeps_the_loaded_kernel_module_version(machine: Load) -> None:
    m = collect("driver-mismatch")
    assert m.nvml.kernel_module_version.value == "535.129.03"
    assert m.gpus == ()


def test_lost_gpu_is_a_row_and_the_others_still_read(machine: Load) -> None:
    m = collect("gpu-lost")
    assert [g.state for g in m.gpus] == [GpuState.OK, GpuState.OK, GpuState.LOST, GpuState.OK]
    lost = m.gpus[2]
    assert lost.memory.reason is Reason.GPU_LOST
    assert "XID 79" in lost.state_detail
    assert m.gpus[3].memory.value is not None


class LosesGpuMidRead(FakeNvml):
    """The handle opens, then the GPU falls off the bus before the temperature read."""

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        if handle.gpu == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return super().nvmlDeviceGetTemperature(handle, sensor)


def test_gpu_lost_in_the_middle_of_a_read(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, _ = session(m, LosesGpuMidRead(m))
    gpus = s.read_gpus()
    assert gpus[1].state is GpuState.LOST
    assert "nvmlDeviceGetTemperature" in gpus[1].state_detail
    assert all(g.state is GpuState.OK for g in gpus if g.index != 1)


def test_missing_readings_keep_their_reason(machine: Load) -> None:
    gpu = collect("geforce-no-ecc-power").gpus[0]
    assert gpu.power_draw_w.reason is Reason.NOT_SUPPORTED
    assert gpu.ecc_errors.volatile_uncorrected.reason is Reason.NOT_SUPPORTED
    assert gpu.remapped_rows.reason is Reason.NOT_SUPPORTED
    v100 = collect("v100x4-tutorial").gpus[0]
    assert v100.numa_node.reason is Reason.FUNCTION_NOT_FOUND
    assert "nvmlDeviceGetNumaNodeId" in v100.numa_node.detail


class DeniesTemperature(FakeNvml):
    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)


def test_no_permission_is_distinct_from_not_supported(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, _ = session(m, DeniesTemperature(m))
    reading = s.read_gpus()[0].temperature_c
    assert reading.reason is Reason.NO_PERMISSION
    assert "insufficient permissions" in reading.detail


def test_old_driver_falls_back_to_v1_process_query_and_v1_memory() -> None:
    m = collect("v100x4-tutorial")
    assert m.nvml.process_query_api == "_v1"
    assert "nvmlDeviceGetComputeRunningProcesses_v3" in m.nvml.functions_missing
    assert "nvmlDeviceGetComputeRunningProcesses_v2" in m.nvml.functions_missing
    assert "nvmlDeviceGetMemoryInfo_v2" in m.nvml.functions_missing
    gpu = m.gpus[0]
    procs = gpu.processes.value
    assert procs is not None and [p.pid for p in procs] == [31337]
    assert procs[0].used_memory_bytes.value == 10944 * 1024 * 1024
    assert procs[0].gpu_instance_id is None  # v1 structs have no MIG ids
    assert gpu.memory.value is not None
    assert gpu.memory.value.reserved_bytes.reason is Reason.FUNCTION_NOT_FOUND


def test_clock_events_fall_back_to_throttle_reasons(machine: Load) -> None:
    m = machine("v100x4-tutorial")
    s, fake = session(m)
    gpu = s.read_gpus()[0]
    assert gpu.clock_event_reasons.value == 0
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls


def test_v2_is_used_when_v3_is_missing(machine: Load) -> None:
    m = machine("h100x8-healthy")
    missing = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3")
    m = dataclasses.replace(m, nvml=dataclasses.replace(m.nvml, functions_missing=missing))
    s, _ = session(m)
    s.read_gpus()
    s.read_gpus()
    assert s.info.process_query_api == "_v2"


def test_compute_and_graphics_of_one_pid_merge_as_c_plus_g(machine: Load) -> None:
    m = machine("gtx1050-desktop")
    gpu = m.gpus[0]
    assert gpu.processes.value is not None
    both = dataclasses.replace(gpu.processes.value[0], kind=ProcessKind.COMPUTE_GRAPHICS)
    m = dataclasses.replace(m, gpus=(dataclasses.replace(gpu, processes=Reading.of((both,))),))
    s, _ = session(m)
    procs = s.read_gpus()[0].processes.value
    assert procs is not None and [(p.pid, p.kind) for p in procs] == [(1156, ProcessKind.COMPUTE_GRAPHICS)]


def test_mig_devices_and_instance_ids() -> None:
    gpu = collect("a100-mig").gpus[0]
    assert gpu.mig_mode_current.value is True
    assert [d.gpu_instance_id.value for d in gpu.mig_devices] == [1, 5, 13]
    assert gpu.mig_devices[0].uuid.value == "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"
    assert gpu.utilization.reason is Reason.NOT_SUPPORTED
    procs = gpu.processes.value
    assert procs is not None and {(p.pid, p.gpu_instance_id) for p in procs} == {(20817, 1), (20990, 5)}


def test_health_fields_read_through(machine: Load) -> None:
    gpu = collect("a100-ecc-errors").gpus[0]
    assert gpu.ecc_errors.volatile_uncorrected.value == 2
    assert gpu.remapped_rows.value is not None and gpu.remapped_rows.value.pending
    assert gpu.recovery_action.value == 1
    assert gpu.clock_event_reasons.value == 0x48


def test_corrupted_inforom_reads_as_invalid(machine: Load) -> None:
    m = machine("h100x8-healthy")
    gpu = dataclasses.replace(m.gpus[0], inforom_valid=Reading.of(False))
    m = dataclasses.replace(m, gpus=(gpu, *m.gpus[1:]))
    s, _ = session(m)
    assert s.read_gpus()[0].inforom_valid.value is False


def test_handles_are_fetched_once_across_reads(machine: Load) -> None:
    s, fake = session(machine("h100x8-healthy"))
    for _ in range(5):
        s.read_gpus()
    assert fake.calls.count("nvmlDeviceGetHandleByIndex") == 8
    assert fake.calls.count("nvmlInit") == 1


def test_later_samples_see_changes_through_the_same_session(machine: Load) -> None:
    m = machine("h100x8-healthy")
    s, fake = session(m)
    assert s.read_gpus()[3].state is GpuState.OK
    lost = dataclasses.replace(m.gpus[3], state=GpuState.LOST)
    fake.set_machine(dataclasses.replace(m, gpus=(*m.gpus[:3], lost, *m.gpus[4:])))
    assert s.read_gpus()[3].state is GpuState.LOST


def test_vanished_pid_comes_from_the_host_resolver(machine: Load) -> None:
    procs = collect("hidepid-processes").gpus[1].processes.value
    assert procs is not None
    assert procs[0].host.state is HostState.VANISHED


def test_unknown_pid_resolves_as_vanished(machine: Load) -> None:
    host = RecordedHost(machine("h100x8-healthy"))
    answer: HostProcess = host(999999)
    assert answer.state is HostState.VANISHED


def test_only_the_nvml_source_and_the_fake_touch_pynvml() -> None:
    package = Path(__file__).resolve().parent.parent / "gpudiag"
    allowed = {"probe/collect.py", "testing/fake_nvml.py"}
    importers = set()
    for path in package.rglob("*.py"):
        if re.search(r"^\s*(import pynvml|from pynvml)", path.read_text(), re.MULTILINE):
            importers.add(str(path.relative_to(package)))
    assert importers <= allowed, importers - allowed
    # nvml.py works on whatever module it is given; it never imports one itself.
    assert "import pynvml" not in (package / "probe" / "nvml.py").read_text()
