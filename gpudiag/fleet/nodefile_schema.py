"""The node files' shapes as msgspec reads them: per schema, only the fields a report uses."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

# --- the fields read, per schema (msgspec skips every other field without building it) ----------
#
# A reading NVML could not give is {"unavailable": ...} in a snapshot and null elsewhere; the
# figures below take both as "not known". Ranges: what NVML and the benchmark can report; a
# figure beyond them is a corrupted file, not a fact to compare across the fleet.

_Reading = dict[str, Any] | None
Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
Index = Annotated[int, msgspec.Meta(ge=0, le=2**31)]
Celsius = Annotated[float, msgspec.Meta(ge=-273, le=1000)]
Tflops = Annotated[float, msgspec.Meta(ge=0, le=1e7)]
BytesPerS = Annotated[float, msgspec.Meta(ge=0, le=1e16)]
Gbps = Annotated[float, msgspec.Meta(ge=0, le=1e7)]  # GB/s
CheckStatus = Literal["PASS", "WARN", "FAIL", "SKIP"]
Verdict = Literal["READY", "NOT READY", "UNKNOWN"]


class Host(msgspec.Struct):
    hostname: str | None = None


class Named(msgspec.Struct, kw_only=True):
    host: str | Host | UnsetType | None = UNSET  # a snapshot's is {"hostname": ...}
    slurm_node: str | UnsetType | None = UNSET


class CheckItem(msgspec.Struct, gc=False):  # gc=False: strings only, never in a cycle
    id: str
    status: CheckStatus
    target: str | None = None
    finding: str = ""
    scope: Literal["node", "job"] | None = None  # absent before gpudiag 0.2.0: taken from the check's declaration
    action: str | None = None


class FullCheckItem(msgspec.Struct, gc=False):
    """A result as `check --json` has written it since 0.2.0: every key there, so that they can be counted."""

    id: str
    area: msgspec.Raw
    status: CheckStatus
    target: str | None
    finding: msgspec.Raw  # its JSON text: decoded for a failure only (see _text), its colons counted as written
    fix: msgspec.Raw
    scope: Literal["node", "job"] | None
    action: str | None


ITEM_KEYS = len(FullCheckItem.__struct_fields__)


class Summary(msgspec.Struct, gc=False):
    passed: Count = msgspec.field(name="pass")
    warned: Count = msgspec.field(name="warn")
    failed: Count = msgspec.field(name="fail")
    skipped: Count = msgspec.field(name="skip")


class CheckGpu(msgspec.Struct, gc=False):
    index: Index | None = None
    name: str | None = None
    uuid: str | None = None
    temperature_c: Celsius | None = None
    ecc_aggregate_corrected: Count | None = None
    ecc_aggregate_uncorrected: Count | None = None
    remapped_rows_correctable: Count | None = None
    remapped_rows_uncorrectable: Count | None = None
    remap_pending: bool | None = None
    retired_pages: Count | None = None
    recovery_action: Index | None = None
    matmul_tflops: Tflops | None = None
    # `check --level 2-4` (absent at level 1): what the deep tests measured on this GPU
    stress_tflops: Tflops | None = None
    memtest_gbps: Gbps | None = None
    h2d_gbps: Gbps | None = None
    d2h_gbps: Gbps | None = None
    d2d_gbps: Gbps | None = None
    peer_min_gbps: Gbps | None = None
    allreduce_busbw_gbps: Gbps | None = None


class FullCheckGpu(msgspec.Struct, gc=False):
    """A GPU as `check --json` has written it since 0.2.0: the same fields, every level-1 key required
    (so that they can be counted)."""

    index: Index | None
    name: str | None
    uuid: str | None
    temperature_c: Celsius | None
    ecc_aggregate_corrected: Count | None
    ecc_aggregate_uncorrected: Count | None
    remapped_rows_correctable: Count | None
    remapped_rows_uncorrectable: Count | None
    remap_pending: bool | None
    remap_failure: bool | None
    retired_pages: Count | None
    recovery_action: Index | None
    matmul_tflops: Tflops | None
    stress_tflops: Tflops | None = None  # check --level 2-4 (not counted: its files are checked in full)
    memtest_gbps: Gbps | None = None
    h2d_gbps: Gbps | None = None
    d2h_gbps: Gbps | None = None
    d2d_gbps: Gbps | None = None
    peer_min_gbps: Gbps | None = None
    allreduce_busbw_gbps: Gbps | None = None


GPU_KEYS = 13  # the level-1 fields above


class CheckFile(Named, tag_field="schema", tag="gpudiag.check/1"):
    """`check --json` as written since 0.2.0, every key of its results and GPUs there to be counted."""

    verdict: Verdict
    could_not_run: list[str]
    versions: dict[str, str]
    checks: list[FullCheckItem]
    gpus: list[FullCheckGpu] | UnsetType = UNSET
    strict: bool | UnsetType = UNSET
    exit_code: int | UnsetType = UNSET
    summary: Summary | UnsetType = UNSET
    # Not read, only counted (see _colons_ruled_out):
    source: Any = UNSET
    collected_at: Any = UNSET
    diagnostics: msgspec.Raw | UnsetType = UNSET  # check --level 2-4: its keys are not counted


class OlderCheckFile(Named, tag_field="schema", tag="gpudiag.check/1"):
    """Any other `check --json` (before 0.2.0 its results had no scope or action, and no GPUs were listed):
    read when the shape above refuses it, its keys not counted."""

    verdict: Verdict
    could_not_run: list[str]
    versions: dict[str, str]
    checks: msgspec.Raw  # decoded below, once the rest of the file is known to be good
    gpus: list[CheckGpu] | UnsetType = UNSET
    strict: bool | UnsetType = UNSET
    exit_code: int | UnsetType = UNSET
    summary: Summary | UnsetType = UNSET


CHECK_REQUIRED = 5  # the schema, verdict, could_not_run, versions and checks
CHECK_OPTIONAL = ("host", "slurm_node", "gpus", "strict", "exit_code", "summary", "source", "collected_at")


class Nvml(msgspec.Struct):
    driver_version: str | _Reading = None
    cuda_driver_version: Annotated[int, msgspec.Meta(ge=0, le=10**7)] | _Reading = None


class Ecc(msgspec.Struct):
    aggregate_corrected: Count | _Reading = None
    aggregate_uncorrected: Count | _Reading = None


class Rows(msgspec.Struct):
    correctable: Count = 0
    uncorrectable: Count = 0
    pending: bool = False
    unavailable: str | None = None


class Pages(msgspec.Struct):
    single_bit: Count = 0
    double_bit: Count = 0
    unavailable: str | None = None


class SnapshotGpu(msgspec.Struct):
    name: str | _Reading = None
    temperature_c: Celsius | _Reading = None
    ecc_errors: Ecc | None = None
    remapped_rows: Rows | None = None
    retired_pages: Pages | None = None
    recovery_action: Index | _Reading = None


class Torch(msgspec.Struct):
    version: str = ""
    cuda: str | None = None
    unavailable: str | None = None


class SnapshotFile(Named, tag_field="schema", tag="gpudiag.machine/1"):
    nvml: Nvml
    gpus: list[SnapshotGpu]
    torch_build: Torch | None = None
    torch_runtime: Torch | None = None


class BenchResult(msgspec.Struct):
    mode: str
    cuda_device: Index
    size_bytes: Count
    median_bytes_per_s: BytesPerS | None = None


class BenchFinding(msgspec.Struct):
    severity: str
    message: str
    cuda_device: Index | None = None


class BenchDevice(msgspec.Struct):
    name: str | None = None


class BenchFile(Named, tag_field="schema", tag="gpudiag.bench-transfer/1"):
    complete: bool
    devices: list[BenchDevice]
    results: list[BenchResult]
    findings: list[BenchFinding]


class MemoryGpu(msgspec.Struct):
    name: str | _Reading = None


class MemoryFile(Named, tag_field="schema", tag="gpudiag.memory/2"):
    gpus: list[MemoryGpu]


class MemoryFileV1(MemoryFile, tag="gpudiag.memory/1"):
    """The same fields, as far as a report reads them."""


DECODER = msgspec.json.Decoder(CheckFile | SnapshotFile | BenchFile | MemoryFile | MemoryFileV1)
# A check file the shape of CheckFile refuses (in a union: a document without a schema is none of ours).
OLDER = msgspec.json.Decoder(OlderCheckFile | SnapshotFile | BenchFile | MemoryFile | MemoryFileV1)
CHECKS = msgspec.json.Decoder(list[CheckItem])
