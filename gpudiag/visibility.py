"""Which GPUs a CUDA program will see, and as which ``cuda:N`` — computed, not probed.

A pure function of the machine (NVML facts) and the two variables CUDA reads once, when it
initialises: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. The rules are NVIDIA's documented
ones:

- CUDA Programming Guide, "CUDA Environment Variables": unset means every device, empty means
  none; a comma-separated list of integer indices or ``GPU-`` UUIDs (abbreviated to any unique
  prefix), enumerated in the order of the list; at an invalid index only the devices before it
  are visible (``0,2,-1,1`` → 0 and 2); ``CUDA_DEVICE_ORDER`` is ``FASTEST_FIRST`` (the default,
  "a simple heuristic") or ``PCI_BUS_ID`` (ascending PCI bus id).
- MIG User Guide, "CUDA Device Enumeration": ``MIG-<uuid>`` (R470+) or
  ``MIG-GPU-<uuid>/<GI>/<CI>``; a process enumerates one MIG instance ("the first one available")
  and no non-MIG GPU once an instance is enumerated; NVIDIA says future drivers may relax this.

Where CUDA's behaviour is not documented (how a token is read character by character, repeated
devices, blanks and case in UUIDs, lost GPUs, the FASTEST_FIRST heuristic) the result says so in
``Resolution.undocumented`` instead of guessing silently, and ``gpudiag visible --probe`` asks the
real runtime.

PyTorch reads the variable itself too (``torch.cuda._parse_visible_devices`` and friends, used by
``torch.cuda.device_count()`` before CUDA initialises and by its NVML-based queries), and not
always as CUDA does: :func:`pytorch_view` reproduces its reading so the differences can be shown.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.model import ComputeMode, Gpu, GpuState, Machine, MigDevice
from gpudiag.selection import normalize_bus_id, select_gpus

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


# --- reading one entry ----------------------------------------------------------------


def _strtoul(text: str) -> tuple[int | None, int, str]:
    """C's ``strtoul(text, &end, 10)``: blanks skipped, an optional sign, ASCII digits.

    Returns (value, end, sign); value None when no digits start the text. Python's ``\\d`` and
    ``str.isdigit`` accept non-ASCII digits and ``str.strip`` other blanks; C does not.
    """
    i = 0
    while i < len(text) and text[i] in C_BLANKS:
        i += 1
    sign = ""
    if i < len(text) and text[i] in "+-":
        sign = text[i]
        i += 1
    start = i
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    if i == start:
        return None, 0, sign
    digits = text[start:i].lstrip("0") or "0"
    value = int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS
    return value, i, sign


def parse_token(text: str) -> Token:
    """How CUDA reads one entry of the list. Never raises: anything unreadable is INVALID."""
    stripped = text.strip(C_BLANKS)
    padded = stripped != text
    if stripped.startswith("MIG-"):
        legacy = re.fullmatch(r"MIG-(GPU-[^/]*)/([0-9]{1,9})/([0-9]{1,9})", stripped, re.ASCII)
        if legacy:
            return Token(
                text,
                TokenKind.MIG_LEGACY,
                uuid=legacy.group(1),
                gpu_instance_id=int(legacy.group(2)),
                compute_instance_id=int(legacy.group(3)),
                padded=padded,
            )
        return Token(text, TokenKind.MIG_UUID, uuid=stripped, padded=padded)
    if stripped.startswith("GPU-"):
        return Token(text, TokenKind.GPU_UUID, uuid=stripped, padded=padded)
    value, end, sign = _strtoul(text)
    if value is None:
        return Token(text, TokenKind.INVALID, problem=_unreadable(text, stripped, sign))
    if sign == "-" and value != 0:
        return Token(text, TokenKind.INVALID, problem="negative: strtoul wraps it to a huge number, out of range")
    return Token(text, TokenKind.INDEX, number=value, ignored=text[end:], signed=bool(sign))


def _unreadable(text: str, stripped: str, sign: str) -> str:
    if stripped == "":
        return "empty entry"
    first = stripped[0]
    if not first.isascii():
        return f"starts with {first!r} (U+{ord(first):04X}), which C's strtoul does not read"
    if stripped.lower().startswith(("gpu-", "mig-")):
        return f"{stripped[:4]!r} is not {stripped[:4].upper()!r}: UUIDs are written as nvidia-smi -L prints them"
    if sign:
        return f"{sign!r} without digits"
    return "not a number or a GPU-/MIG- UUID"


def parse_value(value: str) -> tuple[Token, ...]:
    """Every entry of a set (non-None) value. An empty value has no entries: it means no device."""
    if value == "":
        return ()
    return tuple(parse_token(t) for t in value.split(","))


# --- CUDA's enumeration order ---------------------------------------------------------


def _bus_key(gpu: Gpu) -> tuple[int, int, int, int, int]:
    """Sort key for PCI order: domain, bus, device, function; unknown bus ids last."""
    bus = gpu.pci_bus_id.value
    if bus is None:
        return (1, 0, 0, 0, gpu.index)
    match = re.match(r"([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)", normalize_bus_id(bus))
    if not match:
        return (1, 0, 0, 0, gpu.index)
    domain, b, d, f = (int(x, 16) for x in match.groups())
    return (0, domain, b, d, f)


def _kind(gpu: Gpu) -> tuple[str | None, tuple[int, int] | None]:
    return gpu.name.value, gpu.compute_capability.value


def enumeration_order(machine: Machine, order: str) -> tuple[tuple[Gpu, ...], bool]:
    """CUDA's device order before CUDA_VISIBLE_DEVICES, and whether it is a guess.

    PCI_BUS_ID is exact. FASTEST_FIRST (the default) is NVIDIA's unpublished heuristic: with
    identical GPUs it is PCI order (as the CUDA_VISIBLE_DEVICES documentation's "as determined by
    nvidia-smi" implies); with different GPUs gpudiag puts the higher compute capability first
    and says the order is a heuristic.
    """
    usable = [g for g in machine.gpus if g.state is GpuState.OK]
    by_bus = sorted(usable, key=_bus_key)
    if order == "PCI_BUS_ID":
        return tuple(by_bus), False
    if len({_kind(g) for g in by_bus}) <= 1:
        return tuple(by_bus), False
    ranked = sorted(by_bus, key=lambda g: tuple(-x for x in g.compute_capability.get((0, 0))))
    return tuple(ranked), True


# --- resolution -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Pick:
    position: int | None  # None: every device (the variable is unset)
    gpu: Gpu
    mig: MigDevice | None  # named explicitly by a MIG- entry
    how: str
    documented: bool = True


class _Notes:
    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.undocumented: list[str] = []

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def warnings_about(self, start: str) -> bool:
        return any(w.startswith(start) for w in self.warnings)

    def assume(self, text: str) -> None:
        if text not in self.undocumented:
            self.undocumented.append(text)


def _effective_order(order: str | None, notes: _Notes) -> str:
    if order is None:
        return DEFAULT_ORDER
    if order in ORDERS:
        return order
    if order.strip(C_BLANKS).upper() in ORDERS:
        notes.warn(
            f"{ORDER_VAR}={order!r} is not spelled as NVIDIA documents it ({' or '.join(ORDERS)}): "
            f"write {order.strip(C_BLANKS).upper()}"
        )
        notes.assume(
            f"whether CUDA accepts {ORDER_VAR}={order!r} (other case or blanks) is undocumented: gpudiag assumes it "
            f"does not and uses the default, {DEFAULT_ORDER}"
        )
    else:
        notes.warn(f"{ORDER_VAR}={order!r} is not a value CUDA knows ({' or '.join(ORDERS)}): it uses {DEFAULT_ORDER}")
        notes.assume(f"CUDA falls back to {DEFAULT_ORDER} for an unknown {ORDER_VAR} (undocumented)")
    return DEFAULT_ORDER


def resolve(machine: Machine, value: str | None, order: str | None = None) -> Resolution:
    """The devices CUDA will enumerate for this CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER.

    ``value`` None means the variable is unset; ``order`` None means CUDA_DEVICE_ORDER is unset.
    Never raises for any string: unreadable entries are explained in the result.
    """
    notes = _Notes()
    order_name = _effective_order(order, notes)
    enumerated, heuristic = enumeration_order(machine, order_name)
    if heuristic:
        notes.warn(
            f"the GPUs differ and {ORDER_VAR} is {DEFAULT_ORDER}: CUDA orders them by an unpublished speed "
            "heuristic, not in nvidia-smi's order; the order shown is gpudiag's guess (higher compute capability "
            f"first). Set {ORDER_VAR}=PCI_BUS_ID to make integers mean nvidia-smi's numbers, or use UUIDs"
        )
        ties = _capability_ties(enumerated)
        if ties:
            notes.assume(f"{ties}: under {DEFAULT_ORDER} their relative order is a guess (PCI order)")
    lost = [g.index for g in machine.gpus if g.state is not GpuState.OK]
    if lost:
        gpus = ", ".join(map(str, lost))
        notes.warn(f"GPU {gpus} cannot be used (lost or failed): CUDA will not run on it")
        notes.assume(
            f"gpudiag assumes CUDA leaves out GPU {gpus} (lost) and numbers the rest without it; NVIDIA does not "
            "document this, and cuInit may instead fail outright on a node with a lost GPU"
        )
    if not machine.gpus:
        notes.warn("NVML sees no GPU on this machine: CUDA will see none either")

    entries: list[Entry] = []
    picks: list[_Pick] = []
    if value is None:
        picks = [_Pick(None, g, None, "every device") for g in enumerated]
    elif value == "":
        notes.warn(f"{VISIBLE_VAR} is set but empty: CUDA sees no device at all (unset it to see every GPU)")
    else:
        picks = _read_list(machine, value, enumerated, heuristic, entries, notes)

    devices, entries = _apply_mig_rules(machine, picks, entries, notes)
    devices = _numbered(devices)
    for d in devices:
        if d.compute_mode == ComputeMode.PROHIBITED.value:
            notes.warn(
                f"cuda:{d.ordinal} (GPU {d.gpu_index}) is in Prohibited compute mode: CUDA lists it but no process "
                "can create a context on it"
            )
        elif d.compute_mode == ComputeMode.EXCLUSIVE_PROCESS.value:
            notes.warn(
                f"cuda:{d.ordinal} (GPU {d.gpu_index}) is in Exclusive_Process compute mode: only one process at a "
                "time can use it"
            )
    if value not in (None, "") and not devices and machine.gpus and not notes.warnings_about("the first entry"):
        notes.warn(f"{VISIBLE_VAR}={value!r} leaves no device: CUDA reports 'no CUDA-capable device is detected'")
    env = machine.env_map
    narrowing = tuple((name, env[name], note) for name, note in NARROWING_NOTES.items() if name in env)
    if narrowing and any("out of range" in e.reason for e in entries):
        notes.warn(
            "an index is out of range while "
            + " / ".join(n for n, _, _ in narrowing if n != "GPU_DEVICE_ORDINAL")
            + " is set: inside a container or a Slurm job with constrained devices, GPUs are numbered from 0 "
            "again; global (host) ids do not apply here"
        )
    resolution = Resolution(
        value=value,
        order=order_name,
        order_is_heuristic=heuristic,
        devices=tuple(devices),
        entries=tuple(entries),
        warnings=tuple(notes.warnings),
        narrowing=narrowing,
        undocumented=tuple(notes.undocumented),
        order_value=order,
    )
    return replace(resolution, pytorch=pytorch_view(machine, value, resolution))


def _capability_ties(enumerated: tuple[Gpu, ...]) -> str:
    by_cc: dict[tuple[int, int] | None, list[Gpu]] = {}
    for g in enumerated:
        by_cc.setdefault(g.compute_capability.value, []).append(g)
    groups = [gs for gs in by_cc.values() if len({_kind(g) for g in gs}) > 1]
    return "; ".join(
        "GPUs " + ", ".join(str(g.index) for g in gs) + " differ but have the same compute capability" for gs in groups
    )


def _read_list(
    machine: Machine,
    value: str,
    enumerated: tuple[Gpu, ...],
    heuristic: bool,
    entries: list[Entry],
    notes: _Notes,
) -> list[_Pick]:
    """Read the comma-separated list left to right, stopping at the first invalid entry."""
    tokens = parse_value(value)
    picks: list[_Pick] = []
    kinds = {t.kind for t in tokens if t.kind is not TokenKind.INVALID}
    if TokenKind.INDEX in kinds and kinds - {TokenKind.INDEX}:
        notes.assume(
            "the list mixes integer indices and UUIDs: NVIDIA does not say whether CUDA accepts that; gpudiag "
            "reads each entry on its own (PyTorch's parser stops at the first entry of the other form)"
        )
    for position, token in enumerate(tokens):
        pick, problem, documented = _match(machine, token, enumerated, heuristic, notes, position)
        if pick is not None:
            pick = replace(pick, position=position)
        if pick is None:
            entries.append(
                Entry(
                    position,
                    token.text,
                    Outcome.DROPPED,
                    f"{problem}: CUDA stops here",
                    token.kind.value,
                    None,
                    None,
                    documented,
                )
            )
            for later in range(position + 1, len(tokens)):
                entries.append(
                    Entry(
                        later,
                        tokens[later].text,
                        Outcome.IGNORED,
                        "after an invalid entry CUDA reads no further",
                        tokens[later].kind.value,
                    )
                )
            if position == 0:
                notes.warn(
                    f"the first entry, {token.text!r}, is invalid: no device is visible, CUDA reports 'no CUDA-capable "
                    "device is detected'"
                    + (" (a common way to hide every GPU on purpose)" if token.text.strip(C_BLANKS) == "-1" else "")
                )
            return picks
        repeat = next((p for p in picks if p.gpu.index == pick.gpu.index and p.mig is pick.mig), None)
        if repeat is not None:
            _empty_on_repeat(tokens, position, pick, entries, notes)
            return []
        entries.append(
            Entry(
                position,
                token.text,
                Outcome.USED,
                pick.how,
                token.kind.value,
                pick.gpu.index,
                pick.mig.index if pick.mig else None,
                pick.documented,
            )
        )
        picks.append(pick)
    return picks


def _empty_on_repeat(
    tokens: tuple[Token, ...], position: int, pick: _Pick, entries: list[Entry], notes: _Notes
) -> None:
    what = f"GPU {pick.gpu.index}" + (f" MIG {pick.mig.index}" if pick.mig else "")
    for i, old in enumerate(entries):
        entries[i] = replace(
            old, outcome=Outcome.DROPPED, reason=f"the list repeats {what}: no device at all", documented=False
        )
    entries.append(
        Entry(
            position,
            tokens[position].text,
            Outcome.DROPPED,
            f"repeats {what}",
            tokens[position].kind.value,
            pick.gpu.index,
            pick.mig.index if pick.mig else None,
            False,
        )
    )
    for later in range(position + 1, len(tokens)):
        entries.append(
            Entry(
                later,
                tokens[later].text,
                Outcome.IGNORED,
                "the list repeats a device",
                tokens[later].kind.value,
                documented=False,
            )
        )
    notes.warn(f"{what} is listed twice: CUDA then enumerates no device at all")
    notes.assume(
        "a repeated device empties the whole list: PyTorch's parser and its tests encode this, NVIDIA does not "
        "document it"
    )


def _match(
    machine: Machine, token: Token, enumerated: tuple[Gpu, ...], heuristic: bool, notes: _Notes, position: int
) -> tuple[_Pick | None, str, bool]:
    """The device an entry names, or why it names none (and whether that reading is documented)."""
    if token.kind is TokenKind.INVALID:
        _explain_invalid(token, notes)
        return None, token.problem, True
    if token.padded:
        notes.assume(
            f"entry {token.text!r} has blanks around a UUID: whether CUDA accepts them is undocumented; gpudiag "
            "assumes it ignores them (PyTorch's parser does not: remove them)"
        )
    if token.kind is TokenKind.GPU_UUID:
        return _match_gpu_uuid(token, enumerated, notes, position)
    if token.kind in (TokenKind.MIG_UUID, TokenKind.MIG_LEGACY):
        return _match_mig(machine, token, enumerated, notes, position)
    return _match_index(token, enumerated, heuristic, notes)


def _explain_invalid(token: Token, notes: _Notes) -> None:
    stripped = token.text.strip(C_BLANKS)
    if stripped.lower().startswith(("gpu-", "mig-")):
        notes.assume(
            f"UUID prefixes are case-sensitive ({stripped[:4]!r} is read as a number, and fails): NVIDIA does not "
            "document the case rule; PyTorch's parser agrees"
        )
    elif stripped[:1].isdigit() and not ("0" <= stripped[0] <= "9"):
        notes.warn(
            f"entry {token.text!r} starts with a non-ASCII digit: CUDA's strtoul stops there, while PyTorch's parser "
            "reads it as a number"
        )
    elif stripped != "" and stripped[0] in "[('\"":
        notes.warn(
            f"entry {token.text!r} starts with {stripped[0]!r}: brackets and quotes are part of the value; write "
            f"{VISIBLE_VAR}=0,1 (no brackets, no quotes inside the value)"
        )


def _match_index(
    token: Token, enumerated: tuple[Gpu, ...], heuristic: bool, notes: _Notes
) -> tuple[_Pick | None, str, bool]:
    number = token.number
    assert number is not None
    _explain_index_text(token, number, notes)
    if number >= len(enumerated):
        if len(enumerated) == 0:
            return None, "out of range: no device can be enumerated", True
        return (
            None,
            f"out of range: only {len(enumerated)} device(s) can be enumerated (0..{len(enumerated) - 1})",
            True,
        )
    gpu = enumerated[number]
    how = f"device {number} in CUDA's {'heuristic ' if heuristic else ''}order"
    if gpu.index != number:
        how += f" = nvidia-smi's GPU {gpu.index}"
        notes.warn(
            f"entry {token.text.strip(C_BLANKS)!r} selects nvidia-smi's GPU {gpu.index}: integers count in CUDA's "
            "order, not nvidia-smi's"
        )
    return _Pick(None, gpu, None, how, documented=not heuristic), "", True


def _explain_index_text(token: Token, number: int, notes: _Notes) -> None:
    shown = token.text
    rest = token.ignored
    lead = token.text.lstrip(C_BLANKS).lstrip("+-")
    if rest.strip(C_BLANKS):
        tail = rest.lstrip(C_BLANKS)
        if re.match(r"-[0-9]", tail):
            notes.warn(f"entry {shown!r} is not a range: CUDA reads {number} and ignores {rest!r}; list every GPU")
        elif rest[:1] in C_BLANKS and re.match(r"[0-9]", tail):
            notes.warn(
                f"entry {shown!r} is read as {number} alone: entries are separated by commas, not blanks "
                f"({rest!r} is ignored)"
            )
        elif re.match(r"[0-9a-fA-F]{7}-|[0-9a-fA-F]{8}", lead):
            notes.warn(
                f"entry {shown!r} looks like a UUID without its 'GPU-' prefix: CUDA reads only its leading digits "
                f"(as {number})"
            )
        else:
            notes.warn(f"entry {shown!r} is read as {number}: CUDA ignores {rest!r} after the number")
    if token.signed:
        notes.assume(
            f"entry {shown!r}: strtoul reads a sign ({shown.strip(C_BLANKS)!r} → {number}), as PyTorch does; NVIDIA "
            "documents no signed entries besides its '-1' example"
        )
    if _strtoul_base0(lead) != number:
        notes.assume(
            f"entry {shown!r} is read in base 10 (as {number}), as PyTorch does; NVIDIA does not document the base "
            f"(with C's automatic base it would be {_strtoul_base0(lead)})"
        )


def _strtoul_base0(text: str) -> int:
    """strtoul(text, NULL, 0) of an entry without blanks or sign: 0x… hex, 0… octal, else decimal."""
    hexa = re.match(r"0[xX]([0-9a-fA-F]{1,16})", text)
    if hexa:
        return int(hexa.group(1), 16)
    octal = re.match(r"0([0-7]{0,22})", text)
    if octal:
        return int(octal.group(1) or "0", 8)
    decimal = re.match(r"[0-9]{1,20}", text)
    return int(decimal.group()) if decimal else 0


def _match_gpu_uuid(
    token: Token, enumerated: tuple[Gpu, ...], notes: _Notes, position: int
) -> tuple[_Pick | None, str, bool]:
    hits = [g for g in enumerated if g.uuid.value is not None and g.uuid.value.startswith(token.uuid)]
    if len(hits) == 1:
        gpu = hits[0]
        full = gpu.uuid.value == token.uuid
        return _Pick(position, gpu, None, f"UUID{'' if full else ' prefix'} of GPU {gpu.index}"), "", True
    if len(hits) > 1:
        return None, f"UUID prefix matches {len(hits)} GPUs (ambiguous)", True
    loose = [g for g in enumerated if g.uuid.value is not None and g.uuid.value.lower().startswith(token.uuid.lower())]
    if loose:
        notes.assume(
            f"entry {token.text!r} matches GPU {loose[0].index} only if case is ignored: NVIDIA does not document "
            "whether CUDA ignores case in UUIDs; gpudiag assumes it does not (nor does PyTorch)"
        )
        return None, f"no GPU has this UUID (GPU {loose[0].index} matches if case is ignored)", False
    return None, "no GPU with this UUID", True


def _match_mig(
    machine: Machine, token: Token, enumerated: tuple[Gpu, ...], notes: _Notes, position: int
) -> tuple[_Pick | None, str, bool]:
    """``MIG-<uuid>`` (driver R470+) or ``MIG-GPU-<uuid>/<GI>/<CI>`` (the older form)."""
    driver = machine.nvml.driver_version.value or ""
    major = int(driver.split(".")[0]) if driver.split(".")[0].isdigit() else None
    if token.kind is TokenKind.MIG_LEGACY:
        parents = [g for g in enumerated if g.uuid.value == token.uuid]
        if not parents:
            if any(g.uuid.value is not None and g.uuid.value.startswith(token.uuid) for g in enumerated):
                notes.assume(
                    f"entry {token.text!r} abbreviates the parent GPU's UUID: NVIDIA documents abbreviation for GPU "
                    "UUIDs only; gpudiag assumes the MIG-GPU-…/GI/CI form needs the full UUID"
                )
                return None, "parent GPU UUID abbreviated in the MIG-GPU-…/GI/CI form", False
            return None, "no GPU with this parent UUID", True
        gpu = parents[0]
        for mig in gpu.mig_devices:
            if (mig.gpu_instance_id.value, mig.compute_instance_id.value) == (
                token.gpu_instance_id,
                token.compute_instance_id,
            ):
                how = f"MIG instance GI {token.gpu_instance_id} CI {token.compute_instance_id} of GPU {gpu.index}"
                return _Pick(position, gpu, mig, how), "", True
        return (
            None,
            f"GPU {gpu.index} has no MIG instance GI {token.gpu_instance_id} / CI {token.compute_instance_id}",
            True,
        )
    if major is not None and major < 470:
        notes.warn(
            f"driver {driver} predates MIG UUIDs (R470): it reads only the MIG-GPU-<uuid>/<GI>/<CI> form, so "
            f"{token.text.strip(C_BLANKS)!r} is likely invalid there"
        )
    hits = [
        (g, m)
        for g in enumerated
        for m in g.mig_devices
        if m.uuid.value is not None and m.uuid.value.startswith(token.uuid)
    ]
    if len(hits) == 1:
        gpu, mig = hits[0]
        full = mig.uuid.value == token.uuid
        if not full:
            notes.assume(
                f"entry {token.text!r} abbreviates a MIG UUID: NVIDIA documents abbreviation for GPU UUIDs; gpudiag "
                "assumes it works the same for MIG UUIDs"
            )
        how = (
            f"MIG UUID{'' if full else ' prefix'}: GPU {gpu.index} MIG {mig.index} (GI {mig.gpu_instance_id.get('?')})"
        )
        return _Pick(position, gpu, mig, how, documented=full), "", True
    if len(hits) > 1:
        return None, f"MIG UUID prefix matches {len(hits)} instances (ambiguous)", True
    return None, "no MIG instance with this UUID", True


def _apply_mig_rules(
    machine: Machine, picks: list[_Pick], entries: list[Entry], notes: _Notes
) -> tuple[list[VisibleDevice], list[Entry]]:
    """MIG User Guide: one MIG instance per process, and no non-MIG GPU once one is enumerated."""
    by_position = {e.position: i for i, e in enumerate(entries)}

    def drop(pick: _Pick, reason: str, documented: bool = True) -> None:
        if pick.position is not None and pick.position in by_position:
            i = by_position[pick.position]
            entries[i] = replace(entries[i], outcome=Outcome.DROPPED, reason=reason, documented=documented)

    candidates: list[tuple[_Pick, MigDevice | None]] = []
    whole: list[_Pick] = []  # MIG-enabled GPUs named as a whole (or by leaving the variable unset)
    for pick in picks:
        if pick.mig is None and pick.gpu.mig_mode_current.value is True:
            if not pick.gpu.mig_devices:
                drop(pick, "MIG enabled with no instances: nothing CUDA can run on", documented=False)
                notes.warn(
                    f"GPU {pick.gpu.index} has MIG enabled with no instances: CUDA workloads cannot run on it "
                    "(create instances with nvidia-smi mig -cgi … -C)"
                )
                notes.assume(
                    f"CUDA enumerates nothing for GPU {pick.gpu.index} (MIG on, no instances) and keeps the other "
                    "devices; NVIDIA does not document whether a list naming it stops there instead"
                )
                continue
            first = min(pick.gpu.mig_devices, key=lambda m: m.index)
            whole.append(pick)
            if pick.position is not None and pick.position in by_position:
                i = by_position[pick.position]
                entries[i] = replace(
                    entries[i],
                    reason=f"{entries[i].reason}; MIG on: CUDA uses one of its instances (MIG {first.index} shown)",
                    mig_index=first.index,
                    documented=False,
                )
            candidates.append((pick, first))
            continue
        candidates.append((pick, pick.mig))

    mig_first = next(((p, m) for p, m in candidates if m is not None), None)
    kept: list[tuple[_Pick, MigDevice | None]] = []
    if mig_first is None:
        kept = candidates
    else:
        others = [(p, m) for p, m in candidates if p is not mig_first[0]]
        kept = [mig_first]
        hidden_gpus = [p.gpu.index for p, m in others if m is None]
        extra_migs = [p for p, m in others if m is not None]
        for p, m in others:
            if m is None:
                drop(p, "not enumerated: CUDA enumerates no non-MIG GPU once a MIG instance is enumerated")
            else:
                drop(p, "not enumerated: CUDA enumerates only one MIG instance per process")
        if hidden_gpus:
            notes.warn(
                f"a MIG instance is enumerated, so CUDA hides the non-MIG GPU {', '.join(map(str, hidden_gpus))} "
                f"(MIG User Guide); to use it, run a separate process with {VISIBLE_VAR} naming it alone"
            )
        if extra_migs:
            notes.warn(
                "a process can use only one MIG instance: CUDA enumerates the first and drops the rest; run one "
                "process per instance, each with its own MIG-<uuid>"
            )
        pick, first = mig_first
        if pick in whole and first is not None:
            named = f"{VISIBLE_VAR} is unset" if pick.position is None else "it is named as a whole"
            notes.assume(
                f"GPU {pick.gpu.index} has MIG enabled and {named}: the MIG User Guide says CUDA picks 'the first "
                f"one available' of its instances without saying which; gpudiag shows MIG {first.index} "
                f"({first.uuid.get('?')}). Name the instance: {VISIBLE_VAR}=MIG-<uuid>"
            )
        driver = machine.nvml.driver_version.get("?")
        notes.assume(
            "the one-MIG-instance and no-non-MIG-GPU limits are documented for CUDA 11/R450 and CUDA 12/R525 drivers; "
            f"NVIDIA says later drivers may relax them (this driver: {driver})"
        )
    devices = [_device(0, p.gpu, m) for p, m in kept]
    return devices, entries


def _numbered(devices: list[VisibleDevice]) -> list[VisibleDevice]:
    return [replace(d, ordinal=i) for i, d in enumerate(devices)]


def _device(ordinal: int, gpu: Gpu, mig: MigDevice | None) -> VisibleDevice:
    memory = mig.memory.value if mig is not None else gpu.memory.value
    return VisibleDevice(
        ordinal=ordinal,
        gpu_index=gpu.index,
        mig=mig,
        uuid=(mig.uuid.value if mig is not None else gpu.uuid.value) or "?",
        pci_bus_id=gpu.pci_bus_id.get("?"),
        name=(mig.name.value if mig is not None else gpu.name.value) or "?",
        memory_total_bytes=memory.total_bytes if memory is not None else None,
        parent_uuid=gpu.uuid.get("?"),
        compute_mode=gpu.compute_mode.value.value if gpu.compute_mode.value is not None else "",
    )


# --- PyTorch's own reading ------------------------------------------------------------

TORCH_NVML_QUERIES = "torch.cuda.utilization / memory_usage / temperature / power_draw / clock_rate"


def _torch_strtoul(s: str) -> int:
    """torch.cuda._parse_visible_devices' ``_strtoul``: Python's isdigit/int, so it reads non-ASCII
    digits that C does not, and raises ValueError on '+', '-' or a digit int() refuses ('²')."""
    if not s:
        return -1
    idx = 0
    for idx, c in enumerate(s):
        if not (c.isdigit() or (idx == 0 and c in "+-")):
            break
        if idx + 1 == len(s):
            idx += 1
    return int(s[:idx]) if idx > 0 else -1


def _torch_parse(value: str | None) -> list[int] | list[str]:
    """torch.cuda._parse_visible_devices (torch 2.13, CUDA builds)."""
    if value is None:
        return list(range(64))
    for prefix in ("GPU-", "MIG-"):
        if value.startswith(prefix):
            found: list[str] = []
            for elem in value.split(","):
                if elem in found:
                    return []
                if not elem.startswith(prefix):
                    break
                found.append(elem)
            return found
    numbers: list[int] = []
    for elem in value.split(","):
        x = _torch_strtoul(elem.strip())
        if x in numbers:
            return []
        if x < 0:
            break
        numbers.append(x)
    return numbers


def _torch_uuid_ordinals(candidates: list[str], uuids: list[str]) -> list[int]:
    """torch.cuda._transform_uuid_to_ordinals: unique prefixes of NVML's UUIDs, in NVML order."""
    ordinals: list[int] = []
    for candidate in candidates:
        hits = [i for i, u in enumerate(uuids) if u.startswith(candidate)]
        if len(hits) != 1:
            break
        if hits[0] in ordinals:
            return []
        ordinals.append(hits[0])
    return ordinals


def pytorch_view(machine: Machine, value: str | None, resolution: Resolution) -> PytorchView:
    """What torch.cuda makes of the variable before/around CUDA, reproduced from its source."""
    cuda_count = len(resolution.devices)
    nvml_uuids = [g.uuid.value for g in machine.gpus]
    uuids = [u for u in nvml_uuids if u is not None] if all(u is not None for u in nvml_uuids) else None
    try:
        parsed = _torch_parse(value)
    except ValueError as exc:
        error = f"ValueError: {exc}"
        failing = tuple(TorchNvmlIndex(d.ordinal, None, error) for d in resolution.devices)
        divergence = (
            f"torch.cuda.device_count() raises {error} until CUDA initialises (PyTorch reads the variable with its "
            "own parser, which cannot read this value; CUDA itself can)"
        )
        return PytorchView(None, error, False, failing, (divergence,))

    asks_cuda = False
    count: int
    ordinals: list[int] | None = None
    if not parsed:
        count = 0
        ordinals = []
    elif isinstance(parsed[0], str):
        strings = [str(p) for p in parsed]
        if strings[0].startswith("MIG-") or uuids is None:
            asks_cuda, count = True, cuda_count
        else:
            ordinals = _torch_uuid_ordinals(strings, uuids)
            count = len(ordinals)
    else:
        numbers = [int(p) for p in parsed]
        raw = len(machine.gpus)
        count = next((i for i, n in enumerate(numbers) if n >= raw), len(numbers))
        ordinals = numbers

    indices: list[TorchNvmlIndex] = []
    for d in resolution.devices:
        if not parsed:
            indices.append(TorchNvmlIndex(d.ordinal, None, "IndexError: list index out of range"))
        elif isinstance(parsed[0], str) and uuids is None:
            indices.append(TorchNvmlIndex(d.ordinal, None, "RuntimeError: Can't get device UUIDs"))
        elif ordinals is None or d.ordinal >= len(ordinals):
            seen = ordinals if ordinals is not None else []
            indices.append(
                TorchNvmlIndex(
                    d.ordinal, None, f"RuntimeError: device {d.ordinal} is not visible ({VISIBLE_VAR}={seen})"
                )
            )
        else:
            indices.append(TorchNvmlIndex(d.ordinal, ordinals[d.ordinal]))

    divergences: list[str] = []
    if count != cuda_count:
        divergences.append(
            f"torch.cuda.device_count() returns {count} until CUDA initialises (PyTorch reads the variable itself, "
            f"through NVML), then {cuda_count}: code that sizes anything from it early sees {count}"
        )
    wrong = [i for i, d in zip(indices, resolution.devices, strict=True) if i.nvml_index != d.gpu_index]
    if wrong:
        shown = ", ".join(
            f"cuda:{i.ordinal} → "
            + (f"GPU {i.nvml_index}" if i.nvml_index is not None else i.error.split(":")[0])
            + f" (CUDA: GPU {resolution.devices[i.ordinal].gpu_index})"
            for i in wrong[:4]
        )
        divergences.append(
            f"{TORCH_NVML_QUERIES} map cuda:N to an NVML GPU with PyTorch's own reading of the variable (which "
            f"ignores {ORDER_VAR} and MIG): "
            f"{shown}{' …' if len(wrong) > 4 else ''}"
        )
    return PytorchView(count, "", asks_cuda, tuple(indices), tuple(divergences))


# --- choosing GPUs: --select ------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    gpu: Gpu
    mig: MigDevice | None = None


def select_targets(machine: Machine, ids: str) -> tuple[Target, ...]:
    """GPUs (NVML index, UUID or prefix, bus id) or one MIG instance (MIG-…), in the order given."""
    targets: list[Target] = []
    for raw in ids.split(","):
        token = raw.strip()
        if not token:
            raise UsageError(f"empty entry in --select {ids!r}")
        if token.upper().startswith("MIG-"):
            hits = [
                Target(g, m)
                for g in machine.gpus
                for m in g.mig_devices
                if m.uuid.value is not None and m.uuid.value.lower().startswith(token.lower())
            ]
            if len(hits) != 1:
                raise UsageError(
                    f"MIG UUID prefix {token!r} matches {len(hits)} MIG instances"
                    + ("; give more characters" if hits else " on this machine")
                )
            target = hits[0]
        else:
            target = Target(select_gpus(machine.gpus, token)[0])
            if target.gpu.state is not GpuState.OK:
                raise UsageError(f"GPU {target.gpu.index} is lost or failed: CUDA cannot use it")
            if target.gpu.mig_mode_current.value is True:
                names = ", ".join(m.uuid.get("?") for m in target.gpu.mig_devices) or "none: create some first"
                raise UsageError(f"GPU {target.gpu.index} has MIG enabled: select one of its MIG instances ({names})")
        if target not in targets:
            targets.append(target)
    migs = [t for t in targets if t.mig is not None]
    if migs and len(targets) > 1:
        raise UsageError(
            "a process can use only one MIG instance, and no other GPU beside it: select one MIG instance alone"
        )
    return tuple(targets)


def export_lines(machine: Machine, targets: tuple[Target, ...]) -> tuple[str, ...]:
    """The export line(s) that make exactly these targets visible, in this order.

    For GPUs: by index under PCI order (nvidia-smi's numbers), and by UUID (immune to ordering);
    for a MIG instance: by its UUID.
    """
    if any(t.mig is not None for t in targets):
        return (f"export {VISIBLE_VAR}={','.join(t.mig.uuid.get('?') for t in targets if t.mig is not None)}",)
    by_bus, _ = enumeration_order(machine, "PCI_BUS_ID")
    positions = {g.index: i for i, g in enumerate(by_bus)}
    ordinals = [positions[t.gpu.index] for t in targets]
    uuids = [t.gpu.uuid.get("?") for t in targets]
    return (
        f"export {ORDER_VAR}=PCI_BUS_ID {VISIBLE_VAR}={','.join(map(str, ordinals))}",
        f"export {VISIBLE_VAR}={','.join(uuids)}",
    )


def export_line(machine: Machine, indices: tuple[int, ...]) -> tuple[str, str]:
    """By index under PCI order, and by UUID, for these NVML-indexed GPUs (no MIG)."""
    lines = export_lines(machine, tuple(Target(machine.gpu(i)) for i in indices))
    return lines[0], lines[1]


# --- hints for the code users write ---------------------------------------------------


def code_hints(resolution: Resolution) -> tuple[str, ...]:
    """What the indices in users' PyTorch code refer to under this setting."""
    devs = resolution.devices
    if not devs:
        return (
            "no device is visible: torch.cuda.is_available() is False and any cuda:N fails ('no CUDA GPUs are "
            "available')",
            f"{VISIBLE_VAR} is read once per process, when CUDA initialises: fix it before the process starts",
        )

    def name(d: VisibleDevice) -> str:
        return f"GPU {d.gpu_index}" + (f" MIG {d.mig.index}" if d.mig is not None else "")

    n = len(devs)
    mapping = ", ".join(f"cuda:{d.ordinal} = {name(d)}" for d in devs[:8]) + (" …" if n > 8 else "")
    hints = [f"inside the program the devices are numbered from 0: {mapping} (GPU = nvidia-smi's number)"]
    if devs[0].mig is not None:
        hints.append(
            "a MIG instance is the process's only device (cuda:0): DataParallel and DDP cannot span MIG instances in "
            "one process; run one process per instance, each with its own MIG-<uuid>"
        )
    else:
        physical = [d.gpu_index for d in devs]
        logical = list(range(n))
        example = ""
        numbers = f"0..{n - 1}" if n > 1 else "only 0 here"
        if physical != logical:
            example = f"; e.g. device_ids={logical[:4]}{'…' if n > 4 else ''}, not {physical[:4]}{'…' if n > 4 else ''}"
        hints += [
            f"DataParallel(device_ids=[…]) takes these numbers, {numbers}{example}; a larger id fails with "
            "'invalid device ordinal'; the module must be on device_ids[0] before wrapping",
            f"output_device defaults to device_ids[0] (here {name(devs[0])}): outputs are gathered there, so that GPU "
            "holds more memory than the others",
            "DDP / torchrun: one process per device, torch.cuda.set_device(local_rank): "
            + ", ".join(f"rank {d.ordinal} → {name(d)}" for d in devs[:4])
            + (" …" if n > 4 else "")
            + f"; more ranks than {n} fail; if each process gets its own {VISIBLE_VAR}=<one GPU>, use cuda:0 there",
        ]
    hints.append(
        f"{VISIBLE_VAR} (and {ORDER_VAR}) are read once per process, when CUDA initialises: set them before the "
        "process starts; changing os.environ after the first CUDA call does nothing"
    )
    uuids = ",".join(d.uuid for d in devs)
    ids = devs[0].uuid if devs[0].mig is not None else ",".join(str(d.gpu_index) for d in devs)
    hints.append(
        f"to pin exactly this set regardless of ordering, name it by UUID (`gpudiag visible --select {ids}` prints "
        f"the line): export {VISIBLE_VAR}={uuids}"
    )
    return tuple(hints)


# --- asking the real runtime (--probe) --------------------------------------------------


@dataclass(frozen=True)
class ProbedDevice:
    ordinal: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total_bytes: int | None


@dataclass(frozen=True)
class ProbeSource:
    name: str  # "driver" or "torch"
    label: str  # for people: "CUDA driver API (cuInit in a child process)", "torch 2.5.1 (CUDA 12.4)"
    devices: tuple[ProbedDevice, ...] | None  # None: this source could not answer
    detail: str  # why not, or a remark


@dataclass(frozen=True)
class ProbeReport:
    status: str  # agrees | disagrees | could_not_run | not_compared
    summary: str
    sources: tuple[ProbeSource, ...]
    disagreements: tuple[str, ...]
    notes: tuple[str, ...]
    torch_count_before_init: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "agrees"


def _uuid_core(uuid: str | None) -> str:
    if not uuid:
        return ""
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _probed_devices(raw: Any) -> tuple[ProbedDevice, ...] | None:
    if not isinstance(raw, list):
        return None
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        out.append(
            ProbedDevice(
                ordinal=i,
                name=str(item.get("name") or ""),
                uuid=str(item.get("uuid") or ""),
                pci_bus_id=str(item.get("pci_bus_id") or ""),
                memory_total_bytes=_int_or_none(item.get("total_memory_bytes")),
            )
        )
    return tuple(out)


def _source(name: str, raw: Any) -> ProbeSource | None:
    if not isinstance(raw, Mapping):
        return None
    label = str(raw.get("label") or name)
    devices = _probed_devices(raw.get("devices"))
    error = str(raw.get("error") or "")
    if error:
        devices = None
    return ProbeSource(name, label, devices, error or str(raw.get("detail") or ""))


def _same_device(computed: VisibleDevice, seen: ProbedDevice) -> tuple[bool, str]:
    seen_core = _uuid_core(seen.uuid)
    if seen_core:
        if seen_core == _uuid_core(computed.uuid):
            return True, ""
        if computed.mig is not None and seen_core == _uuid_core(computed.parent_uuid):
            return True, f"cuda:{computed.ordinal}: the runtime reports the parent GPU's UUID for the MIG device"
        return False, ""
    if seen.pci_bus_id and computed.pci_bus_id != "?" and computed.mig is None:
        return normalize_bus_id(seen.pci_bus_id) == normalize_bus_id(computed.pci_bus_id), ""
    if seen.name:
        return seen.name == computed.name, f"cuda:{computed.ordinal}: compared by name only (no UUID or bus id)"
    return True, f"cuda:{computed.ordinal}: nothing to compare it by"


def _describe(seen: ProbedDevice) -> str:
    bits = [seen.name or "?"]
    if seen.uuid:
        bits.append(seen.uuid)
    if seen.pci_bus_id:
        bits.append(seen.pci_bus_id)
    return " ".join(bits)


def probe_report(resolution: Resolution | None, data: Mapping[str, Any]) -> ProbeReport:
    """Compare what the CUDA runtime reported (the child's result) with the computed mapping.

    ``data`` comes from a child process: any shape is accepted, nothing here raises.
    """
    sources = tuple(s for s in (_source("driver", data.get("driver")), _source("torch", data.get("torch"))) if s)
    answered = [s for s in sources if s.devices is not None]
    disagreements: list[str] = []
    notes: list[str] = []
    torch_raw = data.get("torch")
    torch_before = None
    if isinstance(torch_raw, Mapping):
        torch_before = _int_or_none(torch_raw.get("count_before_init"))
    if not answered:
        summary = "could not ask CUDA" if sources else "could not ask CUDA: the probe reported nothing"
        return ProbeReport("could_not_run", summary, sources, (), (), torch_before)
    if resolution is None:
        counts = ", ".join(f"{s.label}: {len(s.devices or ())} device(s)" for s in answered)
        return ProbeReport(
            "not_compared", f"{counts}; gpudiag computed no mapping to compare", sources, (), (), torch_before
        )
    computed = resolution.devices
    for s in answered:
        seen = s.devices or ()
        if len(seen) != len(computed):
            disagreements.append(f"{s.label} sees {len(seen)} device(s), gpudiag computed {len(computed)}")
        for d, p in zip(computed, seen, strict=False):
            same, note = _same_device(d, p)
            if note:
                notes.append(note)
            if not same:
                disagreements.append(
                    f"{s.label}: cuda:{d.ordinal} is {_describe(p)}; gpudiag computed GPU {d.gpu_index} "
                    f"({d.name}, {d.uuid})"
                )
    predicted = resolution.pytorch
    if isinstance(torch_raw, Mapping) and predicted is not None and not predicted.asks_cuda:
        before_error = str(torch_raw.get("count_before_init_error") or "")
        if torch_before is not None and predicted.count_before_init is not None:
            if torch_before != predicted.count_before_init:
                disagreements.append(
                    f"torch.cuda.device_count() before CUDA initialised returned {torch_before}; gpudiag predicted "
                    f"{predicted.count_before_init} from PyTorch's parser"
                )
        elif before_error and predicted.count_before_init is not None:
            disagreements.append(
                f"torch.cuda.device_count() before CUDA initialised raised {before_error}; gpudiag predicted "
                f"{predicted.count_before_init}"
            )
        elif torch_before is not None and predicted.count_before_init is None:
            disagreements.append(
                f"torch.cuda.device_count() before CUDA initialised returned {torch_before}; gpudiag predicted that it "
                f"raises {predicted.error}"
            )
    labels = " and ".join(f"{s.label} ({len(s.devices or ())} device(s))" for s in answered)
    unanswered = [s for s in sources if s.devices is None]
    notes += [f"{s.label} could not answer: {s.detail}" for s in unanswered]
    if disagreements:
        return ProbeReport(
            "disagrees",
            f"DISAGREES with the computed mapping: {labels}",
            sources,
            tuple(dict.fromkeys(disagreements)),
            tuple(dict.fromkeys(notes)),
            torch_before,
        )
    return ProbeReport("agrees", f"agrees: {labels}", sources, (), tuple(dict.fromkeys(notes)), torch_before)


def probe_failed(detail: str) -> ProbeReport:
    """The child itself could not run (timeout, crash, no interpreter)."""
    return ProbeReport("could_not_run", f"could not ask CUDA: the probe process {detail}", (), (), ())


# Runs in a child process with the evaluated environment (gpudiag itself never initialises CUDA).
# First the driver API through ctypes (no torch needed), then torch: its device_count() before CUDA
# initialises (PyTorch's own parser) and its devices after. GPUDIAG_LIBCUDA names another libcuda.
PROBE_CODE = r"""
import ctypes, os, sys

def first_line(exc):
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]

def fmt_uuid(raw):
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

def driver_probe():
    name = os.environ.get("GPUDIAG_LIBCUDA") or "libcuda.so.1"
    out = {"label": "CUDA driver API (cuInit in a child process)"}
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        out["error"] = f"no NVIDIA driver here: {name} cannot be loaded ({first_line(exc)})"
        return out
    c_int, c_size_t, c_char_p, byref = ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, ctypes.byref
    def call(fn, *args):
        return int(fn(*args))
    def err_name(rc):
        text = c_char_p()
        try:
            lib.cuGetErrorName.argtypes = [c_int, ctypes.POINTER(c_char_p)]
            if call(lib.cuGetErrorName, rc, byref(text)) == 0 and text.value:
                return text.value.decode(errors="replace")
        except AttributeError:
            pass
        return "CUDA error"
    try:
        lib.cuInit.argtypes = [ctypes.c_uint]
        rc = call(lib.cuInit, 0)
        if rc == 100:  # CUDA_ERROR_NO_DEVICE: the setting leaves no device
            out["devices"] = []
            out["detail"] = "cuInit: CUDA_ERROR_NO_DEVICE (100)"
            return out
        if rc != 0:
            out["error"] = f"cuInit failed: {err_name(rc)} ({rc})"
            return out
        count = c_int(0)
        lib.cuDeviceGetCount.argtypes = [ctypes.POINTER(c_int)]
        rc = call(lib.cuDeviceGetCount, byref(count))
        if rc != 0:
            out["error"] = f"cuDeviceGetCount failed: {err_name(rc)} ({rc})"
            return out
        get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
        total_mem = getattr(lib, "cuDeviceTotalMem_v2", None) or getattr(lib, "cuDeviceTotalMem", None)
        devices = []
        for i in range(count.value):
            dev = c_int(0)
            lib.cuDeviceGet.argtypes = [ctypes.POINTER(c_int), c_int]
            if call(lib.cuDeviceGet, byref(dev), i) != 0:
                devices.append({"name": "", "uuid": "", "pci_bus_id": ""})
                continue
            entry = {"name": "", "uuid": "", "pci_bus_id": ""}
            buf = ctypes.create_string_buffer(256)
            lib.cuDeviceGetName.argtypes = [ctypes.c_char_p, c_int, c_int]
            if call(lib.cuDeviceGetName, buf, 256, dev.value) == 0:
                entry["name"] = buf.value.decode(errors="replace")
            if get_uuid is not None:
                raw = (ctypes.c_ubyte * 16)()
                get_uuid.argtypes = [ctypes.POINTER(ctypes.c_ubyte * 16), c_int]
                if call(get_uuid, byref(raw), dev.value) == 0:
                    entry["uuid"] = fmt_uuid(raw)
            bus = ctypes.create_string_buffer(64)
            lib.cuDeviceGetPCIBusId.argtypes = [ctypes.c_char_p, c_int, c_int]
            if call(lib.cuDeviceGetPCIBusId, bus, 64, dev.value) == 0:
                entry["pci_bus_id"] = bus.value.decode(errors="replace")
            if total_mem is not None:
                size = c_size_t(0)
                total_mem.argtypes = [ctypes.POINTER(c_size_t), c_int]
                if call(total_mem, byref(size), dev.value) == 0:
                    entry["total_memory_bytes"] = int(size.value)
            devices.append(entry)
        out["devices"] = devices
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {first_line(exc)}"
    return out

def torch_probe():
    out = {"label": "torch"}
    try:
        import torch
    except ModuleNotFoundError:
        out["error"] = f"torch is not installed for {sys.executable}"
        return out
    except Exception as exc:
        out["error"] = f"torch cannot be imported: {type(exc).__name__}: {first_line(exc)}"
        return out
    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["label"] = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else "")
    if torch.version.cuda is None:
        out["error"] = f"this torch ({torch.__version__}) is a CPU-only build: it cannot see CUDA devices"
        return out
    try:
        out["count_before_init"] = int(torch.cuda.device_count())
    except Exception as exc:
        out["count_before_init_error"] = f"{type(exc).__name__}: {first_line(exc)}"
    try:
        torch.cuda.init()
    except Exception as exc:
        text = first_line(exc)
        if "No CUDA GPUs are available" in text:
            out["devices"] = []
            out["detail"] = text
        else:
            out["error"] = text
        return out
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        entry = {"name": p.name, "uuid": str(getattr(p, "uuid", "") or ""), "total_memory_bytes": int(p.total_memory)}
        if hasattr(p, "pci_bus_id") and hasattr(p, "pci_domain_id") and hasattr(p, "pci_device_id"):
            entry["pci_bus_id"] = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        devices.append(entry)
    out["devices"] = devices
    return out

emit({
    "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")},
    "driver": driver_probe(),
    "torch": torch_probe(),
})
"""
