"""Selecting GPUs by NVML index, UUID (or a unique prefix) or PCI bus id, as `--id` takes them.

An option's text becomes a :class:`GpuSelection` once, in its command's request module
(:func:`parse_selection`: the syntax, before the machine is read); :func:`select_gpus` resolves it
against a machine's GPUs and takes nothing else, so no layer below the request reads the text again.
"""

from __future__ import annotations

import msgspec

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


class ByIndex(msgspec.Struct, frozen=True):
    """An NVML index (ASCII digits). ``text``: the entry as written, for messages."""

    text: str
    index: int | None  # None: more digits than any index (it matches no GPU)


class ByUuid(msgspec.Struct, frozen=True):
    """A GPU UUID or a prefix of one (``GPU-…``; ``MIG-…`` names no GPU), compared without case."""

    text: str
    prefix: str  # lower-case


class ByBusId(msgspec.Struct, frozen=True):
    """Anything else: a PCI bus id, in any of its spellings (it names nothing when it is not one)."""

    text: str
    bus_id: str  # normalize_bus_id's


class ByInstance(msgspec.Struct, frozen=True):
    """A MIG instance's UUID or a prefix of one (``MIG-…``), where an option takes instances too
    (`visible --select`)."""

    text: str
    prefix: str  # lower-case


GpuEntry = ByIndex | ByUuid | ByBusId
Entry = ByIndex | ByUuid | ByBusId | ByInstance


class GpuSelection(msgspec.Struct, frozen=True):
    """The GPUs an option names, parsed: its entries in the order given. What they match is resolved
    against a machine (:func:`select_gpus`): an index, UUID or bus id is a fact of the machine read."""

    entries: tuple[Entry, ...]

    @property
    def reads(self) -> frozenset[str]:
        """The readings (gpudiag.readings rows' keys) matching the entries needs besides the index,
        which is always read: a read of named rows (`list --query`) asks for them too."""
        found: set[str] = set()
        for entry in self.entries:
            if isinstance(entry, ByUuid):
                found.add("uuid")
            elif isinstance(entry, ByBusId):
                found.add("pci_bus_id")
        return frozenset(found)


def parse_selection(text: str | None, option: str = "--id", instances: bool = False) -> GpuSelection | None:
    """``text``, an option's comma-separated value, as a selection (None when not given). An empty
    entry ('', '0,,1') is a usage error in every command; ``instances``: ``MIG-…`` names a MIG
    instance (`visible --select`), not a GPU."""
    if text is None:
        return None
    tokens = tuple(t.strip() for t in text.split(","))
    if not all(tokens):
        raise UsageError(f"empty entry in {option} {shorten(text)!r}")
    return GpuSelection(tuple(_entry(token, instances) for token in tokens))


def _entry(token: str, instances: bool) -> Entry:
    if instances and token.upper().startswith("MIG-"):
        return ByInstance(token, token.lower())
    if token.isascii() and token.isdigit():
        return ByIndex(token, parse_count(token))
    lowered = token.lower()
    if lowered.startswith(("gpu-", "mig-")):
        return ByUuid(token, lowered)
    return ByBusId(token, normalize_bus_id(token))


def select_gpus(gpus: tuple[Gpu, ...], selection: GpuSelection | None) -> tuple[Gpu, ...]:
    """The GPUs ``selection`` names, in the order given, each once (None: every GPU). It takes the
    parsed selection only: an option's text is parsed in its request module, not here."""
    if selection is None:
        return gpus
    if not isinstance(selection, GpuSelection):
        raise TypeError(f"select_gpus takes a GpuSelection (parse_selection's), not {type(selection).__name__}")
    chosen: list[Gpu] = []
    for entry in selection.entries:
        if isinstance(entry, ByInstance):
            raise TypeError("a MIG instance is not a GPU: resolve it where instances are taken")
        gpu = match(gpus, entry)
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


def match(gpus: tuple[Gpu, ...], entry: GpuEntry) -> Gpu:
    """The one GPU ``entry`` names, or a usage error that says what is here."""
    if isinstance(entry, ByIndex):
        for gpu in gpus:
            if gpu.index == entry.index:
                return gpu
        raise UsageError(f"no GPU with index {shorten(entry.text)}; {existing(gpus)}")
    if isinstance(entry, ByUuid):
        hits = [g for g in gpus if g.uuid.value is not None and g.uuid.value.lower().startswith(entry.prefix)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UsageError(f"UUID prefix {shorten(entry.text)!r} matches {len(hits)} GPUs; give more characters")
        raise UsageError(f"no GPU with UUID {shorten(entry.text)!r}; {existing(gpus)}")
    for gpu in gpus:
        if gpu.pci_bus_id.value is not None and normalize_bus_id(gpu.pci_bus_id.value) == entry.bus_id:
            return gpu
    raise UsageError(f"{shorten(entry.text)!r} is not a GPU index, UUID (GPU-…) or PCI bus id; {existing(gpus)}")
