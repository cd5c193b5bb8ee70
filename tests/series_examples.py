"""The series recorded beside the example machines (gpudiag/machines/series/), written by one script.

    python -m tests.series_examples            # rewrite gpudiag/machines/series/*.json
    python -m tests.series_examples --check    # what the tests do: exit 1 if a file is stale

Four are **captured**: ``h200-driver580-idle`` / ``-busy`` from the H200's capture (docs/hardware/
h200-driver580: idle, the snapshot's moment and three dmon samples; busy, its snapshot's moment and
nvidia-smi's and pmon's); ``h100-driver580-idle`` holds the two samples `nvidia-smi dmon` printed on the real
H100 (docs/hardware/h100-80gb-hbm3-driver580/nvidia-smi-dmon.txt, whole watts as printed) and no process,
as `nvidia-smi pmon` printed (nvidia-smi-pmon-busy.txt); ``h100-driver580-busy`` holds the two busy
moments captured there: its own snapshot's (nvidia-smi-q-busy.xml) and the one nvidia-smi, gpustat and
nvitop printed (nvidia-smi-busy.txt, gpustat-json-busy.json, nvitop-1-busy.txt).

The others are **illustrative**, marked so in each file: four samples a second apart, derived from the
example's own snapshot by the rules below, so that `dmon`, `pmon` and `stat --watch` show a machine that
moves as such a machine does (a busy GPU's load and power wander, an idle one's barely; a GPU whose
snapshot shows a power cap spends most of each second capped, a thermally slowed one keeps slowing; a
leaking trainer's memory grows), never the snapshot repeated.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpudiag.model import Gpu, GpuState, Machine
from gpudiag.readings import clock_event_bits
from gpudiag.replay import fixtures
from gpudiag.replay.series import SCHEMA, SERIES_DIR
from gpudiag.serialize import to_data

CAPTURE = "docs/hardware/h100-80gb-hbm3-driver580"
CAPTURE_H200 = "docs/hardware/h200-driver580"
SAMPLES = 4
MIB = 1024 * 1024

# Typical clocks (memory, graphics busy, graphics idle; MHz) where a snapshot holds none, by board name.
CLOCKS = (
    ("H100", (2619, 1980, 345)),
    ("A100", (1593, 1410, 210)),
    ("V100", (877, 1530, 135)),
    ("P100", (715, 1328, 405)),
    ("T4", (5000, 1590, 300)),
    ("L4", (6251, 2040, 210)),
    ("A40", (7251, 1740, 210)),
    ("A10G", (6251, 1710, 210)),
    ("RTX A6000", (8001, 1800, 210)),
    ("RTX 5090", (14001, 2407, 210)),
    ("RTX 3060", (7001, 1282, 210)),
    ("RTX 4000", (6500, 1545, 300)),
    ("GTX 1050", (3504, 1455, 139)),
)
# Boards whose memory (HBM) reports a temperature; GDDR boards answer "not supported", as NVML does.
HBM = ("H100", "A100", "V100", "P100")
# How a busy and an idle GPU wander, sample by sample: utilization points, watts per 100 W drawn, degrees.
BUSY = ((0, -3, 2, -1), (0, -2.1, 1.4, -0.6), (0, 0, 1, 1))
IDLE = ((0, 0, 1, 0), (0, 0.4, -0.3, 0.1), (0, 0, 0, 1))
LEAK_PER_SECOND = 4 * 48 * MIB  # h100-leak-per-step: 48 MiB more per step, 4 steps/s
_COUNTER = "details.clocks.event_reason_counters_us[{}]"


def captured() -> dict[str, dict[str, Any]]:
    idle_sample = {
        "power_draw_w": 71.0,
        "temperature_c": 34,
        "details.temperatures.memory_c": 37,
        "utilization": {"gpu_percent": 0, "memory_percent": 0},
        **{f"details.codecs.{c}_percent": 0 for c in ("encoder", "decoder", "jpeg", "ofa")},
        "clock_memory_mhz": 2619,
        "clock_graphics_mhz": 345,
    }
    idle = {
        "schema": SCHEMA,
        "description": "One idle H100 80GB HBM3, driver 580.159.04: two samples of nvidia-smi dmon, no process.",
        "grounding": "captured",
        "source": f"{CAPTURE}/nvidia-smi-dmon.txt (both samples, as nvidia-smi printed them: whole watts) and "
        f"{CAPTURE}/nvidia-smi-pmon-busy.txt (no process in either sample)",
        "started_at": 1795391171.0,
        "interval_s": 1.0,
        "gpus": {"0": [idle_sample, {**idle_sample, "details.temperatures.memory_c": 36}]},
    }
    no_sample = {"unavailable": "not_found", "detail": "no process ran on the GPU since the last sample"}
    unknown = {"unavailable": "unavailable", "detail": "not in the capture"}
    busy = {
        "schema": SCHEMA,
        "description": "One H100 80GB HBM3, driver 580.159.04, with a PyTorch process holding 12806 MiB: the two "
        "busy moments captured.",
        "grounding": "captured",
        "source": f"sample 0: the example's own snapshot ({CAPTURE}/gpudiag-snapshot-busy.json, "
        f"nvidia-smi-q-busy.xml); sample 1: the busy moment nvidia-smi, gpustat and nvitop printed "
        f"({CAPTURE}/nvidia-smi-busy.txt: 37C, 119W, 0%; gpustat-json-busy.json; nvitop-1-busy.txt: the "
        "workload's process at 0 %SM, 0 %GMBW, clocks 1980 / 2619 MHz) in another run of the same workload",
        "started_at": 1795392462.0,
        "interval_s": 1.0,
        "gpus": {
            "0": [
                {
                    "power_draw_w": 118.492,
                    "temperature_c": 35,
                    "details.temperatures.memory_c": 36,
                    "utilization": {"gpu_percent": 0, "memory_percent": 0},
                    "clock_memory_mhz": 2619,
                    "clock_graphics_mhz": 1980,
                    "details.pcie.tx_kbps": 1686,
                    "details.pcie.rx_kbps": 403,
                    "details.process_load": no_sample,
                },
                {
                    "power_draw_w": 119.0,
                    "temperature_c": 37,
                    "utilization": {"gpu_percent": 0, "memory_percent": 0},
                    "details.process_load": [
                        {
                            "pid": 485,
                            "sm_percent": 0,
                            "memory_percent": 0,
                            "encoder_percent": 0,
                            "decoder_percent": 0,
                            "sampled_at_us": 1795392463000000,
                            "cpu_percent": unknown,
                            "rss_bytes": unknown,
                            "started_at": unknown,
                        }
                    ],
                },
            ]
        },
    }
    return {"h100-driver580-idle": idle, "h100-driver580-busy": busy, **captured_h200()}


def captured_h200() -> dict[str, dict[str, Any]]:
    """The H200's (docs/hardware/h200-driver580): idle, its snapshot's moment and its three dmon samples;
    busy, its own snapshot's moment and the one nvidia-smi and its pmon printed."""
    idle_sample = {
        "power_draw_w": 80.0,
        "temperature_c": 33,
        "details.temperatures.memory_c": 37,
        "utilization": {"gpu_percent": 0, "memory_percent": 0},
        **{f"details.codecs.{c}_percent": 0 for c in ("encoder", "decoder", "jpeg", "ofa")},
        "clock_memory_mhz": 3201,
        "clock_graphics_mhz": 345,
    }
    idle = {
        "schema": SCHEMA,
        "description": "One idle H200, driver 580.159.04: its snapshot's moment, then three samples of "
        "nvidia-smi dmon, no process.",
        "grounding": "captured",
        "source": f"sample 0: the example's own snapshot ({CAPTURE_H200}/gpudiag-snapshot-idle.json: 80.865 W); "
        f"samples 1-3: {CAPTURE_H200}/nvidia-smi-dmon.txt (as nvidia-smi printed them: whole watts); no process "
        "in either",
        "started_at": 1795845499.0,
        "interval_s": 1.0,
        "gpus": {"0": [{**idle_sample, "power_draw_w": 80.865}, idle_sample, dict(idle_sample), dict(idle_sample)]},
    }
    unknown = {"unavailable": "unavailable", "detail": "not in the capture"}
    busy = {
        "schema": SCHEMA,
        "description": "One H200, driver 580.159.04, with a PyTorch process holding 12806 MiB: the two busy "
        "moments captured.",
        "grounding": "captured",
        "source": f"sample 0: the example's own snapshot ({CAPTURE_H200}/gpudiag-snapshot-busy.json, "
        "nvidia-smi-q-busy.xml: 789 / 409 KB/s PCIe); sample 1: the busy moment nvidia-smi and its pmon printed "
        f"({CAPTURE_H200}/nvidia-smi-busy.txt: 34C, 121W, 0%; nvidia-smi-pmon-busy.txt: PID 3835 at 0 %SM, 0 %MEM)",
        "started_at": 1795845536.0,
        "interval_s": 1.0,
        "gpus": {
            "0": [
                {
                    "power_draw_w": 121.544,
                    "temperature_c": 34,
                    "details.temperatures.memory_c": 37,
                    "utilization": {"gpu_percent": 0, "memory_percent": 0},
                    "clock_memory_mhz": 3201,
                    "clock_graphics_mhz": 1980,
                    "details.pcie.tx_kbps": 789,
                    "details.pcie.rx_kbps": 409,
                },
                {
                    "power_draw_w": 121.0,
                    "temperature_c": 34,
                    "utilization": {"gpu_percent": 0, "memory_percent": 0},
                    "details.process_load": [
                        {
                            "pid": 3835,
                            "sm_percent": 0,
                            "memory_percent": 0,
                            "encoder_percent": 0,
                            "decoder_percent": 0,
                            "sampled_at_us": 1795845537000000,
                            "cpu_percent": unknown,
                            "rss_bytes": unknown,
                            "started_at": unknown,
                        }
                    ],
                },
            ]
        },
    }
    return {"h200-driver580-idle": idle, "h200-driver580-busy": busy}


