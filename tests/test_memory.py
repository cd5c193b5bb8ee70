"""`gpudiag.memory`: shares, the allocator breakdown, MIG matching, watch state, insights; the views."""

from __future__ import annotations

import time
from io import StringIO

import msgspec
from rich.console import Console

from gpudiag.memory.build import breakdown, build
from gpudiag.memory.insights import LOW_UTIL_SAMPLES, empty_cache_line, insights, peaks_line, unmatched_line
from gpudiag.memory.state import WatchState, max_free, min_free
from gpudiag.memory.view import MemoryView
from gpudiag.model import GpuState, Machine, Memory, Reading, Reason
from gpudiag.render import memory_view
from gpudiag.replay.fixtures import load
from gpudiag.track.entries import TrackedDevice, TrackedProcess

MiB = 1024 * 1024


def tracked(pid: int, *devices: TrackedDevice) -> dict[int, TrackedProcess]:
    return {pid: TrackedProcess(pid, "python train.py", time.time(), devices)}


def device(uuid: str, allocated_mib: int, reserved_mib: int, index: int = 0, **kw: object) -> TrackedDevice:
    fields: dict[str, object] = {
        "torch_index": index,
        "uuid": uuid,
        "allocated_bytes": allocated_mib * MiB,
        "reserved_bytes": reserved_mib * MiB,
        "peak_allocated_bytes": 9000 * MiB,
        "peak_reserved_bytes": 10500 * MiB,
        "alloc_retries": 0,
        "ooms": 0,
    }
    fields.update(kw)
    return TrackedDevice(**fields)  # type: ignore[arg-type]


def with_gpu(machine: Machine, index: int, **changes: object) -> Machine:
    gpus = list(machine.gpus)
    gpus[index] = msgspec.structs.replace(gpus[index], **changes)  # type: ignore[arg-type]
    return msgspec.structs.replace(machine, gpus=tuple(gpus))


def with_free(machine: Machine, index: int, free_mib: int) -> Machine:
    old = machine.gpus[index].memory.value
    assert old is not None
    new = Memory(old.total_bytes, old.total_bytes - free_mib * MiB, free_mib * MiB, old.reserved_bytes)
    return with_gpu(machine, index, memory=Reading.of(new))


def render(view: MemoryView, state: WatchState | None = None, height: int | None = None) -> str:
    file = StringIO()
    Console(file=file, width=160, color_system=None).print(memory_view.render(view, state, height))
    return file.getvalue()


# --- one view ------------------------------------------------------------------------


def test_shares_and_totals() -> None:
    view = build(load("v100x4-tutorial")[0], {})
    assert [round(r.share_percent or 0, 1) for r in view.processes] == [67.8, 38.8, 38.8, 38.8]
    assert view.total_used_bytes == (10955 + 3 * 6263) * MiB
    assert view.processes_used_bytes == (10944 + 3 * 6252) * MiB


def test_breakdown_of_a_tracked_process() -> None:
    machine = load("v100x4-tutorial")[0]
    uuid = "1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00"  # torch prints GPU 0's UUID without the prefix
    view = build(machine, tracked(31337, device(uuid, 8000, 10000, ooms=1, alloc_retries=2)))
    row = view.processes[0]
    assert row.breakdown is not None
    assert row.breakdown.allocated_bytes == 8000 * MiB
    assert row.breakdown.cached_free_bytes == 2000 * MiB
    assert row.breakdown.other_bytes == 944 * MiB  # NVML's 10944 MiB minus 10000 reserved
    line = empty_cache_line(row)
    assert line == (
        "PID 31337 on GPU 0 (cuda:0): empty_cache() would return 2.0 GiB; 7.8 GiB is tensors, "
        "944.0 MiB context and libraries"
    )
    assert "1 out-of-memory error(s), 2 allocator retries" in peaks_line(row)
    assert view.processes[1].breakdown is None  # GPU 1: the tracker reported only cuda:0


