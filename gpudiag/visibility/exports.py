"""Choosing GPUs (--select) and the export lines that make exactly them visible."""

from __future__ import annotations

import shlex

import msgspec

from gpudiag.errors import UsageError
from gpudiag.model import Gpu, GpuState, Machine, MigDevice
from gpudiag.parsing import shorten
from gpudiag.selection import ByInstance, GpuSelection, match
from gpudiag.visibility.order import enumeration_order
from gpudiag.visibility.result import ORDER_VAR, VISIBLE_VAR


class Target(msgspec.Struct, frozen=True):
    gpu: Gpu
    mig: MigDevice | None = None


def select_targets(machine: Machine, selection: GpuSelection) -> tuple[Target, ...]:
    """GPUs (NVML index, UUID or prefix, bus id) or one MIG instance (MIG-…), in the order given
    (``selection``: `--select` as its request parsed it)."""
    targets: list[Target] = []
    for entry in selection.entries:
        if isinstance(entry, ByInstance):
            hits = [
                Target(g, m)
                for g in machine.gpus
                for m in g.mig_devices
                if m.uuid.value is not None and m.uuid.value.lower().startswith(entry.prefix)
            ]
            if len(hits) != 1:
                instances = [m.uuid.value for g in machine.gpus for m in g.mig_devices if m.uuid.value]
                here = (
                    f"MIG instances here: {', '.join(instances)}" if instances else "this machine has no MIG instance"
                )
                raise UsageError(
                    f"MIG UUID prefix {shorten(entry.text)!r} matches {len(hits)} MIG instances; "
                    + ("give more characters" if hits else here)
                )
            target = hits[0]
        else:
            target = Target(match(machine.gpus, entry))
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
    for a MIG instance: by its UUID. A UUID is a replay file's text: shell-quoted where it is not a
    plain UUID, so that pasting or eval-ing the line can never run it.
    """
    if any(t.mig is not None for t in targets):
        migs = ",".join(t.mig.uuid.get("?") for t in targets if t.mig is not None)
        return (f"export {VISIBLE_VAR}={shlex.quote(migs)}",)
    by_bus, _ = enumeration_order(machine, "PCI_BUS_ID")
    positions = {g.index: i for i, g in enumerate(by_bus)}
    ordinals = [positions[t.gpu.index] for t in targets]
    uuids = [t.gpu.uuid.get("?") for t in targets]
    return (
        f"export {ORDER_VAR}=PCI_BUS_ID {VISIBLE_VAR}={','.join(map(str, ordinals))}",
        f"export {VISIBLE_VAR}={shlex.quote(','.join(uuids))}",
    )


def export_line(machine: Machine, indices: tuple[int, ...]) -> tuple[str, str]:
    """By index under PCI order, and by UUID, for these NVML-indexed GPUs (no MIG)."""
    lines = export_lines(machine, tuple(Target(machine.gpu(i)) for i in indices))
    return lines[0], lines[1]
