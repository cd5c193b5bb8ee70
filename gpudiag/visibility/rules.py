"""The rules: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER against a machine (:func:`resolve`)."""

from __future__ import annotations

import re
from dataclasses import replace

from gpudiag.model import ComputeMode, Gpu, GpuState, Machine
from gpudiag.visibility.entries import parse_token
from gpudiag.visibility.mig import apply_mig_rules, match_mig
from gpudiag.visibility.order import enumeration_order, kind
from gpudiag.visibility.picks import Notes, Pick, numbered
from gpudiag.visibility.pytorch import pytorch_view
from gpudiag.visibility.result import (
    C_BLANKS,
    DEFAULT_ORDER,
    NARROWING_NOTES,
    ORDER_VAR,
    ORDERS,
    SUMMARY_KIND,
    VISIBLE_VAR,
    Entry,
    Outcome,
    Resolution,
    Token,
    TokenKind,
    shown_value,
)


def _effective_order(order: str | None, notes: Notes) -> str:
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
    notes = Notes()
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
    picks: list[Pick] = []
    cuinit_error = ""
    if value is None:
        picks = [Pick(None, g, None, "every device") for g in enumerated]
    elif value == "":
        notes.warn(f"{VISIBLE_VAR} is set but empty: CUDA sees no device at all (unset it to see every GPU)")
    else:
        picks, cuinit_error = _read_list(machine, value, enumerated, heuristic, entries, notes)

    devices, entries = apply_mig_rules(machine, picks, entries, notes)
    devices = numbered(devices)
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
    if not devices:
        cuinit_error = cuinit_error or NO_DEVICE
    if (
        value not in (None, "")
        and not devices
        and machine.gpus
        and cuinit_error == NO_DEVICE
        and not notes.warnings_about("the first entry")
    ):
        notes.warn(
            f"{VISIBLE_VAR}={shown_value(value)} leaves no device: CUDA reports 'no CUDA-capable device is detected'"
        )
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
        cuinit_error=cuinit_error,
    )
    return replace(resolution, pytorch=pytorch_view(machine, value, resolution))


def _capability_ties(enumerated: tuple[Gpu, ...]) -> str:
    by_cc: dict[tuple[int, int] | None, list[Gpu]] = {}
    for g in enumerated:
        by_cc.setdefault(g.compute_capability.value, []).append(g)
    groups = [gs for gs in by_cc.values() if len({kind(g) for g in gs}) > 1]
    return "; ".join(
        "GPUs " + ", ".join(str(g.index) for g in gs) + " differ but have the same compute capability" for gs in groups
    )


OBSERVED = "observed on driver 580.159.04 (H100), not documented by NVIDIA"
NO_DEVICE = "CUDA_ERROR_NO_DEVICE (100)"
INVALID_DEVICE = "CUDA_ERROR_INVALID_DEVICE (101)"
SHOWN_AFTER_STOP = 8  # entries after the point where CUDA stops that are listed one by one


def _form(token: Token) -> str:
    """An entry's form: a UUID (GPU-/MIG-) or anything else, which CUDA reads as a number."""
    return "uuid" if token.kind in (TokenKind.GPU_UUID, TokenKind.MIG_UUID, TokenKind.MIG_LEGACY) else "index"


def _not_read(texts: list[str], start: int, reason: str, documented: bool = True) -> list[Entry]:
    """The entries after the point where CUDA stopped: a few by name, the rest summed up, none parsed
    (a value of 50,000 entries is read as far as CUDA reads it, not further)."""
    shown = [
        Entry(i, texts[i], Outcome.IGNORED, reason, documented=documented)
        for i in range(start, min(len(texts), start + SHOWN_AFTER_STOP))
    ]
    rest = len(texts) - start - len(shown)
    if rest > 0:
        shown.append(
            Entry(
                start + len(shown),
                f"… {rest} more entr{'y' if rest == 1 else 'ies'}",
                Outcome.IGNORED,
                reason,
                SUMMARY_KIND,
                documented=documented,
            )
        )
    return shown


