"""A `memory --watch --log` file read back as series over time, for `memory --plot`.

JSON Lines (``gpudiag.memory/2`` samples) carry everything: per GPU, per process, the tracker's
split, steps, OOMs and retries. CSV carries one row per GPU per sample (the per-GPU series only).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.files import read_input


@dataclass
class Series:
    label: str
    times: list[float] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)  # name -> one value per time

    def add(self, at: float, **values: float | None) -> None:
        self.times.append(at)
        for name, value in values.items():
            self.values.setdefault(name, [None] * (len(self.times) - 1)).append(value)
        for column in self.values.values():
            if len(column) < len(self.times):
                column.append(None)


@dataclass
class Event:
    at: float
    kind: str  # "oom", "retry", "start", "exit"
    text: str


@dataclass
class Run:
    source: str
    gpus: dict[int, Series] = field(default_factory=dict)
    processes: dict[tuple[int, int], Series] = field(default_factory=dict)
    steps: dict[int, Series] = field(default_factory=dict)  # per PID: step count and rate, per publication
    events: list[Event] = field(default_factory=list)

    @property
    def start(self) -> float:
        times = [t for s in self.gpus.values() for t in s.times[:1]]
        return min(times) if times else 0.0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read(path: Path) -> Run:
    """Read a log; a usage error names the file and the line that is not a sample."""
    try:
        text = read_input(path, "--plot").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--plot {path}: cannot read it: {exc}") from None
    run = _read_csv(path, text) if path.suffix.lower() == ".csv" else _read_jsonl(path, text)
    if not run.gpus:
        raise UsageError(f"--plot {path}: no samples in it (a `gpudiag memory --log` file, .csv or .jsonl)")
    return run


def _read_csv(path: Path, text: str) -> Run:
    run = Run(str(path))
    rows = csv.DictReader(text.splitlines())
    if not rows.fieldnames or "timestamp" not in rows.fieldnames or "gpu" not in rows.fieldnames:
        raise UsageError(f"--plot {path}: not a `gpudiag memory --log` CSV (no timestamp, gpu header)")
    last: dict[tuple[int, str], float] = {}
    for n, row in enumerate(rows, start=2):
        try:
            at, gpu = float(row["timestamp"]), int(row["gpu"])
        except (TypeError, ValueError):
            raise UsageError(f"--plot {path}:{n}: not a sample row") from None

        def number(name: str, r: dict[str, str] = row) -> float | None:
            value = r.get(name) or ""
            try:
                return float(value)
            except ValueError:
                return None

        series = run.gpus.setdefault(gpu, Series(f"GPU {gpu}"))
        series.add(
            at,
            used=number("used_bytes"),
            total=number("total_bytes"),
            utilization=number("utilization_percent"),
            allocated=number("torch_allocated_bytes"),
            reserved=number("torch_reserved_bytes"),
        )
        for name, kind in (("torch_ooms", "oom"), ("torch_alloc_retries", "retry")):
            value = number(name)
            if value is not None and value > last.get((gpu, name), value):
                run.events.append(Event(at, kind, f"GPU {gpu}: {kind}"))
            if value is not None:
                last[(gpu, name)] = value
    return run


def _read_jsonl(path: Path, text: str) -> Run:
    run = Run(str(path))
    counters: dict[tuple[int, int, str], int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except (ValueError, RecursionError):
            raise UsageError(f"--plot {path}:{n}: not JSON (or nested too deeply)") from None
        if not isinstance(sample, dict) or not str(sample.get("schema", "")).startswith("gpudiag.memory/"):
            raise UsageError(f"--plot {path}:{n}: not a gpudiag.memory sample")
        _sample(run, sample, counters)
    return run


def _sample(run: Run, sample: dict[str, Any], counters: dict[tuple[int, int, str], int]) -> None:
    at = float(sample.get("timestamp") or 0.0)
    by_gpu: dict[int, list[dict[str, Any]]] = {}
    for p in sample.get("processes") or []:
        by_gpu.setdefault(p["gpu_index"], []).append(p)
    for g in sample.get("gpus") or []:
        tracked = [p["torch"] for p in by_gpu.get(g["index"], []) if p.get("torch")]
        run.gpus.setdefault(g["index"], Series(f"GPU {g['index']}")).add(
            at,
            used=_int(g.get("used_bytes")),
            total=_int(g.get("total_bytes")),
            utilization=_int(g.get("utilization_percent")),
            allocated=sum(t["allocated_bytes"] for t in tracked) if tracked else None,
            reserved=sum(t["reserved_bytes"] for t in tracked) if tracked else None,
            **_forecast(g.get("forecast")),
        )
    for p in sample.get("processes") or []:
        key = (p["gpu_index"], p["pid"])
        torch = p.get("torch") or {}
        command = p.get("command") if isinstance(p.get("command"), str) else ""
        if key not in run.processes:
            run.processes[key] = Series(f"PID {p['pid']} on GPU {p['gpu_index']} {short_command(command)}".rstrip())
            if sample.get("sample", 1) > 1:
                run.events.append(Event(at, "start", f"PID {p['pid']} started on GPU {p['gpu_index']}"))
        run.processes[key].add(
            at,
            used=_int(p.get("used_bytes")),
            allocated=torch.get("allocated_bytes"),
            reserved=torch.get("reserved_bytes"),
            **_forecast(p.get("forecast")),
        )
        for name, kind in (("ooms", "oom"), ("alloc_retries", "retry")):
            value = torch.get(name)
            if not isinstance(value, int):
                continue
            slot = (key[0], key[1], name)
            before = counters.get(slot)
            counters[slot] = value
            if before is not None and value > before:
                what = "out of memory" if kind == "oom" else f"{value - before} allocator retries"
                run.events.append(Event(at, kind, f"PID {p['pid']} on GPU {p['gpu_index']}: {what}"))
        steps = p.get("steps")
        if isinstance(steps, dict) and isinstance(steps.get("count"), int):
            _steps(run.steps.setdefault(p["pid"], Series(f"PID {p['pid']}")), steps, at)
    for e in sample.get("exited") or []:
        run.events.append(Event(at, "exit", f"PID {e['pid']} exited on GPU {e['gpu_index']}"))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _steps(series: Series, steps: dict[str, Any], at: float) -> None:
    """One point per publication of the tracker, at the time it recorded the step (``last_step_at``;
    a log from before it has the sample's time), with the rate it measured between its step times:
    a watch sees each publication several times, and the count moves only when the tracker publishes."""
    counts = series.values.get("step", [])
    if counts and counts[-1] == steps["count"]:
        return  # the publication already drawn
    when = _number(steps.get("last_step_at"))
    series.add(when if when is not None else at, step=steps["count"], rate=_number(steps.get("rate_per_s")))


def _forecast(found: Any) -> dict[str, float | None]:
    """A sample's forecast as three values of its series (None where it forecast nothing)."""
    if not isinstance(found, dict):
        return {"full_in_s": None, "level": None, "limit": None}
    return {
        "full_in_s": _number(found.get("full_in_s")),
        "level": _number(found.get("level_bytes")),
        "limit": _number(found.get("limit_bytes")),
    }


COMMAND_CHARS = 40


def short_command(command: str, limit: int = COMMAND_CHARS) -> str:
    """A command line for a legend: whole words only, a long path as its last part (``…/train.py``),
    and ``…`` where words were left out."""
    words = [
        w if len(w) <= limit // 2 or "/" not in w.rstrip("/") else "…/" + w.rstrip("/").rsplit("/", 1)[1]
        for w in command.split()
    ]
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > limit:
            return (out + " …").strip() if out else word[: limit - 1] + "…"
        out = f"{out} {word}" if out else word
    return out
