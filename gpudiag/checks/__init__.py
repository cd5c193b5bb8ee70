"""Pre-job checks: pure rules over the gathered facts, each with a stable id.

The command gathers :class:`Facts` (the machine model, torch's runtime view or why it is
missing, host device facts, functional-test results) and :class:`Options` (thresholds and
requirements); :mod:`gpudiag.checks.rules` (the registry) turns them into
:class:`CheckResult` rows. A rule returns one result per thing it judged (the node, or each
GPU). A field the GPU does not support is SKIP, never FAIL.

Rules by area: ``driver`` (NVML, device nodes, modules), ``software`` (torch, CUDA, cuDNN,
NCCL; tables in ``compat``), ``config``, ``health`` (with the functional test's verdict),
``requirements``; ``functional_runner`` runs the functional test's child process, ``gather`` reads
every fact and ``request`` turns `check`'s options into the run.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from gpudiag.exitcodes import ExitCode, check_code
from gpudiag.model import FactGroup, Machine, Reading, TorchRuntime
from gpudiag.probe.devices import DeviceFacts

if TYPE_CHECKING:  # loaded only by `check --level 2-4` (a Struct never resolves an annotation it does not decode)
    from gpudiag.checks.deep.facts import DeepFacts

# What the functional test re-reads while a GPU is busy.
LOADED_GROUPS: frozenset[FactGroup] = frozenset({FactGroup.PCIE, FactGroup.CLOCK_EVENTS})


class Scope(str, enum.Enum):
    """What a check judges, and so what its failure may cause: only a NODE failure drains a node;
    a JOB failure (the job's environment, its torch build, its requirements) fails that job alone."""

    NODE = "node"
    JOB = "job"


class Action(str, enum.Enum):
    """What an operator does about a failure (drain reasons and `check --json` carry it)."""

    RESET = "reset"  # reset the GPU (nvidia-smi -r), after draining
    REBOOT = "reboot"  # reboot the node (or reload the driver)
    RESEAT = "reseat"  # reseat the GPU or its cable/riser; replace it if that does not help
    RMA = "rma"  # return the GPU to the vendor
    COOLING = "cooling"  # check cooling and power delivery
    STOP_PROCESSES = "stop_processes"  # stop what a previous job left running
    FIX_CONFIG = "fix_config"  # fix the node's configuration (driver, modules, modes)
    FIX_JOB = "fix_job"  # fix the job: its environment, its torch, its requirements


class Status(str, enum.Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"


class CheckResult(msgspec.Struct, frozen=True):
    id: str
    area: str
    status: Status
    finding: str  # one line: what was found
    fix: str = ""  # one line: what to do about it ("" when nothing to do)
    target: str = ""  # "GPU 3" when the result is about one GPU
    action: Action | None = None  # more precise than the check's declared action (e.g. NVML's recovery action)


def nothing_checked(results: Sequence[CheckResult]) -> bool:
    """Every result is a SKIP: the run verified nothing, so it must not say READY."""
    return all(r.status is Status.SKIP for r in results)


def exit_code(results: Sequence[CheckResult], notes: Sequence[str], strict: bool) -> ExitCode:
    """`check`'s verdict as its exit status (:func:`gpudiag.exitcodes.check_code`): a failure (a warning
    too with ``strict``) is FAILED; else what could not run (``notes``) makes it CHECK_INCOMPLETE, and
    a run that verified nothing is NOTHING_CHECKED, never OK."""
    statuses = {r.status for r in results}
    failed = Status.FAIL in statuses or (strict and Status.WARN in statuses)
    return check_code(failed, bool(notes), bool(statuses - {Status.SKIP}))


class FunctionalResult(msgspec.Struct, frozen=True):
    """The functional test of one GPU, run in a child process."""

    gpu_index: int | None  # NVML index, when the torch device could be matched to one
    torch_index: int  # cuda:N in the child; -1 when the child died before naming a device
    ok: bool  # the child finished this GPU without an exception
    error: str
    context_seconds: float | None  # creating the CUDA context on this GPU (CUDA already initialised)
    memory_ok: bool | None  # the pattern written to GPU memory read back intact
    matmul_rel_error: float | None  # fp32 (TF32 off) vs float64 CPU reference; NaN when non-finite
    tflops: float | None
    loaded_pcie: tuple[int, int] | None  # (gen, width) read from NVML while the GPU was busy
    loaded_clock_events: int | None  # NVML clock event bits read while the GPU was busy


class Options(msgspec.Struct, frozen=True):
    expect_gpus: int | None = None
    min_free_bytes: int | None = None
    temp_margin_c: int = 5  # warn this close to the GPU's own slowdown temperature
    require_driver: str | None = None
    require_cuda: str | None = None
    require_capability: str | None = None
    require_gpu: str | None = None
    require_torch: str | None = None
    allow_processes: bool = False
    torch_expected: bool = False  # --python named an environment: torch missing there is a failure


class Facts(msgspec.Struct, frozen=True):
    machine: Machine
    torch: Reading[TorchRuntime]
    devices: DeviceFacts | None  # None: not recorded (a replay)
    functional: tuple[FunctionalResult, ...] | None = None  # None: not run
    functional_skip_reason: str = ""
    deep: DeepFacts | None = None  # the deep diagnostics (check --level 2-4); None: not run
    deep_skip_reason: str = ""