def _read_list(
    machine: Machine,
    value: str,
    enumerated: tuple[Gpu, ...],
    heuristic: bool,
    entries: list[Entry],
    notes: Notes,
) -> tuple[list[Pick], str]:
    """Read the comma-separated list left to right as CUDA does: it stops at the first invalid
    entry and at the first entry of the other form (index vs UUID); a repeated device fails cuInit.

    Returns the picks and, when the list itself makes cuInit fail, the error CUDA gives.
    """
    texts = value.split(",")
    picks: list[Pick] = []
    first_form = ""
    for position, text in enumerate(texts):
        token = parse_token(text)
        form = _form(token)
        if position == 0:
            first_form = form
        elif form != first_form and token.kind is not TokenKind.INVALID:
            entries.append(
                Entry(
                    position,
                    token.text,
                    Outcome.DROPPED,
                    f"{'a UUID' if form == 'uuid' else 'an index'} after "
                    f"{'indices' if first_form == 'index' else 'UUIDs'}: CUDA stops here ({OBSERVED})",
                    token.kind.value,
                    documented=False,
                )
            )
            entries.extend(_not_read(texts, position + 1, "after the list changed form CUDA reads no further", False))
            notes.warn(
                f"the list mixes integer indices and UUIDs: CUDA reads only up to the first entry of the other form "
                f"({token.text.strip(C_BLANKS)!r} and what follows are ignored); use one form"
            )
            notes.assume(f"a list that mixes indices and UUIDs ends at the first entry of the other form: {OBSERVED}")
            return picks, ""
        pick, problem, documented = _match(machine, token, enumerated, heuristic, notes, position)
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
            entries.extend(_not_read(texts, position + 1, "after an invalid entry CUDA reads no further"))
            if position == 0:
                notes.warn(
                    f"the first entry, {token.text!r}, is invalid: no device is visible, CUDA reports 'no CUDA-capable "
                    "device is detected'"
                    + (" (a common way to hide every GPU on purpose)" if token.text.strip(C_BLANKS) == "-1" else "")
                )
            return picks, ""
        pick = replace(pick, position=position)
        repeat = next((p for p in picks if p.gpu.index == pick.gpu.index and p.mig is pick.mig), None)
        if repeat is not None:
            _fail_on_repeat(texts, token, position, pick, entries, notes)
            return [], INVALID_DEVICE
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
    return picks, ""


def _fail_on_repeat(
    texts: list[str], token: Token, position: int, pick: Pick, entries: list[Entry], notes: Notes
) -> None:
    what = f"GPU {pick.gpu.index}" + (f" MIG {pick.mig.index}" if pick.mig else "")
    for i, old in enumerate(entries):
        entries[i] = replace(
            old, outcome=Outcome.DROPPED, reason=f"the list repeats {what}: cuInit fails", documented=False
        )
    entries.append(
        Entry(
            position,
            token.text,
            Outcome.DROPPED,
            f"repeats {what}",
            token.kind.value,
            pick.gpu.index,
            pick.mig.index if pick.mig else None,
            False,
        )
    )
    entries.extend(_not_read(texts, position + 1, "the list repeats a device", False))
    notes.warn(
        f"{what} is listed twice: cuInit fails with {INVALID_DEVICE}, so no device is usable "
        "(torch: 'Error 101: invalid device ordinal')"
    )
    notes.assume(
        f"a repeated device makes cuInit fail with {INVALID_DEVICE}: {OBSERVED} (PyTorch's parser, which runs "
        "before CUDA, reads such a list as no device)"
    )


def _match(
    machine: Machine, token: Token, enumerated: tuple[Gpu, ...], heuristic: bool, notes: Notes, position: int
) -> tuple[Pick | None, str, bool]:
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
        return match_mig(machine, token, enumerated, notes, position)
    return _match_index(token, enumerated, heuristic, notes)


def _explain_invalid(token: Token, notes: Notes) -> None:
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
    token: Token, enumerated: tuple[Gpu, ...], heuristic: bool, notes: Notes
) -> tuple[Pick | None, str, bool]:
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
    return Pick(None, gpu, None, how, documented=not heuristic), "", True


def _explain_index_text(token: Token, number: int, notes: Notes) -> None:
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
    token: Token, enumerated: tuple[Gpu, ...], notes: Notes, position: int
) -> tuple[Pick | None, str, bool]:
    if token.uuid == "GPU-":
        notes.assume(f"'GPU-' with nothing after it names no device (it is not a prefix of every UUID): {OBSERVED}")
        return None, "'GPU-' with no UUID after it names no device", False
    hits = [g for g in enumerated if g.uuid.value is not None and g.uuid.value.startswith(token.uuid)]
    if len(hits) == 1:
        gpu = hits[0]
        full = gpu.uuid.value == token.uuid
        return Pick(position, gpu, None, f"UUID{'' if full else ' prefix'} of GPU {gpu.index}"), "", True
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
