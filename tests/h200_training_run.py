"""The H200 training run (shared/hardware/h200-driver580/runs/training/) as a replayable machine and recording.

Ground truth, copied into tests/data/h200-training/: ``leak.py`` (leak.py.txt) kept 2 GiB more per step at a steady
4 steps/s under ``python -m gpudiag.track`` until CUDA ran out of memory at step 69; ``run.jsonl`` is
the ``memory --watch --json --log`` beside it (a sample every 0.5 s, the tracker publishing every 2 s);
the ``gpudiag.oom/1`` file is the allocator's OOM observer's, with the tracker's step records 6-69 and
its publication times.

Every frame here is one sample of that watch, NVML's figures as the watch read them; its tracker entry
is the publication that sample saw (the allocator's figures as published, the publication's time from
the post-mortem's ``recent``, its step records from the post-mortem's, as many as the tracker had by
then). Derived, not recorded: the times of the publications after the OOM (every 2 s, as before it;
their figures are the watch's) and the step records before step 6 (the tracker keeps 64; none are
made up). The frames run from the first sample that lists the process to the last, because a
recording cannot add or remove one.

    python -m tests.h200_training_run   # rewrite tests/machines/h200-training-leak{.json,.recording.jsonl}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "h200-training"
RUN = DATA / "run.jsonl"
OOM = DATA / "gpudiag-oom-456-20261128-065133-1.json"
SNAPSHOT = ROOT / "tests" / "machines" / "h200-training-leak.json"
RECORDING = SNAPSHOT.with_suffix(".recording.jsonl")
PID = 456
INTERVAL = 2.0
DEVICE_KEYS = (
    "allocated_bytes",
    "reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "alloc_retries",
    "ooms",
    "active_bytes",
    "inactive_split_bytes",
    "segments",
)
DESCRIPTION = (
    "One H200 (driver 580) running leak.py under gpudiag.track: 2 GiB more per step at 4 steps/s until CUDA "
    "ran out of memory at step 69; NVML read every 0.5 s, the tracker publishing every 2 s "
    "(tests/h200_training_run.py)."
)


def _samples() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RUN.read_text().splitlines() if line.strip()]


def _publications(oom: dict[str, Any]) -> dict[int, float]:
    """The time of each publication before the OOM, by its allocated bytes (distinct: the program grew
    between any two)."""
    return {int(r[2]): float(r[0]) for r in oom["recent"]}


def _entry(
    oom: dict[str, Any], torch: dict[str, Any], steps: dict[str, Any], at: float, after: list[list[Any]]
) -> dict[str, Any]:
    device = oom["devices"][0]
    count = int(steps["count"])
    records = [r for r in oom["steps"]["records"] if r[0] <= count][-64:]
    # The publications before this one (the tracker's entry holds them, not itself).
    recent = [r for r in [*oom["recent"], *after] if r[0] < at]
    return {
        "schema": "gpudiag.track/1",
        "pid": PID,
        "ppid": None,
        "start_ticks": None,
        "pid_namespace": None,
        "command": oom["command"],
        "torch_version": oom["torch_version"],
        "interval_s": INTERVAL,
        "updated_at": at,
        "devices": [
            {
                "torch_index": 0,
                "uuid": device["uuid"],
                "pci_bus_id": device["pci_bus_id"],
                "name": device["name"],
                **{k: torch[k] for k in DEVICE_KEYS},
            }
        ],
        "rank": None,
        "local_rank": None,
        "world_size": None,
        "job": None,
        "alloc_conf": None,
        "steps": {"count": count, "first_at": oom["steps"]["first_at"], "peaks": "running", "records": records},
        "recent": recent,
        "oom_reports": [str(OOM.relative_to(ROOT))] if torch["ooms"] else [],
        "oom_observer": True,
    }


def machine(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The H200's snapshot from its captures, with this run's GPU identity and process."""
    base = json.loads((DATA / "snapshot-busy.json").read_text())  # captured on an H200, driver 580
    first = next(s for s in samples if s["processes"])
    gpu, proc = first["gpus"][0], first["processes"][0]
    base["description"] = DESCRIPTION
    base["collected_at"] = first["timestamp"]
    g = base["gpus"][0]
    g["uuid"], g["pci_bus_id"] = gpu["uuid"], "00000000:00:06.0"
    g["memory"] = {
        "total_bytes": gpu["total_bytes"],
        "used_bytes": gpu["used_bytes"],
        "free_bytes": gpu["free_bytes"],
        "reserved_bytes": gpu["driver_reserved_bytes"],
    }
    host = {"state": "found", "user": proc["user"], "name": "python3", "command": proc["command"]}
    g["processes"] = [
        {
            "pid": PID,
            "kind": "C",
            "used_memory_bytes": proc["used_bytes"],
            "host": host,
            "gpu_instance_id": None,
            "compute_instance_id": None,
        }
    ]
    return base


def recording(samples: list[dict[str, Any]]) -> list[str]:
    oom = json.loads(OOM.read_text())
    published = _publications(oom)
    listed = [s for s in samples if any(p["pid"] == PID for p in s["processes"])]
    started = listed[0]["timestamp"]
    lines = [json.dumps({"schema": "gpudiag.recording/1", "started_at": started, "description": DESCRIPTION})]
    last_at = max(published.values())
    after: list[list[Any]] = []  # the publications after the OOM, as the tracker's ``recent`` holds them
    for s in listed:
        p = next(p for p in s["processes"] if p["pid"] == PID)
        track = []
        torch, steps = p.get("torch"), p.get("steps")
        if torch and steps:
            allocated = int(torch["allocated_bytes"])
            at = published.get(allocated)
            if at is None:  # after the OOM: the tracker went on publishing every 2 s, as before it
                at = last_at + INTERVAL * ((s["timestamp"] - last_at) // INTERVAL)
                if not after or after[-1][0] < at:
                    after.append([at, 0, allocated, int(torch["reserved_bytes"]), int(torch["peak_allocated_bytes"])])
            track.append(_entry(oom, torch, steps, at, after))
        frame = {
            "at": round(s["timestamp"] - started, 6),
            "gpus": [
                {"index": g["index"], "used_bytes": g["used_bytes"], "utilization_percent": g["utilization_percent"]}
                for g in s["gpus"]
            ],
            "processes": [{"gpu_index": p["gpu_index"], "pid": PID, "used_bytes": p["used_bytes"]}],
            "track": track,
        }
        lines.append(json.dumps(frame, separators=(",", ":")))
    return lines


def files() -> dict[Path, str]:
    samples = _samples()
    return {
        SNAPSHOT: json.dumps(machine(samples), indent=1) + "\n",
        RECORDING: "\n".join(recording(samples)) + "\n",
    }


def main() -> int:
    for path, text in files().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