def test_breakdown_is_clamped_and_says_when_nvml_has_no_figure() -> None:
    dev = device("x", 100, 300)
    assert breakdown(200 * MiB, dev).other_bytes == 0  # tracker's sample newer than NVML's
    b = breakdown(None, dev)
    assert b.other_bytes is None and b.reserved_bytes == 300 * MiB


def test_cuda_visible_devices_remap_is_followed_by_uuid() -> None:
    """With CUDA_VISIBLE_DEVICES=2,3 the program's cuda:0 is GPU 2: matched by UUID, not by index."""
    machine = load("v100x4-tutorial")[0]
    dev = device("GPU-1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d02", 5000, 6000, index=0)
    view = build(machine, tracked(31337, dev))
    assert [r.gpu_index for r in view.processes if r.breakdown] == [2]
    assert view.processes[2].breakdown is not None and view.processes[2].breakdown.torch_index == 0


def test_a_torch_without_uuids_is_matched_by_bus_id() -> None:
    machine = load("v100x4-tutorial")[0]
    dev = device("", 5000, 6000, index=1, pci_bus_id="0000:00:1c.0")
    view = build(machine, tracked(31337, dev))
    assert [r.gpu_index for r in view.processes if r.breakdown] == [1]


def test_mig_processes_are_matched_to_their_instance() -> None:
    machine = load("a100-mig")[0]
    dev = device("MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b", 3000, 3500)  # GI 1's instance
    view = build(machine, tracked(20817, dev) | tracked(20990, dev))
    by_pid = {r.process.pid: r for r in view.processes}
    assert by_pid[20817].mig is not None and by_pid[20817].mig.gpu_instance_id.value == 1
    used = by_pid[20817].process.used_memory_bytes.value
    instance = by_pid[20817].mig.memory.value
    assert used is not None and instance is not None
    assert by_pid[20817].breakdown is not None and by_pid[20817].breakdown.other_bytes == used - 3500 * MiB
    assert by_pid[20990].breakdown is None  # runs in GI 5: the entry's device is another instance
    assert by_pid[20817].share_percent == 100 * used / instance.total_bytes  # of its instance, not the GPU


def test_id_selection_limits_gpus_and_processes() -> None:
    view = build(load("v100x4-tutorial")[0], {}, {1, 3})
    assert [r.gpu.index for r in view.gpus] == [1, 3]
    assert {r.gpu_index for r in view.processes} == {1, 3}


def test_dataparallel_imbalance_is_explained() -> None:
    view = build(load("v100x4-tutorial")[0], {})
    (line,) = insights(view)
    assert "GPU 0" in line and "DataParallel" in line and "device_ids[0]" in line
    balanced = build(load("h100x8-training-64procs")[0], {})
    assert insights(balanced) == []


def test_one_shot_rendering() -> None:
    out = render(build(load("v100x4-tutorial")[0], {}))
    assert "10955MiB / 16130MiB" in out and "67.8%" in out
    assert "Total: 29744MiB used of 64520MiB (46.1%); 1 process(es) hold 29700MiB" in out
    assert "python -m gpudiag.track" in out  # nothing tracked: the tip


def test_lost_gpu_row_keeps_the_table_readable() -> None:
    out = render(build(load("gpu-lost")[0], {}))
    header = next(line for line in out.splitlines() if line.lstrip().startswith("GPU"))
    assert "Free" in header and "Driver-reserved" in header  # the lost row did not squeeze the columns
    assert any(line.split()[:2] == ["2", "LOST"] for line in out.splitlines())
    assert "GPU 2: GPU is lost (fallen off the bus, XID 79)" in out


def test_mig_rows_show_profile_and_instance() -> None:
    out = render(build(load("a100-mig")[0], {}))
    assert "└ MIG 3g.20gb GI 1" in out and "└ MIG 1g.5gb GI 13" in out
    assert "3g.20gb GI 1   20817" in out


