"""Pre-job checks: pure rules over the gathered facts, each with a stable id.

A rule returns one result per thing it judged (the node, or each GPU). A field the GPU
does not support is SKIP, never FAIL.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gpudiag.model import Machine, Reading, TorchRuntime
from gpudiag.probe.devices import DeviceFacts


class Status(str, enum.Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class CheckResult:
    id: str
    area: str
    status: Status
    finding: str  # one line: what was found
    fix: str = ""  # one line: what to do about it ("" when nothing to do)
    target: str = ""  # "GPU 3" when the result is about one GPU


@dataclass(frozen=True)
class FunctionalResult:
    """The functional test of one GPU, run in a child process."""

    gpu_index: int | None  # NVML index, when the torch device could be matched to one
    torch_index: int
    ok: bool
    error: str
    context_seconds: float | None
    memory_ok: bool | None
    matmul_rel_error: float | None
    tflops: float | None
    loaded_pcie: tuple[int, int] | None  # gen, width read from NVML while the GPU was busy
    loaded_clock_events: int | None


@dataclass(frozen=True)
class Options:
    expect_gpus: int | None = None
    min_free_bytes: int | None = None
    require_driver: str | None = None
    require_cuda: str | None = None
    require_capability: str | None = None
    require_gpu: str | None = None
    require_torch: str | None = None
    allow_processes: bool = False
    quick: bool = False


@dataclass(frozen=True)
class Facts:
    machine: Machine
    torch: Reading[TorchRuntime]
    devices: DeviceFacts | None  # None: not recorded (a replay)
    functional: tuple[FunctionalResult, ...] | None = None  # None: not run
    functional_skip_reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
