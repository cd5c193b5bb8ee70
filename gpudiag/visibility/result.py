"""What a resolution says: the variables, each entry's outcome, the devices, PyTorch's view."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpudiag.model import MigDevice

VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"
ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")
DEFAULT_ORDER = "FASTEST_FIRST"

C_BLANKS = " \t\n\v\f\r"  # what C's isspace() skips in the "C" locale, and nothing else
_MAX_DIGITS = 20  # more digits than an unsigned long holds: strtoul saturates, out of range anyway

# Variables that shrink (or, for ROCm's, do not touch) the set before CUDA_VISIBLE_DEVICES applies.
NARROWING_NOTES = {
    "NVIDIA_VISIBLE_DEVICES": "the NVIDIA container runtime exposed only these GPUs to this container; inside it "
    "NVML and CUDA number them from 0, so CUDA_VISIBLE_DEVICES counts within them",
    "SLURM_JOB_GPUS": "Slurm allocated these GPUs (global ids) to the job; under ConstrainDevices the job sees only "
    "them, numbered from 0, and CUDA_VISIBLE_DEVICES counts within them",
    "SLURM_STEP_GPUS": "Slurm allocated these GPUs (global ids) to this job step",
    "CUDA_MPS_PIPE_DIRECTORY": "an MPS server may be in use: a client sees the devices the server was started with, "
    "renumbered from 0, and the MPS daemon hides pre-Volta GPUs when a Volta or newer one is visible; gpudiag "
    "cannot see the server's setting (use --probe)",
    "GPU_DEVICE_ORDINAL": "ROCm's variable (Slurm sets it too); CUDA ignores it",
}


SUMMARY_KIND = "not_read"  # an Entry that stands for the entries after CUDA stopped reading
SHOWN_CHARACTERS = 120  # a longer value is shown cut, with its size


def shown_value(value: str) -> str:
    """The value as repr() shows it, cut when long (a value of 50,000 entries is 100 kB)."""
    if len(value) <= SHOWN_CHARACTERS:
        return repr(value)
    entries = value.count(",") + 1
    return f"{value[:SHOWN_CHARACTERS]!r}… ({entries} entries, {len(value)} characters)"


class Outcome(str, enum.Enum):
    USED = "used"
    DROPPED = "dropped"  # this entry (and, for an invalid one, the reading stops here)
    IGNORED = "ignored"  # after an invalid entry, or in a list that repeats a device


class TokenKind(str, enum.Enum):
    INDEX = "index"
    GPU_UUID = "gpu_uuid"
    MIG_UUID = "mig_uuid"  # MIG-<uuid>, driver R470+
    MIG_LEGACY = "mig_legacy"  # MIG-GPU-<uuid>/<GI>/<CI>
    INVALID = "invalid"


@dataclass(frozen=True)
class Token:
    """One comma-separated entry, as CUDA reads it (before looking at the machine)."""

    text: str
    kind: TokenKind
    number: int | None = None  # INDEX: what strtoul reads
    ignored: str = ""  # INDEX: the characters after the number, which strtoul leaves unread
    signed: bool = False  # INDEX: a '+' or '-' before the digits ('-0' reads as 0)
    uuid: str = ""  # *_UUID: the entry without surrounding blanks; MIG_LEGACY: the parent GPU's UUID
    gpu_instance_id: int | None = None  # MIG_LEGACY
    compute_instance_id: int | None = None  # MIG_LEGACY
    padded: bool = False  # blanks around a UUID
    problem: str = ""  # INVALID: why


@dataclass(frozen=True)
class Entry:
    position: int
    token: str
    outcome: Outcome
    reason: str  # why dropped/ignored, or how it was read when used
    kind: str = TokenKind.INVALID.value
    gpu_index: int | None = None  # the NVML GPU the entry named, when it named one
    mig_index: int | None = None
    documented: bool = True  # False: this reading rests on undocumented behaviour


@dataclass(frozen=True)
class VisibleDevice:
    ordinal: int  # cuda:N in the program
    gpu_index: int  # NVML index (nvidia-smi's)
    mig: MigDevice | None
    uuid: str
    pci_bus_id: str
    name: str
    memory_total_bytes: int | None
    parent_uuid: str = ""  # the GPU's UUID (the same as uuid unless this is a MIG device)
    compute_mode: str = ""


@dataclass(frozen=True)
class TorchNvmlIndex:
    ordinal: int
    nvml_index: int | None  # the GPU torch.cuda.utilization(ordinal) & co. read; None when they raise
    error: str = ""


@dataclass(frozen=True)
class PytorchView:
    """PyTorch's own reading of the variable (torch.cuda as of torch 2.13), computed without torch."""

    count_before_init: int | None  # torch.cuda.device_count() before CUDA initialises; None: it raises
    error: str  # what it raises
    asks_cuda: bool  # PyTorch's NVML reading gave up and asked the CUDA runtime (initialising the driver)
    nvml_indices: tuple[TorchNvmlIndex, ...]  # per cuda:N: the GPU torch's NVML-based queries read
    divergences: tuple[str, ...]  # where PyTorch and CUDA differ under this setting


@dataclass(frozen=True)
class Resolution:
    value: str | None  # None: the variable is unset
    order: str  # the order CUDA uses: FASTEST_FIRST or PCI_BUS_ID
    order_is_heuristic: bool  # FASTEST_FIRST among GPUs that differ: CUDA's order is unpublished
    devices: tuple[VisibleDevice, ...]
    entries: tuple[Entry, ...]
    warnings: tuple[str, ...]  # the value behaves differently from what it looks like
    narrowing: tuple[tuple[str, str, str], ...]  # (variable, value, what it means)
    undocumented: tuple[str, ...] = ()  # undocumented behaviour this result assumes (check with --probe)
    order_value: str | None = None  # CUDA_DEVICE_ORDER as set; None: unset
    pytorch: PytorchView | None = None
    cuinit_error: str = ""  # when no device is usable: what cuInit returns, e.g. "CUDA_ERROR_NO_DEVICE (100)"
