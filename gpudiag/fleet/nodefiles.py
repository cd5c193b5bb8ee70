"""Read one node's output file (`check --json`, `snapshot`, `bench-transfer --json`, `memory --json`).

Only what a fleet report compares is kept: the verdict and failures, versions, GPU models,
and a few figures. A file that is empty, truncated, not JSON, of another schema or of the
wrong shape becomes a :class:`NodeFile` with a ``problem``: that node's trouble, never ours.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from gpudiag.fleet.faults import remedy


class Kind(str, enum.Enum):
    CHECK = "check"
    SNAPSHOT = "snapshot"
    BENCH = "bench-transfer"
    MEMORY = "memory"


SCHEMAS = {
    "gpudiag.check/1": Kind.CHECK,
    "gpudiag.machine/1": Kind.SNAPSHOT,
    "gpudiag.bench-transfer/1": Kind.BENCH,
    "gpudiag.memory/2": Kind.MEMORY,
    "gpudiag.memory/1": Kind.MEMORY,  # before 0.2.0: a missing reading was null
}

# Version fields compared across the fleet, under the names `check --json` gives them.
VERSION_FIELDS = ("Driver", "CUDA (driver max)", "torch", "torch CUDA build", "cuDNN", "NCCL")

# Bandwidth figures: per direction, the modes to take, best first (the pinned blocking copy is
# the one every run measures by default).
_BANDWIDTH_MODES = {
    "h2d_gbps": ("h2d_pinned", "h2d_pinned_async", "h2d_pageable"),
    "d2h_gbps": ("d2h_pinned", "d2h_pinned_async", "d2h_pageable"),
    "d2d_gbps": ("d2d",),
}

MAX_BYTES = 64 * 1024 * 1024  # a node file larger than this is not one of ours


@dataclass(frozen=True)
class Failure:
    check: str  # check id, or "gpudiag.could_not_run" / "bench-transfer"
    target: str  # "GPU 3", "" for the node
    finding: str


@dataclass(frozen=True)
class NodeFile:
    path: str
    host: str  # the node: Slurm's name when recorded, else the hostname, else the file's name
    kind: Kind | None  # None: unreadable
    problem: str = ""  # why the file could not be read ("" when it could)
    verdict: str | None = None  # `check`'s verdict: READY, NOT READY, UNKNOWN
    failures: tuple[Failure, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    gpus: tuple[str, ...] = ()  # GPU model per GPU, in index order
    metrics: dict[str, float] = field(default_factory=dict)
    remedy: str = ""  # "GPU reset needed" etc. (see gpudiag.fleet.faults)
    checks: tuple[tuple[str, str], ...] = ()  # (check id, status) of every result, only when asked (JUnit)


def file_host(path: str) -> str:
    """The node a file is named after: ``nodes/gpu017.json`` and ``gpu017.check.json`` are gpu017."""
    return os.path.basename(path).split(".", 1)[0] or path


def read(path: str, keep_checks: bool = False) -> NodeFile:
    """One node file, never raising for its content (an OSError reading it is a problem too)."""
    try:  # os-level calls: a file object per file costs more than the syscalls, ×10,000
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            raw = _read_all(fd, min(size, MAX_BYTES) + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        return NodeFile(path, file_host(path), None, f"cannot read: {exc.strerror or exc}")
    return parse(raw, path, keep_checks)


def _read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes (the size fstat gave, + 1 to notice a file that grew)."""
    chunks = []
    while limit > 0:
        chunk = os.read(fd, limit)
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse(raw: bytes, path: str, keep_checks: bool = False) -> NodeFile:
    host = file_host(path)
    if len(raw) > MAX_BYTES:
        return NodeFile(path, host, None, f"larger than {MAX_BYTES // 2**20} MiB: not a gpudiag output")
    if not raw.strip():
        return NodeFile(path, host, None, "empty file (the node wrote nothing: crashed, killed or timed out?)")
    try:
        doc = _DECODER.decode(raw)
    except msgspec.DecodeError:
        # Not JSON, or JSON with text after it (Slurm's --output gathers stderr too, unless --error splits it).
        text = _leading_json(raw)
        if text is None:
            return NodeFile(path, host, None, _not_json(raw))
        raw = text
        try:
            doc = _DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return _explain(raw, path, host, exc)
    except msgspec.ValidationError as exc:
        return _explain(raw, path, host, exc)
    try:
        node: NodeFile = _READERS[type(doc)](doc, path, host)
        if keep_checks and isinstance(doc, _CheckFile):
            node = replace(node, checks=tuple((c.id, c.status) for c in _CHECKS.decode(doc.checks)))
    except msgspec.ValidationError as exc:  # in the list of checks
        return _explain(raw, path, host, f"{exc} in `checks`")
    return node


