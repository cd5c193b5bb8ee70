"""Selecting GPUs by NVML index, UUID (or a unique prefix) or PCI bus id, as `--id` takes them."""

from __future__ import annotations

from gpudiag.errors import UsageError
from gpudiag.model import Gpu
from gpudiag.parsing import parse_count, shorten


def normalize_bus_id(bus_id: str) -> str:
    """'18:00.0', '0000:18:00.0' and '00000000:18:00.0' name the same device."""
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return text
    domain, bus, rest = parts
    try:
        return f"{int(domain, 16):08x}:{bus.zfill(2)}:{rest}"
    except ValueError:
        return text


def parse_ids(ids: str) -> tuple[str, ...]:
    """The entries of an ``--id`` value; an empty one ('', '0,,1') is an error in every command,
    checked before the machine is read."""
    tokens = tuple(t.strip() for t in ids.split(","))
    if not all(tokens):
        raise UsageError(f"empty entry in --id {shorten(ids)!r}")
    return tokens


# The readings --id matches besides the index (gpudiag.readings rows' keys): a read of named rows
# (`list --query`) asks for them too when --id is given.
READS = frozenset({"uuid", "pci_bus_id"})


def select_gpus(gpus: tuple[Gpu, ...], ids: str | None) -> tuple[Gpu, ...]:
    """The GPUs named by a comma-separated ``--id`` value, in the order given."""
    if ids is None:
        return gpus
    chosen: list[Gpu] = []
    for token in parse_ids(ids):
        gpu = _match(gpus, token)
        if gpu not in chosen:
            chosen.append(gpu)
    return tuple(chosen)


def existing(gpus: tuple[Gpu, ...]) -> str:
    """What a selection can name here, for the message of one that names nothing: 'GPUs here: 0-7'."""
    if not gpus:
        return "this machine has no GPU"
    indices = sorted(g.index for g in gpus)
    if indices == list(range(indices[0], indices[-1] + 1)) and len(indices) > 2:
        named = f"{indices[0]}-{indices[-1]}"
    else:
        named = ", ".join(map(str, indices))
    return f"GPUs here: {named} (`gpudiag list` shows their UUIDs and bus ids)"


def _match(gpus: tuple[Gpu, ...], token: str) -> Gpu:
    if token.isascii() and token.isdigit():
        index = parse_count(token)
        for gpu in gpus:
            if gpu.index == index:
                return gpu
        raise UsageError(f"no GPU with index {shorten(token)}; {existing(gpus)}")
    lowered = token.lower()
    if lowered.startswith(("gpu-", "mig-")):
        hits = [g for g in gpus if g.uuid.value is not None and g.uuid.value.lower().startswith(lowered)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UsageError(f"UUID prefix {shorten(token)!r} matches {len(hits)} GPUs; give more characters")
        raise UsageError(f"no GPU with UUID {shorten(token)!r}; {existing(gpus)}")
    wanted = normalize_bus_id(token)
    for gpu in gpus:
        if gpu.pci_bus_id.value is not None and normalize_bus_id(gpu.pci_bus_id.value) == wanted:
            return gpu
    raise UsageError(f"{shorten(token)!r} is not a GPU index, UUID (GPU-…) or PCI bus id; {existing(gpus)}")
