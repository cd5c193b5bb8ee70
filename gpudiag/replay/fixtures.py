"""Whole-machine fixture files: loading, validation and the shipped examples.

A fixture is a machine snapshot (``gpudiag snapshot`` output) that may also use two
conveniences for hand-written files: ``gpu_defaults``, merged under every GPU entry, and
a lost/failed GPU written as just ``{"index", "state", "state_detail"}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.model import MACHINE_SCHEMA, GpuState, Machine
from gpudiag.probe.nvml import failed_gpu
from gpudiag.serialize import SchemaError, from_data, to_data

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "machines"
_FIXTURE_ONLY_KEYS = {"description", "gpu_defaults"}


class FixtureError(UsageError):
    """A fixture or snapshot file cannot be used; the message says which and why."""


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.json"))


def resolve(spec: str) -> Path:
    """A shipped example's name, or a path to a snapshot file."""
    candidate = Path(spec).expanduser()
    if candidate.suffix == ".json" or candidate.exists() or "/" in spec:
        if not candidate.is_file():
            raise FixtureError(f"replay file not found: {spec}")
        return candidate
    example = EXAMPLES_DIR / f"{spec}.json"
    if not example.is_file():
        raise FixtureError(f"no example machine named {spec!r}; examples: {', '.join(example_names())}")
    return example


def load(spec: str) -> tuple[Machine, str]:
    """Load a machine from an example name or a file; also return its description."""
    path = resolve(spec)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise FixtureError(f"{path} is not valid JSON: {exc}") from None
    return machine_from_data(data, str(path)), str(data.get("description", "")) if isinstance(data, dict) else ""


def machine_from_data(data: Any, where: str = "fixture") -> Machine:
    if not isinstance(data, dict):
        raise FixtureError(f"{where}: expected a JSON object")
    schema = data.get("schema")
    if schema != MACHINE_SCHEMA:
        raise FixtureError(f"{where}: schema is {schema!r}, this gpudiag reads {MACHINE_SCHEMA!r}")
    body = {k: v for k, v in data.items() if k not in _FIXTURE_ONLY_KEYS}
    defaults = data.get("gpu_defaults", {})
    if not isinstance(defaults, dict):
        raise FixtureError(f"{where}: $.gpu_defaults: expected an object")
    body.setdefault("source", "fixture")
    body.setdefault("collected_at", 0.0)
    if "gpus" not in body:
        raise FixtureError(f"{where}: $: missing key 'gpus'")  # never read a typo as a GPU-less machine
    if not isinstance(body["gpus"], list):
        raise FixtureError(f"{where}: $.gpus: expected a list")
    failed: dict[int, tuple[GpuState, str]] = {}
    gpus = []
    for position, entry in enumerate(body["gpus"]):
        if not isinstance(entry, dict):
            raise FixtureError(f"{where}: $.gpus[{position}]: expected an object")
        if entry.get("index", position) != position:
            raise FixtureError(f"{where}: $.gpus[{position}]: index must equal its position (NVML order)")
        state = entry.get("state", "ok")
        if state != "ok" and set(entry) <= {"index", "state", "state_detail"}:
            try:
                failed[position] = (GpuState(state), str(entry.get("state_detail", "")))
            except ValueError:
                raise FixtureError(f"{where}: $.gpus[{position}].state: unknown state {state!r}") from None
            gpus.append(to_data(failed_gpu(position, *failed[position])))
            continue
        merged = _deep_merge(defaults, entry)
        merged.setdefault("index", position)
        gpus.append(merged)
    body["gpus"] = gpus
    try:
        return from_data(Machine, body)
    except SchemaError as exc:
        raise FixtureError(f"{where}: {exc}") from None


def _deep_merge(base: Any, override: Any) -> Any:
    # A missing-reading marker on either side is replaced whole, never merged with a value.
    if isinstance(base, dict) and isinstance(override, dict) and "unavailable" not in override | base:
        out = dict(base)
        for key, value in override.items():
            out[key] = _deep_merge(base[key], value) if key in base else value
        return out
    return override


def dump(machine: Machine, description: str = "") -> str:
    data = to_data(machine)
    if description:
        data = {"description": description, **data}
    return json.dumps(data, indent=2) + "\n"