def _explain(raw: bytes, path: str, host: str, exc: Exception | str) -> NodeFile:
    """Why a JSON document is not one we read (the error path only: parse it again, plainly)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return NodeFile(path, host, None, f"malformed JSON: {exc}")
    if not isinstance(data, dict):
        return NodeFile(path, host, None, "not a gpudiag output (JSON, but not an object)")
    schema = data.get("schema")
    host = _name(data, host)
    if isinstance(schema, str) and schema in SCHEMAS:  # a list or an object is not a schema name
        return NodeFile(path, host, None, f"malformed {schema} output: {exc}")
    if isinstance(schema, str) and schema.startswith("gpudiag."):
        known = ", ".join(SCHEMAS)
        return NodeFile(path, host, None, f"schema {schema!r} is not one this gpudiag reads ({known})")
    return NodeFile(path, host, None, "not a gpudiag output (no gpudiag schema field)")


def _leading_json(raw: bytes) -> bytes | None:
    """The JSON document at the start of ``raw`` when text follows it; None when there is none."""
    text = raw.decode("utf-8", "replace").lstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return None
    return text[:end].encode()


def _not_json(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    if text.startswith(("{", "[")):
        return "truncated or malformed JSON (the node was killed while writing?)"
    first = text.splitlines()[0][:120]
    return f"not JSON: {first!r}"


# --- the fields read, per schema (msgspec skips every other field without building it) ----------
#
# A reading NVML could not give is {"unavailable": ...} in a snapshot and null elsewhere; the
# figures below take both as "not known".

_Reading = dict[str, Any] | None


class _Named(msgspec.Struct, kw_only=True):
    host: str | dict[str, Any] | None = None  # a snapshot's is {"hostname": ...}
    slurm_node: str | None = None


class _CheckItem(msgspec.Struct):
    id: str
    status: str
    target: str | None = None
    finding: str = ""


class _CheckGpu(msgspec.Struct):
    name: str | None = None
    temperature_c: float | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    retired_pages: int | None = None
    recovery_action: int | None = None
    matmul_tflops: float | None = None


class _CheckFile(_Named, tag_field="schema", tag="gpudiag.check/1"):
    verdict: str
    could_not_run: list[str]
    versions: dict[str, str]
    checks: msgspec.Raw  # decoded only when needed: scanning is ~4x faster than building
    gpus: list[_CheckGpu] = []  # absent before gpudiag 0.2.0: no figures then


class _Nvml(msgspec.Struct):
    driver_version: str | _Reading = None
    cuda_driver_version: int | _Reading = None


class _Ecc(msgspec.Struct):
    aggregate_corrected: int | _Reading = None
    aggregate_uncorrected: int | _Reading = None


class _Rows(msgspec.Struct):
    correctable: int = 0
    uncorrectable: int = 0
    pending: bool = False
    unavailable: str | None = None


class _Pages(msgspec.Struct):
    single_bit: int = 0
    double_bit: int = 0
    unavailable: str | None = None


class _SnapshotGpu(msgspec.Struct):
    name: str | _Reading = None
    temperature_c: int | _Reading = None
    ecc_errors: _Ecc | None = None
    remapped_rows: _Rows | None = None
    retired_pages: _Pages | None = None
    recovery_action: int | _Reading = None


class _Torch(msgspec.Struct):
    version: str = ""
    cuda: str | None = None
    unavailable: str | None = None


class _SnapshotFile(_Named, tag_field="schema", tag="gpudiag.machine/1"):
    nvml: _Nvml
    gpus: list[_SnapshotGpu]
    torch_build: _Torch | None = None
    torch_runtime: _Torch | None = None


class _BenchResult(msgspec.Struct):
    mode: str
    cuda_device: int
    size_bytes: int
    median_bytes_per_s: float | None = None


class _BenchFinding(msgspec.Struct):
    severity: str
    message: str
    cuda_device: int | None = None


class _BenchDevice(msgspec.Struct):
    name: str | None = None


class _BenchFile(_Named, tag_field="schema", tag="gpudiag.bench-transfer/1"):
    complete: bool
    devices: list[_BenchDevice]
    results: list[_BenchResult]
    findings: list[_BenchFinding]


class _MemoryGpu(msgspec.Struct):
    name: str | _Reading = None


class _MemoryFile(_Named, tag_field="schema", tag="gpudiag.memory/2"):
    gpus: list[_MemoryGpu]


class _MemoryFileV1(_MemoryFile, tag="gpudiag.memory/1"):
    """The same fields, as far as a report reads them."""


_DECODER = msgspec.json.Decoder(_CheckFile | _SnapshotFile | _BenchFile | _MemoryFile | _MemoryFileV1)
_CHECKS = msgspec.json.Decoder(list[_CheckItem])


def _name(data: _Named | dict[str, Any], fallback: str) -> str:
    """Slurm's name for the node when recorded, else its hostname, else the file's name."""
    node, host = (
        (data.slurm_node, data.host) if isinstance(data, _Named) else (data.get("slurm_node"), data.get("host"))
    )
    if isinstance(node, str) and node:
        return node
    if isinstance(host, dict):
        host = host.get("hostname")
    return host if isinstance(host, str) and host else fallback


def _known(value: Any) -> Any:
    """A snapshot's reading: its value, or None when it is {"unavailable": ...}."""
    return None if isinstance(value, dict) else value


