"""On a real GPU machine: the fake NVML built from a live snapshot reads back what NVML read.

This is what keeps the fixtures honest: any difference is a bug in the fake, the model
or the NVML source. Skipped without a working NVIDIA driver.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpudiag.model import Gpu, Machine, NvmlStatus
from gpudiag.replay import fixtures
from gpudiag.sources import collect

pytestmark = pytest.mark.gpu

# Readings that change from one NVML call to the next on an idle GPU.
_VOLATILE_GPU_FIELDS = (
    "utilization",
    "temperature_c",
    "power_draw_w",
    "pstate",
    "clock_event_reasons",
    "pcie",
    "clock_sm_mhz",
    "clock_memory_mhz",
    "clock_graphics_mhz",
    "energy_mj",  # counts up while the GPU draws power
    "pcie_replays",
)


def _stable(gpu: Gpu) -> dict[str, Any]:
    data = {name: getattr(gpu, name) for name in gpu.__struct_fields__ if name not in _VOLATILE_GPU_FIELDS}
    memory = gpu.memory.value
    if memory is not None:  # used/free move as the driver allocates; the total does not
        data["memory"] = (memory.total_bytes, memory.reserved_bytes)
    data["processes"] = gpu.processes.map(lambda ps: sorted(p.pid for p in ps))
    return data


def _live() -> Machine:
    machine = collect()
    if machine.nvml.status is not NvmlStatus.OK or not machine.gpus:
        pytest.skip(f"no usable NVIDIA GPU here: {machine.nvml.detail or 'zero GPUs'}")
    return machine


def test_replay_of_a_live_snapshot_reads_back_the_same_machine(tmp_path: Any) -> None:
    live = _live()
    path = tmp_path / "live.json"
    path.write_text(fixtures.dump(live, "live test snapshot"))
    replayed = collect(str(path))
    assert replayed.nvml.driver_version == live.nvml.driver_version
    assert replayed.nvml.cuda_driver_version == live.nvml.cuda_driver_version
    assert replayed.nvml.process_query_api == live.nvml.process_query_api
    assert len(replayed.gpus) == len(live.gpus)
    for real, fake in zip(live.gpus, replayed.gpus, strict=True):
        assert _stable(fake) == _stable(real)


def test_live_snapshot_is_valid_json_with_the_schema() -> None:
    live = _live()
    data = json.loads(fixtures.dump(live))
    assert data["schema"] == "gpudiag.machine/1"
    assert fixtures.machine_from_data(data).gpus[0].uuid == live.gpus[0].uuid
