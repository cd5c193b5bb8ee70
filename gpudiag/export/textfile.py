"""One-shot outputs for node agents: node_exporter's textfile collector and node-problem-detector.

``.prom`` files are written the way node_exporter asks: to a temporary name in the same
directory (not ending in ``.prom``), then renamed, so the collector never reads half a file
(:func:`gpudiag.files.write_atomic`: also fsynced, and nothing left behind on a full disk or a signal).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpudiag.checks import CheckResult, Status, nothing_checked
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.export.exposition import FamilyErrors, printable_families
from gpudiag.files import write_atomic
from gpudiag.memory.view import MemoryView
from gpudiag.model import Machine, NvmlStatus

MEMORY_FILE = "gpudiag_memory.prom"
CHECK_FILE = "gpudiag_check.prom"
NPD_WIDTH = 80  # node-problem-detector keeps one line of a plugin's output, at most 80 bytes


class _Fixed:
    """A collector that yields families built beforehand."""

    def __init__(self, families: Sequence[Any]) -> None:
        self._families = families

    def collect(self) -> Iterable[Any]:
        return self._families


def write(directory: Path, name: str, families: Sequence[Any], errors: FamilyErrors | None = None) -> Path:
    """Write ``families`` to ``directory/name`` atomically; a bad directory is one clear line.
    Label values are written printable (:func:`gpudiag.export.exposition.printable_families`); a
    family that cannot be written is left out and said on stderr (the file has no count of them:
    node_exporter refuses a family that two files both hold)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.openmetrics.exposition import ALLOWUTF8

    if not directory.is_dir():
        raise GpudiagError(f"--textfile {directory}: not a directory", ExitCode.USAGE)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(list(printable_families(families, errors or FamilyErrors()))))
    path = directory / name
    write_atomic(path, generate_latest(registry, ALLOWUTF8))  # as prometheus-client's write_to_textfile
    return path


def stamp(name: str, doc: str, when: float | None = None) -> Any:
    """A ``*_timestamp_seconds`` gauge: alert when a cron/Prolog run stops refreshing its file."""
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, doc)
    family.add_metric([], time.time() if when is None else when)
    return family


def write_memory(directory: Path, view: MemoryView, live: bool) -> Path:
    """``memory --textfile``: the native memory and per-process families, owners from /proc when live."""
    from gpudiag.export import metrics_native
    from gpudiag.export.attribution import ProcReader
    from gpudiag.export.exporter import Attributor

    errors = FamilyErrors()
    try:
        owners = Attributor(ProcReader() if live else None, None).owners(view)
    except Exception as error:  # a process's /proc files: the families go without owner labels
        errors.add("pod and job labels (of gpudiag_process_*)", error)
        owners = {}
    families = metrics_native.families(view, owners=owners, errors=errors)
    families.append(stamp("gpudiag_memory_timestamp_seconds", "When `gpudiag memory` last wrote this file"))
    return write(directory, MEMORY_FILE, families, errors)


def write_check(directory: Path, results: Sequence[CheckResult], machine: Machine, code: int) -> Path:
    """``check --textfile``: every check's verdict, the exit code and when."""
    uuids = {g.index: g.uuid.value for g in machine.gpus if g.uuid.value is not None}
    return write(directory, CHECK_FILE, check_families(results, uuids, code))


def check_families(results: Sequence[CheckResult], uuids: dict[int, str], code: int) -> list[Any]:
    from prometheus_client.core import GaugeMetricFamily

    from gpudiag.export.metrics_native import check_families as verdicts

    exit_code = GaugeMetricFamily("gpudiag_check_exit_code", "Exit code of the last `gpudiag check` (0 ready)")
    exit_code.add_metric([], code)
    return [
        *verdicts(results, uuids),
        exit_code,
        stamp("gpudiag_check_timestamp_seconds", "When `gpudiag check` last wrote this file"),
    ]


NO_GPU = "unknown: no NVIDIA GPU on this node"


def npd_verdict(
    results: Sequence[CheckResult], strict: bool, notes: Sequence[str], no_gpu: bool = False
) -> tuple[str, int]:
    """node-problem-detector's custom-plugin answer: (one line of at most 80 characters, exit code).

    Exit 0 OK, 1 a problem (a failed check, or a warning with --strict), 2 unknown (a check
    could not run and nothing failed, every check was skipped, or ``no_gpu``: the node has no
    NVIDIA GPU, so there is nothing to judge). The line names checks and GPUs, never counts or
    readings: NPD updates the condition's message when it changes, which should be when the problem does.
    """
    if no_gpu:
        return NO_GPU, 2
    bad = [r for r in results if r.status is Status.FAIL or (strict and r.status is Status.WARN)]
    if bad:
        names: dict[str, list[str]] = {}
        for r in bad:
            targets = names.setdefault(r.id, [])
            if r.target.startswith("GPU "):
                targets.append(r.target[4:])
        parts = [f"{cid}(GPU {','.join(t)})" if t else cid for cid, t in names.items()]
        return _fit("failed: " + " ".join(parts)), 1
    if notes:
        return _fit(f"unknown: could not run: {notes[0]}"), 2
    if nothing_checked(results):
        return "unknown: nothing checked: every selected check was skipped", 2
    return _fit(f"ok: {sum(r.status is Status.PASS for r in results)} checks passed"), 0


def _fit(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= NPD_WIDTH else line[: NPD_WIDTH - 3] + "..."


def gpu_absent(machine: Machine, pci_gpus: int | None) -> bool:
    """Whether this node has no NVIDIA GPU: NVML sees none (or cannot start) and neither does the
    PCI bus. A node whose GPUs NVML cannot reach (no driver, a lost GPU) is not such a node."""
    return (machine.nvml.status is not NvmlStatus.OK or not machine.gpus) and pci_gpus == 0
