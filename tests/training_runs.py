"""The training examples: machines, the allocator figures behind them, what the tracker published, an OOM.

Each run is simulated step by step on the stand-in CUDA torch (tests/torch_standin.py) and
published by the real tracker (``gpudiag.track.snapshot``, its step log, its segment walk and its
OOM recorder), so the shipped recordings are exactly what ``gpudiag.track`` writes for those
allocator states. ``tests/test_training_examples.py`` regenerates them and compares; after a
change to the tracker, rewrite them and review the diff::

    python -m tests.training_runs   # rewrite gpudiag/machines/{*,allocator/*,recordings/*} and docs/samples/oom/
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpudiag import track
from gpudiag.track import allocator
from gpudiag.track.oom import Recorder
from gpudiag.track.steps import StepLog
from tests.torch_standin import Device, StandInTorch, memory_stats_from_segments, segment

ROOT = Path(__file__).resolve().parent.parent
MACHINES = ROOT / "gpudiag" / "machines"
MiB, GiB = 1024**2, 1024**3
H100_TOTAL = 85520809984
DRIVER_RESERVED = 557842432
CONTEXT = 620 * MiB  # the CUDA context, kernels and libraries of one process (NVML's figure beyond reserved)
STARTED_AT = 1_790_000_000.0
INTERVAL = 2.0


def uuid(n: int) -> str:
    return f"5d0c9a1e-3b2f-4e6a-8c71-2a9e4f6b{n:04d}"


# The 64-process example's illustrative exporter readings (dcgm-exporter's fields, issue 25).
ILLUSTRATIVE = (
    "memory_temperature_c",
    "encoder_percent",
    "decoder_percent",
    "violations",
    "nvlink_data_rx_kib",
    "nvlink_data_tx_kib",
    "pcie_data_tx_bytes",
    "pcie_data_rx_bytes",
    "vgpu_license_status",
)


def machine(name: str, description: str, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """A machine file like the shipped H100 ones: the 64-process example's host and defaults."""
    base = json.loads((MACHINES / "h100x8-training-64procs.json").read_text())
    for key in ILLUSTRATIVE:  # that example's own, marked so there: not recorded here
        base["gpu_defaults"].pop(key, None)
    base["description"] = description
    base["host"]["hostname"] = name
    base["gpus"] = gpus
    return base