def test_container_pids_are_said_so() -> None:
    out = render(build(load("container-pids")[0], {}))
    assert "host PID: not visible in this container" in out
    assert "2 process(es) belong to the host's PID namespace" in out


def test_json_sample_is_numeric_and_versioned() -> None:
    machine = load("v100x4-tutorial")[0]
    view = build(machine, tracked(31337, device("1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00", 8000, 10000)))
    data = memory_view.to_json(view, 12.5)
    assert data["schema"] == "gpudiag.memory/2" and data["timestamp"] == 12.5
    gpu = data["gpus"][0]
    assert gpu["used_bytes"] == 10955 * MiB and gpu["used_percent"] == 67.92
    # driver 418 has no memory_v2: the reason, as `list --json` writes it, never null
    assert gpu["driver_reserved_bytes"] == {
        "unavailable": "function_not_found",
        "detail": "nvmlDeviceGetMemoryInfo_v2 is not in this driver",
    }
    proc = data["processes"][0]
    assert proc["torch"]["cached_free_bytes"] == 2000 * MiB and proc["torch"]["reserved_bytes"] == 10000 * MiB
    assert data["processes"][1]["torch"] is None
    assert "sample" not in data  # one-shot


# --- watching ------------------------------------------------------------------------


def test_watch_state_marks_new_and_exited_and_keeps_peaks() -> None:
    base = load("v100x4-tutorial")[0]
    procs = base.gpus[1].processes.value
    assert procs is not None
    extra = msgspec.structs.replace(procs[0], pid=4242, used_memory_bytes=Reading.of(700 * MiB))
    more = with_gpu(base, 1, processes=Reading.of((*procs, extra)))
    state = WatchState()
    first = state.update(build(base, {}), at=1.0)
    assert all(r.status == "" for r in first.processes)  # the first sample marks nothing new
    second = state.update(build(more, {}), at=2.0)
    assert [r.process.pid for r in second.processes if r.status == "new"] == [4242]
    assert state.recently_new(next(r for r in second.processes if r.process.pid == 4242))
    third = state.update(build(base, {}), at=3.0)
    assert [(e.gpu_index, e.pid) for e in third.exited] == [(1, 4242)]
    assert [what for _, what in state.events][-1].startswith("- PID 4242 on GPU 1 exited")
    assert state.peak_process[(0, 31337)] == 10944 * MiB and (1, 4242) not in state.peak_process


def test_processes_on_a_lost_gpu_are_not_reported_as_exited() -> None:
    base = load("v100x4-tutorial")[0]
    lost = with_gpu(
        base,
        2,
        state=GpuState.LOST,
        state_detail="GPU is lost",
        memory=Reading.missing(Reason.GPU_LOST),
        processes=Reading.missing(Reason.GPU_LOST),
    )
    state = WatchState()
    state.update(build(base, {}))
    view = state.update(build(lost, {}))
    assert view.exited == () and view.lost == (2,)
    assert any("GPU 2 lost" in what for _, what in state.events)
    again = state.update(build(lost, {}))
    assert again.lost == ()  # said once


def test_watch_frame_shows_peaks_sparklines_and_events() -> None:
    base = load("h100x8-healthy")[0]
    state = WatchState()
    for free in (80000, 40000, 1000):
        view = state.update(build(with_free(base, 0, free), {}))
    out = render(view, state, height=40)
    assert "Peak used" in out and "Memory history" in out and "Util history" in out
    assert f"{81559 - 1000}MiB" in out  # GPU 0's peak: the last, fullest sample
    assert memory_view.sparkline([0, 50, 100]) == "▁▅█"
    assert memory_view.sparkline([-5, 250]) == "▁█"  # out-of-range values stay on the scale


