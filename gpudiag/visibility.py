"""Which GPUs a CUDA program will see, and as which ``cuda:N`` — computed, not probed.

A pure function of the machine (NVML facts) and the two variables CUDA reads at
initialisation: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. The rules are NVIDIA's
documented ones (CUDA C Programming Guide, "CUDA Environment Variables"; the MIG User
Guide); where CUDA's behaviour is not documented the result says so instead of guessing
silently. PyTorch mirrors the same rules in ``torch.cuda._parse_visible_devices``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from gpudiag.model import Gpu, GpuState, Machine, MigDevice
from gpudiag.selection import normalize_bus_id

VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"
ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")

# Variables that shrink the set of GPUs before CUDA_VISIBLE_DEVICES is applied.
NARROWING_NOTES = {
    "NVIDIA_VISIBLE_DEVICES": "the NVIDIA container runtime exposed only these GPUs to this container",
    "SLURM_JOB_GPUS": "Slurm allocated these GPUs (global ids) to the job; under ConstrainDevices the job "
    "sees only them and CUDA_VISIBLE_DEVICES counts from 0 inside the job",
    "SLURM_STEP_GPUS": "Slurm allocated these GPUs (global ids) to this job step",
    "CUDA_MPS_PIPE_DIRECTORY": "an MPS server is in use: clients see the devices the MPS server was started with",
}


class Outcome(str, enum.Enum):
    USED = "used"
    DROPPED = "dropped"  # this entry, and (for invalid ones) everything after it
    IGNORED = "ignored"  # after an invalid entry: CUDA stopped reading


@dataclass(frozen=True)
class Entry:
    position: int
    token: str
    outcome: Outcome
    reason: str  # why dropped/ignored, or how it was read when used


@dataclass(frozen=True)
class VisibleDevice:
    ordinal: int  # cuda:N in the program
    gpu_index: int  # NVML index (nvidia-smi's)
    mig: MigDevice | None
    uuid: str
    pci_bus_id: str
    name: str
    memory_total_bytes: int | None


@dataclass(frozen=True)
class Resolution:
    value: str | None  # None: the variable is unset
    order: str
    order_is_heuristic: bool  # FASTEST_FIRST among GPUs that differ: CUDA's order is unpublished
    devices: tuple[VisibleDevice, ...]
    entries: tuple[Entry, ...]
    warnings: tuple[str, ...]
    narrowing: tuple[tuple[str, str, str], ...]  # (variable, value, what it means)


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


def enumeration_order(machine: Machine, order: str) -> tuple[tuple[Gpu, ...], bool]:
    """CUDA's device order before CUDA_VISIBLE_DEVICES, and whether it is a guess.

    PCI_BUS_ID is exact. FASTEST_FIRST (the default) is NVIDIA's unpublished heuristic: with
    identical GPUs it falls back to PCI order, with different GPUs we put the higher compute
    capability first and say the order is a heuristic.
    """
    usable = [g for g in machine.gpus if g.state is GpuState.OK]
    by_bus = sorted(usable, key=_bus_key)
    if order == "PCI_BUS_ID":
        return tuple(by_bus), False
    kinds = {(g.name.value, g.compute_capability.value) for g in by_bus}
    if len(kinds) <= 1:
        return tuple(by_bus), False
    ranked = sorted(by_bus, key=lambda g: tuple(-x for x in g.compute_capability.get((0, 0))))
    return tuple(ranked), True


def _strtoul(token: str) -> int | None:
    """What C's strtoul reads, as CUDA does: leading blanks skipped, digits, rest ignored.

    None when no digits start the token. A leading '-' makes strtoul wrap to a huge
    number, which is out of range for any machine: also None here, reported as negative.
    """
    match = re.match(r"\s*\+?(\d+)", token)
    return int(match.group(1)) if match else None


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
    )


def _match_uuid(token: str, gpus: tuple[Gpu, ...]) -> tuple[Gpu | None, str]:
    hits = [g for g in gpus if g.uuid.value is not None and g.uuid.value.startswith(token)]
    if len(hits) == 1:
        return hits[0], ""
    if len(hits) > 1:
        return None, f"UUID prefix matches {len(hits)} GPUs (ambiguous): CUDA stops here"
    loose = [g for g in gpus if g.uuid.value is not None and g.uuid.value.lower().startswith(token.lower())]
    if loose:
        return None, f"no GPU has this UUID; GPU {loose[0].index} matches only if case is ignored: CUDA stops here"
    return None, "no GPU with this UUID: CUDA stops here"


def _match_mig(token: str, gpus: tuple[Gpu, ...]) -> tuple[Gpu | None, MigDevice | None, str]:
    """``MIG-<uuid>`` (driver R470+) or ``MIG-GPU-<uuid>/<GI>/<CI>`` (the older form)."""
    legacy = re.fullmatch(r"MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)", token.strip())
    if legacy:
        parent, gi, ci = legacy.group(1), int(legacy.group(2)), int(legacy.group(3))
        for gpu in gpus:
            if gpu.uuid.value == parent:
                for mig in gpu.mig_devices:
                    if mig.gpu_instance_id.value == gi and mig.compute_instance_id.value == ci:
                        return gpu, mig, ""
                return None, None, f"GPU {gpu.index} has no MIG instance GI {gi} / CI {ci}: CUDA stops here"
        return None, None, "no GPU with this parent UUID: CUDA stops here"
    hits = [(g, m) for g in gpus for m in g.mig_devices if m.uuid.value is not None and m.uuid.value.startswith(token)]
    if len(hits) == 1:
        return hits[0][0], hits[0][1], ""
    if len(hits) > 1:
        return None, None, f"MIG UUID prefix matches {len(hits)} instances (ambiguous): CUDA stops here"
    return None, None, "no MIG instance with this UUID: CUDA stops here"


def resolve(machine: Machine, value: str | None, order: str | None = None) -> Resolution:
    """The devices CUDA will enumerate for this CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER."""
    env = machine.env_map
    order_name = (order or "FASTEST_FIRST").strip().upper()
    warnings: list[str] = []
    if order_name not in ORDERS:
        warnings.append(f"{ORDER_VAR}={order!r} is not a value CUDA knows: it uses FASTEST_FIRST")
        order_name = "FASTEST_FIRST"
    enumerated, heuristic = enumeration_order(machine, order_name)
    if heuristic:
        warnings.append(
            "the GPUs differ and CUDA_DEVICE_ORDER is FASTEST_FIRST (the default): CUDA's fastest-first order is "
            "unpublished, the order shown is a heuristic; set CUDA_DEVICE_ORDER=PCI_BUS_ID to match nvidia-smi"
        )
    lost = [g.index for g in machine.gpus if g.state is not GpuState.OK]
    if lost:
        warnings.append(f"GPU(s) {', '.join(map(str, lost))} cannot be used (lost or failed): CUDA will not see them")

    entries: list[Entry] = []
    chosen: list[tuple[Gpu, MigDevice | None]] = []
    if value is None:
        chosen = [(g, None) for g in enumerated]
    elif value.strip() == "" and value == "":
        warnings.append(f"{VISIBLE_VAR} is set but empty: CUDA sees no device at all")
    else:
        chosen = _read_list(value, enumerated, entries, warnings)

    devices: list[VisibleDevice] = []
    mig_seen = False
    for gpu, mig in chosen:
        if mig is None and gpu.mig_mode_current.value is True:
            if gpu.mig_devices:
                warnings.append(
                    f"GPU {gpu.index} has MIG enabled: selecting it as a whole does not pick a MIG instance in a "
                    f"documented way; use {VISIBLE_VAR}=MIG-<uuid> (see the MIG devices)"
                )
            else:
                warnings.append(f"GPU {gpu.index} has MIG enabled with no instances: CUDA workloads cannot run on it")
                continue
        if mig is not None:
            if mig_seen:
                continue  # reported by _read_list
            mig_seen = True
        devices.append(_device(len(devices), gpu, mig))

    if value is not None and value != "" and not devices:
        warnings.append(f"{VISIBLE_VAR}={value!r} leaves no device: CUDA reports 'no CUDA-capable device is detected'")
    narrowing = tuple((name, env[name], note) for name, note in NARROWING_NOTES.items() if name in env)
    return Resolution(
        value=value,
        order=order_name,
        order_is_heuristic=heuristic,
        devices=tuple(devices),
        entries=tuple(entries),
        warnings=tuple(dict.fromkeys(warnings)),
        narrowing=narrowing,
    )


def _read_list(
    value: str, enumerated: tuple[Gpu, ...], entries: list[Entry], warnings: list[str]
) -> list[tuple[Gpu, MigDevice | None]]:
    """Read the comma-separated list left to right, stopping at the first invalid entry."""
    chosen: list[tuple[Gpu, MigDevice | None]] = []
    stopped = False
    first_mig: int | None = None
    for position, token in enumerate(value.split(",")):
        if stopped:
            entries.append(Entry(position, token, Outcome.IGNORED, "after an invalid entry CUDA reads no further"))
            continue
        gpu: Gpu | None = None
        mig: MigDevice | None = None
        stripped = token.strip()
        how = ""
        if stripped.startswith("MIG-"):
            gpu, mig, problem = _match_mig(stripped, enumerated)
            how = f"MIG instance GI {mig.gpu_instance_id.get('?')} CI {mig.compute_instance_id.get('?')}" if mig else ""
        elif stripped.startswith("GPU-"):
            gpu, problem = _match_uuid(stripped, enumerated)
            how = "UUID" + (" prefix" if gpu is not None and gpu.uuid.value != stripped else "")
        else:
            number = _strtoul(token)
            problem = ""
            if re.match(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}", stripped):
                warnings.append(
                    f"entry {token!r} looks like a UUID without its 'GPU-' prefix: CUDA reads only its leading "
                    f"digits{f' (as {number})' if number is not None else ''}"
                )
            if number is None:
                problem = (
                    "negative: CUDA stops here" if stripped.startswith("-") else "not a number or UUID: CUDA stops here"
                )
            elif number >= len(enumerated):
                problem = f"out of range: only {len(enumerated)} device(s) can be enumerated; CUDA stops here"
            else:
                gpu = enumerated[number]
                how = f"device {number} in CUDA's enumeration order"
                if gpu.index != number:
                    how += f" = nvidia-smi's GPU {gpu.index}"
                    warnings.append(
                        f"entry {token.strip()!r} selects nvidia-smi's GPU {gpu.index}: integers count in CUDA's "
                        "order, not nvidia-smi's"
                    )
                digits = re.match(r"\s*\+?\d+", token)
                if digits and token[digits.end() :].strip():
                    warnings.append(
                        f"entry {token!r} is read as {number}: CUDA ignores the characters after the number"
                    )
        if gpu is None:
            entries.append(Entry(position, token, Outcome.DROPPED, problem))
            stopped = True
            continue
        if any(g.index == gpu.index and m is mig for g, m in chosen):
            entries.append(Entry(position, token, Outcome.DROPPED, "repeated device"))
            warnings.append(
                f"GPU {gpu.index} is listed twice: CUDA then enumerates no device at all (the behaviour PyTorch's "
                "tests record for driver 525.60.13; NVIDIA does not document it)"
            )
            for i, old in enumerate(entries):
                if old.outcome is Outcome.USED:
                    entries[i] = Entry(old.position, old.token, Outcome.DROPPED, "the list repeats a device")
            tokens = value.split(",")
            for later in range(position + 1, len(tokens)):
                entries.append(Entry(later, tokens[later], Outcome.IGNORED, "the list repeats a device"))
            return []
        if mig is not None and first_mig is not None:
            entries.append(Entry(position, token, Outcome.DROPPED, "a process can use only one MIG instance"))
            continue
        if mig is None and first_mig is not None:
            entries.append(
                Entry(position, token, Outcome.DROPPED, "after a MIG instance CUDA enumerates no non-MIG GPU")
            )
            continue
        if mig is not None:
            first_mig = position
            if chosen:
                warnings.append(
                    "a MIG instance after non-MIG GPUs: mixing them in one process is not supported by CUDA and "
                    "its behaviour is undocumented"
                )
        entries.append(Entry(position, token, Outcome.USED, how))
        chosen.append((gpu, mig))
    return chosen


def export_line(machine: Machine, indices: tuple[int, ...]) -> tuple[str, str]:
    """Two ways to select these NVML-indexed GPUs: by index under PCI order, and by UUID."""
    by_bus, _ = enumeration_order(machine, "PCI_BUS_ID")
    ordinals = [next(i for i, g in enumerate(by_bus) if g.index == idx) for idx in indices]
    uuids = [machine.gpu(idx).uuid.get("?") for idx in indices]
    return (
        f"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={','.join(map(str, ordinals))}",
        f"export CUDA_VISIBLE_DEVICES={','.join(uuids)}",
    )


def code_hints(resolution: Resolution) -> tuple[str, ...]:
    """What the indices in users' PyTorch code refer to under this setting."""
    devs = resolution.devices
    if not devs:
        return ("no device is visible: torch.cuda.is_available() is False and any cuda:N fails",)
    mapping = ", ".join(f"cuda:{d.ordinal} = GPU {d.gpu_index}" for d in devs[:8])
    hints = [
        f"inside the program the GPUs are numbered from 0: {mapping}{' …' if len(devs) > 8 else ''}",
        f"DataParallel(device_ids=[...]) takes these logical numbers 0..{len(devs) - 1}; a larger id fails with "
        "'invalid device ordinal'; the model must live on device_ids[0]",
        f"output_device defaults to device_ids[0] (here GPU {devs[0].gpu_index}): outputs gather there, so that GPU "
        "holds more memory",
        "DDP: one process per GPU, torch.cuda.set_device(local_rank) — rank r uses cuda:r = "
        + ", ".join(f"rank {d.ordinal} → GPU {d.gpu_index}" for d in devs[:4])
        + (" …" if len(devs) > 4 else ""),
        f"{VISIBLE_VAR} is read once, when CUDA initialises: set it before the process starts (or before the first "
        "CUDA call), not later in the program",
    ]
    return tuple(hints)


