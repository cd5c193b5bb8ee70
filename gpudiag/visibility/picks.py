"""A device an entry picked, and the warnings and assumptions a resolution collects."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpudiag.model import Gpu, MigDevice
from gpudiag.visibility.result import VisibleDevice


@dataclass(frozen=True)
class Pick:
    position: int | None  # None: every device (the variable is unset)
    gpu: Gpu
    mig: MigDevice | None  # named explicitly by a MIG- entry
    how: str
    documented: bool = True


class Notes:
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


def numbered(devices: list[VisibleDevice]) -> list[VisibleDevice]:
    return [replace(d, ordinal=i) for i, d in enumerate(devices)]


def device(ordinal: int, gpu: Gpu, mig: MigDevice | None) -> VisibleDevice:
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