def test_live_frame_fits_the_screen() -> None:
    base = load("h100x8-training-64procs")[0]
    state = WatchState()
    view = state.update(build(base, {}))
    for height in (30, 50):
        out = render(view, state, height=height)
        assert len(out.splitlines()) <= height
        assert "more processes (--json lists all)" in out


def test_low_utilization_while_holding_memory_is_explained() -> None:
    base = load("h100x8-training-64procs")[0]
    util = base.gpus[5].utilization.value
    assert util is not None
    idle = with_gpu(base, 5, utilization=Reading.of(msgspec.structs.replace(util, gpu_percent=7)))
    state = WatchState()
    for _ in range(LOW_UTIL_SAMPLES - 1):
        view = state.update(build(idle, {}))
    assert insights(view, state) == []  # one bad second is not a verdict
    view = state.update(build(idle, {}))
    (line,) = insights(view, state)
    assert line.startswith("GPU 5: 7% utilization over the last 10 samples") and "waiting" in line


def test_free_memory_extremes() -> None:
    machine = with_free(with_free(load("gpu-lost")[0], 3, 100), 1, 2000)
    view = build(machine, {})
    free0 = machine.gpus[0].memory.value
    assert free0 is not None and free0.free_bytes > 2000 * MiB
    assert min_free(view) == (3, 100 * MiB)  # the lost GPU 2 counts for neither
    assert max_free(view) == (0, free0.free_bytes)


def test_csv_rows_sum_tracked_processes() -> None:
    machine = load("v100x4-tutorial")[0]
    view = build(machine, tracked(31337, device("1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00", 8000, 10000)))
    rows = memory_view.csv_rows(view, 1.0)
    assert len(rows[0]) == len(memory_view.CSV_HEADER)
    assert rows[0][7:10] == ("ok", 8000 * MiB, 10000 * MiB)
    assert rows[0][10:] == (0, 0, "")  # OOMs, retries, no forecast in a one-shot
    assert rows[1][-2:] == ("", "")


def test_a_tracked_process_nvml_does_not_list_is_still_reported() -> None:
    """In a container NVML gives host PIDs; the tracker knows the container's: no row to split, so a note."""
    machine = load("container-pids")[0]
    uuid = machine.gpus[0].uuid.value
    assert uuid is not None
    unused = device(machine.gpus[1].uuid.value or "", 0, 0, index=1)  # never allocated on: not worth a note
    view = build(machine, tracked(17, device(uuid, 5000, 6000), unused))
    assert all(r.breakdown is None for r in view.processes)
    (u,) = view.unmatched
    assert (u.pid, u.gpu_index, u.breakdown.cached_free_bytes, u.breakdown.other_bytes) == (17, 0, 1000 * MiB, None)
    line = unmatched_line(u)
    assert "NVML lists no such PID there" in line and "1000.0 MiB cached that empty_cache() would return" in line
    assert "Tracked PID 17 (python train.py) uses GPU 0 (cuda:0)" in render(view)
    assert memory_view.to_json(view, 0.0)["tracked_unmatched"][0]["torch"]["reserved_bytes"] == 6000 * MiB
    assert build(machine, tracked(17, device(uuid, 5000, 6000)), {1}).unmatched == ()  # GPU not shown


def test_empty_cache_line_without_an_nvml_figure() -> None:
    row = build(load("v100x4-tutorial")[0], tracked(31337, device("1c2b9d3e-5a7f-0b4c-8d2e-6f3a9b1c7d00", 1, 3)))
    bare = msgspec.structs.replace(row.processes[0], breakdown=breakdown(None, device("x", 1024, 3072)))
    assert (
        empty_cache_line(bare) == "PID 31337 on GPU 0 (cuda:0): empty_cache() would return 2.0 GiB; 1.0 GiB is tensors"
    )


def test_a_machine_without_gpus_says_so() -> None:
    out = render(build(load("zero-gpus")[0], {}))
    assert "No GPU to show" in out and "Used / Total" not in out