# --- per schema ----------------------------------------------------------------------


def _check(doc: _CheckFile, path: str, fallback: str) -> NodeFile:
    # A READY verdict means no check failed (`check` gives it only then): its list need not be read.
    checks = _CHECKS.decode(doc.checks) if doc.verdict != "READY" else []
    failures = [Failure(c.id, c.target or "", c.finding) for c in checks if c.status == "FAIL"]
    failures += [Failure("gpudiag.could_not_run", "", note) for note in doc.could_not_run]
    versions = {
        key: value.split("  (", 1)[0]  # "2.5.1+cu124  (files only: ...)"
        for key, value in doc.versions.items()
        if key in VERSION_FIELDS and value != "N/A"
    }
    names, metrics, rem = _gpu_figures(doc.gpus)
    return NodeFile(
        path, _name(doc, fallback), Kind.CHECK, "", doc.verdict, tuple(failures), versions, names, metrics, rem
    )


def _gpu_figures(gpus: list[_CheckGpu]) -> tuple[tuple[str, ...], dict[str, float], str]:
    """Per node: GPU models, the hottest GPU, the slowest matmul, error counts summed over GPUs."""
    names = []
    ecc_u = ecc_c = rows = pages = 0
    seen_ecc_u = seen_ecc_c = seen_rows = seen_pages = False
    hottest: float | None = None
    slowest: float | None = None
    actions: list[int | None] = []
    pending: list[bool | None] = []
    for g in gpus:  # one pass, unrolled: this runs for every GPU of every node file
        names.append(g.name or "unknown GPU")
        if g.ecc_aggregate_uncorrected is not None:
            ecc_u += g.ecc_aggregate_uncorrected
            seen_ecc_u = True
        if g.ecc_aggregate_corrected is not None:
            ecc_c += g.ecc_aggregate_corrected
            seen_ecc_c = True
        if g.remapped_rows_correctable is not None:
            rows += g.remapped_rows_correctable + (g.remapped_rows_uncorrectable or 0)
            seen_rows = True
        if g.retired_pages is not None:
            pages += g.retired_pages
            seen_pages = True
        if g.temperature_c is not None and (hottest is None or g.temperature_c > hottest):
            hottest = g.temperature_c
        if g.matmul_tflops is not None and (slowest is None or g.matmul_tflops < slowest):
            slowest = g.matmul_tflops
        if g.recovery_action:
            actions.append(g.recovery_action)
        if g.remap_pending:
            pending.append(True)
    sums: dict[str, float] = {}
    for metric, total, seen in (
        ("ecc_uncorrected", ecc_u, seen_ecc_u),
        ("ecc_corrected", ecc_c, seen_ecc_c),
        ("remapped_rows", rows, seen_rows),
        ("retired_pages", pages, seen_pages),
    ):
        if seen:
            sums[metric] = float(total)
    if hottest is not None:
        sums["temperature_c"] = float(hottest)
    if slowest is not None:
        sums["matmul_tflops"] = slowest
    return tuple(names), sums, remedy(actions, pending) if actions or pending else ""