def _clocks(gpu: Gpu) -> tuple[int, int, int] | None:
    name = gpu.name.get("")
    return next((clocks for board, clocks in CLOCKS if board in name), None)


def _samples(name: str, machine: Machine, gpu: Gpu) -> list[dict[str, Any]]:
    util = gpu.utilization.value
    busy = util is not None and util.gpu_percent >= 20
    points, watts, degrees = BUSY if busy else IDLE
    events = gpu.clock_event_reasons.get(0)
    capped = bool(events & clock_event_bits("SwPowerCap"))
    thermal = bool(events & clock_event_bits("SwThermalSlowdown", "HwThermalSlowdown"))
    clocks = _clocks(gpu)
    hbm = any(board in gpu.name.get("") for board in HBM)
    procs = gpu.processes.get(())
    used = sum(p.used_memory_bytes.get(0) for p in procs) or 1
    out = []
    for n in range(SAMPLES):
        sample: dict[str, Any] = {}
        power = gpu.power_draw_w.value
        if power is not None:
            sample["power_draw_w"] = round(max(1.0, power + watts[n] * power / 100), 3)
        temp = gpu.temperature_c.value
        if temp is not None:
            sample["temperature_c"] = temp + degrees[n]
            sample["details.temperatures.memory_c"] = temp + 3 + degrees[n] if hbm else {"unavailable": "not_supported"}
        gpu_pct = None
        if util is not None:
            gpu_pct = max(0, min(100, util.gpu_percent + points[n]))
            mem_pct = max(0, min(100, util.memory_percent + (points[n] * 2) // 3))
            sample["utilization"] = {"gpu_percent": gpu_pct, "memory_percent": mem_pct}
        for codec in ("encoder", "decoder"):
            sample[f"details.codecs.{codec}_percent"] = 0
        if clocks is not None and gpu.clock_memory_mhz.reason is not None:
            sample["clock_memory_mhz"] = clocks[0]
            sample["clock_graphics_mhz"] = clocks[1] if busy else clocks[2]
        sample[_COUNTER.format("sw_power_cap")] = n * 600_000 if capped else 0  # 60 % of each second capped
        for counter in ("sw_thermal_slowdown", "hw_thermal_slowdown"):
            sample[_COUNTER.format(counter)] = n * 250_000 if thermal else 0
        load = gpu_pct if gpu_pct is not None else 0
        sample["details.pcie.tx_kbps"] = 400 + 150 * load + 37 * n
        sample["details.pcie.rx_kbps"] = 300 + 90 * load + 23 * n
        memory = gpu.memory.value
        if name == "h100-leak-per-step" and memory is not None:
            grown = min(memory.free_bytes, n * LEAK_PER_SECOND)
            sample["memory"] = to_data(
                type(memory)(
                    memory.total_bytes, memory.used_bytes + grown, memory.free_bytes - grown, memory.reserved_bytes
                )
            )
        if procs:
            sample["details.process_load"] = [
                {
                    "pid": p.pid,
                    "sm_percent": round(load * p.used_memory_bytes.get(0) / used),
                    "memory_percent": round(
                        (sample.get("utilization") or {}).get("memory_percent", 0) * p.used_memory_bytes.get(0) / used
                    ),
                    "encoder_percent": 0,
                    "decoder_percent": 0,
                    "sampled_at_us": int((machine.collected_at + n) * 1e6),
                    "cpu_percent": {"unavailable": "unavailable", "detail": "illustrative"},
                    "rss_bytes": {"unavailable": "unavailable", "detail": "illustrative"},
                    "started_at": {"unavailable": "unavailable", "detail": "illustrative"},
                }
                for p in procs
            ]
        out.append(sample)
    return out


def illustrative(name: str) -> dict[str, Any] | None:
    machine, description = fixtures.load(name)
    usable = [g for g in machine.gpus if g.state is GpuState.OK]
    if not usable:
        return None  # no GPU to sample: the views say so, as nvidia-smi does
    return {
        "schema": SCHEMA,
        "description": description,
        "grounding": "illustrative",
        "source": "derived from this example's snapshot by tests/series_examples.py (not measured)",
        "started_at": machine.collected_at,
        "interval_s": 1.0,
        "gpus": {str(g.index): _samples(name, machine, g) for g in usable},
    }


def documents() -> dict[str, dict[str, Any]]:
    out = captured()
    for name in fixtures.example_names():
        if name not in out:
            found = illustrative(name)
            if found is not None:
                out[name] = found
    return out


def text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=True) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    wanted = {SERIES_DIR / f"{name}.json": text(doc) for name, doc in documents().items()}
    extra = set(SERIES_DIR.glob("*.json")) - set(wanted) if SERIES_DIR.is_dir() else set()
    for path, body in wanted.items():
        if not path.is_file() or path.read_text() != body:
            stale.append(path)
            if "--check" not in argv:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body)
    for path in sorted(extra):
        stale.append(path)
        if "--check" not in argv:
            path.unlink()
    for path in stale:
        print(f"{'stale' if '--check' in argv else 'wrote'} {Path(path).name}")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