def gpu(index: int, processes: list[dict[str, Any]], util: int = 97) -> dict[str, Any]:
    used = sum(p["used_memory_bytes"] for p in processes) + 4 * MiB
    return {
        "uuid": f"GPU-{uuid(index)}",
        "pci_bus_id": f"00000000:{0x18 + 0x10 * index:02X}:00.0",
        "minor_number": index,
        "memory": {
            "total_bytes": H100_TOTAL,
            "used_bytes": used,
            "free_bytes": H100_TOTAL - DRIVER_RESERVED - used,
            "reserved_bytes": DRIVER_RESERVED,
        },
        "utilization": {"gpu_percent": util, "memory_percent": util // 2},
        "processes": processes,
    }


def process(pid: int, used: int, command: str) -> dict[str, Any]:
    host = {"state": "found", "user": "ml", "name": "python", "command": command}
    return {"pid": pid, "kind": "C", "used_memory_bytes": used, "host": host}


class Proc:
    """One simulated training process: its allocator (per device), its tracker state."""

    def __init__(self, pid: int, command: str, devices: list[Device], env: dict[str, str] | None = None) -> None:
        self.pid, self.command, self.env = pid, command, env or {}
        self.torch = StandInTorch(devices)
        self.steps = StepLog()
        self.recent: deque[tuple[float, int, int, int, int]] = deque(maxlen=track.RECENT * 8)
        self.segments: dict[int, dict[str, Any]] = {}
        self.now = STARTED_AT
        self.recorder = Recorder(self.entry, self.context, lambda: None, environ={}, err=io.StringIO())

    @contextlib.contextmanager
    def as_tracked(self) -> Iterator[None]:
        """The tracker's module state is this process's while the real code runs."""
        saved = (track._steps, track._recent, track._segments, track._recorder, dict(os.environ))
        track._steps, track._recent, track._segments, track._recorder = (
            self.steps,
            self.recent,
            self.segments,
            self.recorder,
        )
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"):
            os.environ.pop(key, None)
        for key in ("SLURM_JOB_ID", *allocator.ALLOC_CONF_ENVS):
            os.environ.pop(key, None)
        os.environ.update(self.env)
        try:
            yield
        finally:
            track._steps, track._recent, track._segments, track._recorder, env = saved
            os.environ.clear()
            os.environ.update(env)

    def entry(self) -> dict[str, Any]:
        data = track.snapshot(self.torch, interval=INTERVAL)
        data.update(
            pid=self.pid,
            ppid=1,
            start_ticks=48211,
            pid_namespace="pid:[4026531836]",
            command=self.command,
            updated_at=self.now,
        )
        return data

    def context(self) -> dict[str, Any]:
        return {"recent": [list(r) for r in self.recent], "steps": self.steps.published(), "peers": []}

    def publish(self) -> dict[str, Any]:
        with self.as_tracked():
            data = self.entry()
            for d in data["devices"]:
                self.recent.append(
                    (self.now, d["torch_index"], d["allocated_bytes"], d["reserved_bytes"], d["peak_allocated_bytes"])
                )
            self.steps.devices = tuple(d["torch_index"] for d in data["devices"] if d["reserved_bytes"])
            return data

    def walk_segments(self) -> None:
        """The tracker's segment walk, as on a reader's request."""
        for index, found in allocator.segment_summary(allocator.take_segments(self.torch)).items():
            self.segments[index] = {**found, "at": self.now}

    def step(self, number: int) -> None:
        clock = SimpleNamespace(monotonic=lambda: self.now, time=lambda: self.now)
        self.steps.step(self.torch, number, clock=clock)


def nvml_used(dev: Device) -> int:
    return dev.stats["reserved_bytes.all.current"] + CONTEXT


def frame(at: float, gpus: dict[int, int], procs: dict[tuple[int, int], int], entries: list[dict[str, Any]]) -> str:
    data = {
        "at": at,
        "gpus": [{"index": i, "used_bytes": u, "utilization_percent": 97} for i, u in sorted(gpus.items())],
        "processes": [{"gpu_index": g, "pid": p, "used_bytes": u} for (g, p), u in sorted(procs.items())],
        "track": entries,
    }
    return json.dumps(data, separators=(",", ":"))


def header(description: str) -> str:
    return json.dumps({"schema": "gpudiag.recording/1", "started_at": STARTED_AT, "description": description})


# --- the fragmented fine-tune ---------------------------------------------------------


def fragmented_segments() -> list[dict[str, Any]]:
    """Variable-length batches: segments of every size, each with tensors and free gaps between them."""
    segs = []
    address = 0x7F0000000000
    for n in range(48):  # split: tensors with free blocks between them, none bigger than 1.2 GiB
        size = (640 + 16 * n) * MiB
        free = min(size // 2 + (n % 5) * 24 * MiB, 1229 * MiB)
        blocks = [("active_allocated", (size - free) // 2), ("inactive", free), ("active_allocated", 0)]
        blocks[2] = ("active_allocated", size - free - blocks[0][1])
        segs.append(segment(address, blocks))
        address += size
    for _ in range(23):  # whole segments free: what empty_cache() returns
        segs.append(segment(address, [("inactive", 100 * MiB)]))
        address += 100 * MiB
    segs.append(segment(address, [("active_allocated", 24 * GiB)]))  # the weights and optimizer state
    return segs


def fragmented() -> dict[str, str]:
    segs = fragmented_segments()
    stats = memory_stats_from_segments(
        segs,
        peaks={"allocated_bytes": 61 * GiB, "reserved_bytes": 71 * GiB},
        num_alloc_retries=37,
    )
    dev = Device("NVIDIA H100 80GB HBM3", uuid(0), 0x18, stats, segs)
    command = "python finetune.py --model llama-3-8b --max-len 8192 --no-packing"
    proc = Proc(7311, command, [dev])
    proc.walk_segments()
    entry = proc.publish()
    used = nvml_used(dev)
    desc = "One H100 fine-tuning with variable-length batches: a third of the reserved memory is free but split."
    files = {
        "h100-fragmented.json": json.dumps(
            machine("h100-fragmented", desc, [gpu(0, [process(7311, used, command)])]), indent=1
        ),
        "allocator/h100-fragmented.json": json.dumps(
            {
                "description": "torch.cuda.memory_stats(0) and torch.cuda.memory_snapshot() of the fragmented "
                "fine-tune, in the shape a CUDA build returns them",
                "memory_stats": {"0": stats},
                "memory_snapshot": segs,
            },
            indent=1,
        ),
        "recordings/h100-fragmented.jsonl": "\n".join(
            [header(desc), frame(0.0, {0: used + 4 * MiB}, {(0, 7311): used}, [entry])]
        ),
    }
    return files


# --- the leak, to its OOM --------------------------------------------------------------

LEAK_PER_STEP = 48 * MiB
STEPS_PER_S = 4
ACTIVATIONS = 18 * GiB


def leak_state(dev: Device, step: int) -> None:
    kept = 30 * GiB + step * LEAK_PER_STEP  # the weights, optimizer state, and every loss kept with its graph
    peak = kept + ACTIVATIONS
    reserved = -(-(peak + GiB) // (2 * MiB)) * (2 * MiB)
    dev.segments = [  # the kept tensors, and the activations' segment, free between steps
        segment(0x7F0000000000, [("active_allocated", kept)]),
        segment(0x7E0000000000, [("inactive", reserved - kept)]),
    ]
    dev.stats = memory_stats_from_segments(
        dev.segments, peaks={"allocated_bytes": peak, "reserved_bytes": reserved, "active_bytes": peak}
    )


def oom_state(dev: Device, step: int, limit: int) -> None:
    """Mid-step, at the OOM: the activations so far allocated, 1.5 GiB left on the GPU; the allocator
    already gave its free cache back and retried."""
    kept = 30 * GiB + step * LEAK_PER_STEP
    dev.segments = [
        segment(0x7F0000000000, [("active_allocated", kept)]),
        segment(0x7E0000000000, [("active_allocated", limit - kept - 1536 * MiB)]),
    ]
    dev.stats = memory_stats_from_segments(
        dev.segments,
        peaks={"allocated_bytes": kept + ACTIVATIONS, "reserved_bytes": kept + ACTIVATIONS + GiB},
        num_alloc_retries=1,
    )


def leak() -> dict[str, str]:
    dev = Device("NVIDIA H100 80GB HBM3", uuid(0), 0x18)
    command = "python train.py --model gpt2-medium --batch-size 24 --epochs 3"
    proc = Proc(4242, command, [dev])
    leak_state(dev, 0)
    desc = (
        "One H100 training a model that keeps each step's loss with its graph: 48 MiB more per step, 4 steps/s, "
        "until it runs out of memory."
    )
    lines = [header(desc)]
    limit = H100_TOTAL - DRIVER_RESERVED - CONTEXT - 4 * MiB
    step = 0
    report: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        proc.recorder._environ = {"GPUDIAG_OOM_DIR": tmp}
        for n in range(200):
            t = STARTED_AT + n * INTERVAL
            for k in range(int(INTERVAL * STEPS_PER_S)):
                proc.now = t + k / STEPS_PER_S
                leak_state(dev, step + 1)
                if dev.stats["allocated_bytes.all.peak"] + GiB > limit:  # the next activations do not fit
                    oom_state(dev, step + 1, limit)
                    free = H100_TOTAL - DRIVER_RESERVED - nvml_used(dev) - 4 * MiB
                    with proc.as_tracked(), pinned_clock(proc.now):
                        proc.torch.oom(0, 2 * GiB, H100_TOTAL, free)
                    written = Path(proc.recorder.reports[-1])
                    report = json.loads(written.read_text())
                    proc.recorder.reports[-1] = str(OOM_EXAMPLE.relative_to(ROOT))
                    break
                step += 1
                proc.step(step)
            proc.now = t + INTERVAL
            with proc.as_tracked():
                proc.recorder.attach(proc.torch)
            entry = proc.publish()
            used = nvml_used(dev)
            lines.append(frame(proc.now - STARTED_AT, {0: used + 4 * MiB}, {(0, 4242): used}, [entry]))
            if report is not None:
                break
    assert report is not None
    report["host"] = "h100-leak-per-step"
    machine_text = json.dumps(
        machine("h100-leak-per-step", desc, [gpu(0, [process(4242, 31 * GiB, command)])]), indent=1
    )
    report["machine"] = machine_at_last_frame(machine_text, lines, report["at"])
    return {
        "h100-leak-per-step.json": machine_text,
        "recordings/h100-leak-per-step.jsonl": "\n".join(lines),
        "oom": json.dumps(report, indent=1),
    }


def machine_at_last_frame(machine_text: str, lines: list[str], at: float) -> dict[str, Any]:
    """What the tracker's publisher adds to a post-mortem: the machine as `memory --json` shows it."""
    from gpudiag.memory.build import build
    from gpudiag.render.memory_view import to_json
    from gpudiag.replay.fixtures import machine_from_data
    from gpudiag.replay.recording import Recording

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        path.write_text("\n".join(lines))
        recording = Recording(path)
    recording.position = len(recording.frames) - 1
    base = machine_from_data(json.loads(machine_text), "h100-leak-per-step")
    entries = recording.entries()
    view = build(recording.apply(base), entries, same_moment=frozenset(entries))  # the publisher's fresh entry
    return to_json(view, at)


@contextlib.contextmanager
def pinned_clock(at: float) -> Iterator[None]:
    import time

    real = time.time
    time.time = lambda: at  # type: ignore[assignment]
    try:
        yield
    finally:
        time.time = real  # type: ignore[assignment]


# --- ranks: a DDP job with one heavy rank and stray contexts; a DataParallel process -----


def ranks() -> dict[str, str]:
    job = {"TORCHELASTIC_RUN_ID": "7f3a9c", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "4"}
    entries, gpus_procs, frames_used = [], {i: [] for i in range(8)}, {}
    command = "python train.py --config configs/gpt-1b.yaml"
    for rank in range(4):
        devices = []
        for index in range(4):
            d = Device("NVIDIA H100 80GB HBM3", uuid(index), 0x18 + 0x10 * index)
            if index == rank:
                kept = (52 if rank == 0 else 40) * GiB  # rank 0 gathers every rank's eval outputs
                d.segments = [segment(0x7F0000000000, [("active_allocated", kept), ("inactive", 9 * GiB)], index)]
                d.stats = memory_stats_from_segments(d.segments)
            else:
                d.stats = memory_stats_from_segments([])
            devices.append(d)
        env = {**job, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        proc = Proc(6100 + rank, f"{command} --local-rank {rank}", devices, env)
        entries.append(proc.publish())
        used = nvml_used(devices[rank])
        gpus_procs[rank].append(process(proc.pid, used, proc.command))
        frames_used[(rank, proc.pid)] = used
        if rank:  # it touched cuda:0 before set_device(local_rank): a context there, no tensors
            gpus_procs[0].append(process(proc.pid, 510 * MiB, proc.command))
    dp = []
    for index in range(4):
        kept = (26 if index == 0 else 14) * GiB  # outputs gathered on device_ids[0]
        d = Device("NVIDIA H100 80GB HBM3", uuid(4 + index), 0x18 + 0x10 * (4 + index))
        d.segments = [segment(0x7E0000000000, [("active_allocated", kept), ("inactive", 2 * GiB)], index)]
        d.stats = memory_stats_from_segments(d.segments)
        dp.append(d)
    proc = Proc(7400, "python train_dp.py --gpus 4,5,6,7", dp)
    entries.append(proc.publish())
    for index, d in enumerate(dp):
        gpus_procs[4 + index].append(process(7400, nvml_used(d), proc.command))
    desc = (
        "8x H100: a 4-rank DDP job on GPUs 0-3 whose rank 0 keeps extra tensors and whose ranks 1-3 each left a "
        "CUDA context on GPU 0; a DataParallel process on GPUs 4-7, heavier on its first GPU."
    )
    gpus = [gpu(i, gpus_procs[i]) for i in range(8)]
    used = {g["minor_number"]: g["memory"]["used_bytes"] for g in gpus}
    procs = {(g["minor_number"], p["pid"]): p["used_memory_bytes"] for g in gpus for p in g["processes"]}
    return {
        "h100x8-ranks-imbalance.json": json.dumps(machine("h100x8-ranks-imbalance", desc, gpus), indent=1),
        "recordings/h100x8-ranks-imbalance.jsonl": "\n".join([header(desc), frame(0.0, used, procs, entries)]),
    }


OOM_EXAMPLE = ROOT / "docs" / "samples" / "oom" / "gpudiag-oom-4242-h100-leak-per-step.json"


def files() -> dict[Path, str]:
    out: dict[Path, str] = {}
    for made in (fragmented(), leak(), ranks()):
        for name, text in made.items():
            out[OOM_EXAMPLE if name == "oom" else MACHINES / name] = text + "\n"
    return out


def main() -> int:
    for path, text in files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
