"""Node output files for the fleet tests: real `check --json` / `snapshot` / `memory --json` output
of example machines (renamed per node), and bench-transfer results with chosen rates."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner


@functools.cache
def _output(machine: str, *args: str) -> str:
    from gpudiag.cli.app import app

    result = CliRunner().invoke(app, ["--replay", machine, *args])
    assert result.stdout.lstrip().startswith("{"), result.stdout + result.stderr
    return result.stdout


def check(machine: str, node: str, *options: str) -> dict[str, Any]:
    """`gpudiag check --json --no-torch [OPTIONS]` of an example machine, as Slurm node ``node`` would send it."""
    data: dict[str, Any] = json.loads(_output(machine, "check", "--json", "--no-torch", *options))
    data["slurm_node"] = node
    return data


def snapshot(machine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_output(machine, "snapshot"))
    return data


def memory(machine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_output(machine, "memory", "--json"))
    return data


def bench(node: str, h2d: float, d2h: float = 26.0, d2d: float = 2000.0, gpus: int = 2) -> dict[str, Any]:
    """A `bench-transfer --json` document (the fields `report` reads, as bench_view writes them); GB/s."""
    results = []
    for device in range(gpus):
        for mode, rate in (("h2d_pinned", h2d), ("d2h_pinned", d2h), ("d2d", d2d), ("h2d_pageable", h2d / 2)):
            for size, scale in ((64 << 20, 0.9), (256 << 20, 1.0)):  # the largest size is the one compared
                results.append(
                    {"mode": mode, "cuda_device": device, "size_bytes": size, "median_bytes_per_s": rate * scale * 1e9}
                )
    return {
        "schema": "gpudiag.bench-transfer/1",
        "complete": True,
        "torch": "2.5.1+cu124",
        "devices": [{"cuda_device": d, "name": "NVIDIA H100 80GB HBM3"} for d in range(gpus)],
        "peer_access": [],
        "results": results,
        "findings": [],
        "notes": [],
        "host": node,
        "slurm_node": node,
    }


def write(directory: Path, name: str, data: dict[str, Any] | str | bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


EXAMPLE_FLEET = "docs/samples/fleet"  # the README's and docs/commands/report.md's example fleet


def example_fleet(directory: Path) -> None:
    """The docs' example fleet, ``gpu[1-8]``: three healthy nodes, one with a GPU to reset, one that
    failed only the job's requirement, one that sent nothing, one killed while writing (empty file),
    one whose file holds two runs appended with ``>>``. Regenerate: ``python -m tests.fleet_files``."""
    nodes = directory / "nodes"
    if nodes.exists():
        for old in nodes.iterdir():
            old.unlink()
    for node in ("gpu1", "gpu3", "gpu4"):
        write(nodes, f"{node}.json", check("h100x8-healthy", node))
    write(nodes, "gpu2.json", check("a100-ecc-errors", "gpu2"))
    write(nodes, "gpu8.json", check("h100x8-healthy", "gpu8", "--require-driver", "555"))
    write(nodes, "gpu6.json", b"")
    twice = json.dumps(check("h100x8-healthy", "gpu7"), indent=2) + "\n"
    write(nodes, "gpu7.json", twice + json.dumps(check("a100-ecc-errors", "gpu7"), indent=2) + "\n")


if __name__ == "__main__":
    example_fleet(Path(__file__).resolve().parent.parent / EXAMPLE_FLEET)