def _snapshot(doc: _SnapshotFile, path: str, fallback: str) -> NodeFile:
    versions = {}
    if driver := _known(doc.nvml.driver_version):
        versions["Driver"] = driver
    if cuda := _known(doc.nvml.cuda_driver_version):
        versions["CUDA (driver max)"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
    for torch in (doc.torch_runtime, doc.torch_build):  # what ran, else what is installed
        if torch is not None and torch.unavailable is None and torch.version:
            versions["torch"] = torch.version
            if torch.cuda:
                versions["torch CUDA build"] = torch.cuda
            break
    gpus = []
    for g in doc.gpus:
        ecc = g.ecc_errors or _Ecc()
        rows = g.remapped_rows if g.remapped_rows is not None and g.remapped_rows.unavailable is None else None
        pages = g.retired_pages if g.retired_pages is not None and g.retired_pages.unavailable is None else None
        gpus.append(
            _CheckGpu(
                name=_known(g.name),
                temperature_c=_known(g.temperature_c),
                ecc_aggregate_corrected=_known(ecc.aggregate_corrected),
                ecc_aggregate_uncorrected=_known(ecc.aggregate_uncorrected),
                remapped_rows_correctable=rows.correctable if rows else None,
                remapped_rows_uncorrectable=rows.uncorrectable if rows else None,
                remap_pending=rows.pending if rows else None,
                retired_pages=pages.single_bit + pages.double_bit if pages else None,
                recovery_action=_known(g.recovery_action),
            )
        )
    names, metrics, rem = _gpu_figures(gpus)
    return NodeFile(path, _name(doc, fallback), Kind.SNAPSHOT, "", None, (), versions, names, metrics, rem)


def _bench(doc: _BenchFile, path: str, fallback: str) -> NodeFile:
    failures = [
        Failure("bench-transfer", f"cuda:{f.cuda_device}" if f.cuda_device is not None else "", f.message)
        for f in doc.findings
        if f.severity != "info"  # what makes bench-transfer exit 1: wrong data, below expected, cut short
    ]
    if not doc.complete:
        failures.append(Failure("bench-transfer", "", "the benchmark did not complete"))
    # Per mode and device, the rate at the largest size measured.
    best: dict[tuple[str, int], tuple[int, float]] = {}
    for r in doc.results:
        key = (r.mode, r.cuda_device)
        if r.median_bytes_per_s is not None and (key not in best or r.size_bytes > best[key][0]):
            best[key] = (r.size_bytes, r.median_bytes_per_s)
    metrics = {}
    for metric, modes in _BANDWIDTH_MODES.items():
        for mode in modes:
            rates = [rate for (m, _), (_, rate) in best.items() if m == mode]
            if rates:
                metrics[metric] = min(rates) / 1e9  # the slowest GPU, GB/s
                break
    names = tuple(d.name or "unknown GPU" for d in doc.devices)
    return NodeFile(path, _name(doc, fallback), Kind.BENCH, "", None, tuple(failures), {}, names, metrics)


def _memory(doc: _MemoryFile, path: str, fallback: str) -> NodeFile:
    names = tuple(_known(g.name) or "unknown GPU" for g in doc.gpus)
    return NodeFile(path, _name(doc, fallback), Kind.MEMORY, gpus=names)


_READERS: dict[type, Any] = {
    _CheckFile: _check,
    _SnapshotFile: _snapshot,
    _BenchFile: _bench,
    _MemoryFile: _memory,
    _MemoryFileV1: _memory,
}