def _uuid_core(uuid: str | None) -> str:
    if not uuid:
        return ""
    for prefix in ("GPU-", "MIG-"):
        if uuid.startswith(prefix):
            return uuid[len(prefix) :].lower()
    return uuid.lower()


def compare(resolution: Resolution, probed: list[dict[str, object]]) -> tuple[str, ...]:
    """Differences between the computed mapping and what the CUDA runtime reported."""
    problems = []
    if len(probed) != len(resolution.devices):
        problems.append(f"CUDA sees {len(probed)} device(s), gpudiag computed {len(resolution.devices)}")
    for device, seen in zip(resolution.devices, probed, strict=False):
        seen_uuid = _uuid_core(str(seen.get("uuid") or ""))
        if seen_uuid and seen_uuid != _uuid_core(device.uuid):
            problems.append(
                f"cuda:{device.ordinal}: CUDA has {seen.get('name')} ({seen.get('uuid')}), gpudiag computed "
                f"GPU {device.gpu_index} ({device.uuid})"
            )
    return tuple(problems)


PROBE_CODE = """
try:
    import torch
except Exception as exc:
    emit({"error": f"torch cannot be imported: {type(exc).__name__}: {exc}"})
    raise SystemExit(0)
if torch.version.cuda is None:
    emit({"error": f"this torch ({torch.__version__}) is a CPU-only build: it cannot see CUDA devices"})
    raise SystemExit(0)
if not torch.cuda.is_available():
    emit({"error": f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device here"})
    raise SystemExit(0)
devices = []
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    uuid = getattr(p, "uuid", None)
    devices.append({"ordinal": i, "name": p.name, "uuid": str(uuid) if uuid is not None else None})
emit({"devices": devices, "torch": torch.__version__})
"""
