"""The declarations of gpudiag.readings against NVML's own (nvidia-ml-py's constants)."""

from __future__ import annotations

import pynvml

from gpudiag import readings


def test_clock_events_are_nvmls_bits_and_counter_fields() -> None:
    for event in readings.CLOCK_EVENTS:
        assert getattr(pynvml, f"nvmlClocksEventReason{event.name}") == event.bit, event.name
    counters = {
        "SwPowerCap": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
        "SyncBoost": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST,
        "SwThermalSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
        "HwThermalSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
        "HwPowerBrakeSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
    }
    assert {e.name: e.counter_field for e in readings.CLOCK_EVENTS if e.counter_field} == counters
    assert sum(e.bit for e in readings.CLOCK_EVENTS) == 0x1FF  # the H100's supported mask: every reason
    assert readings.clock_event_bits("HwSlowdown", "SwThermalSlowdown") == 0x28


def test_codes_are_nvmls() -> None:
    assert readings.COMPUTE_MODES[pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS].value == "Exclusive_Process"
    assert readings.TOPOLOGY_LEVELS[pynvml.NVML_TOPOLOGY_SYSTEM] == "SYS"
    assert readings.TOPOLOGY_LEVELS[pynvml.NVML_TOPOLOGY_NODE] == "NODE"
    assert readings.P2P_STATUS[pynvml.NVML_P2P_STATUS_OK] == "OK"
    assert pynvml.NVML_P2P_CAPS_INDEX_READ[0] == readings.P2P_READ and readings.P2P_NVLINK == 2
    assert readings.NVLINK_REMOTE_TYPES[pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH] == "switch"
    for name, fid in (
        ("MEMORY_TEMP", readings.FI_MEMORY_TEMP),
        ("NVLINK_GET_SPEED", readings.FI_NVLINK_GET_SPEED),
        ("POWER_AVERAGE", readings.FI_POWER_AVERAGE),
        ("POWER_INSTANT", readings.FI_POWER_INSTANT),
        ("REMAPPED_ROWS_COR_INACTIVE", readings.FI_REMAPPED_COR_INACTIVE),
        ("REMAPPED_ROWS_UNC_INACTIVE", readings.FI_REMAPPED_UNC_INACTIVE),
    ):
        assert getattr(pynvml, f"NVML_FI_DEV_{name}") == fid, name
