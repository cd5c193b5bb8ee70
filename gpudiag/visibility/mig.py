"""MIG: matching MIG-<uuid> and MIG-GPU-<uuid>/GI/CI entries, and the one-instance-per-process rules."""

from __future__ import annotations

from dataclasses import replace

from gpudiag.model import Gpu, Machine, MigDevice
from gpudiag.visibility.picks import Notes, Pick, device
from gpudiag.visibility.result import C_BLANKS, VISIBLE_VAR, Entry, Outcome, Token, TokenKind, VisibleDevice


def match_mig(
    machine: Machine, token: Token, enumerated: tuple[Gpu, ...], notes: Notes, position: int
) -> tuple[Pick | None, str, bool]:
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
                return Pick(position, gpu, mig, how), "", True
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
        return Pick(position, gpu, mig, how, documented=full), "", True
    if len(hits) > 1:
        return None, f"MIG UUID prefix matches {len(hits)} instances (ambiguous)", True
    return None, "no MIG instance with this UUID", True


def apply_mig_rules(
    machine: Machine, picks: list[Pick], entries: list[Entry], notes: Notes
) -> tuple[list[VisibleDevice], list[Entry]]:
    """MIG User Guide: one MIG instance per process, and no non-MIG GPU once one is enumerated."""
    by_position = {e.position: i for i, e in enumerate(entries)}

    def drop(pick: Pick, reason: str, documented: bool = True) -> None:
        if pick.position is not None and pick.position in by_position:
            i = by_position[pick.position]
            entries[i] = replace(entries[i], outcome=Outcome.DROPPED, reason=reason, documented=documented)

    candidates: list[tuple[Pick, MigDevice | None]] = []
    whole: list[Pick] = []  # MIG-enabled GPUs named as a whole (or by leaving the variable unset)
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
    kept: list[tuple[Pick, MigDevice | None]] = []
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
    devices = [device(0, p.gpu, m) for p, m in kept]
    return devices, entries
