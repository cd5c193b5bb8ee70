"""`gpudiag mig`: MIG's profiles and instances as `nvidia-smi mig -lgip / -lgi / -lci` print them: a boxed
table, a row per profile or instance (two lines per profile), each row closed by a rule, in the layout
of drivers 535-580 (the NVIDIA MIG user guide's listings and public captures of it)."""

from __future__ import annotations

from typing import Any

from gpudiag.model import Gpu, MigGpuInstance, MigProfile
from gpudiag.render.printable import printable
from gpudiag.serialize import to_data

SCHEMA = "gpudiag.mig/1"


def _box(width: int, title: str, heads: list[str], rows: list[list[str]]) -> str:
    rule = "+" + "-" * (width - 2) + "+"
    lines = [rule, f"| {title}".ljust(width - 1) + "|", *heads, "|" + "=" * (width - 2) + "|"]
    for row in rows:
        lines += [*row, rule]
    return "\n".join(lines) + "\n"


def profile_order(profile: MigProfile) -> tuple[int, int, int]:
    """nvidia-smi's order: by compute slices, then memory, then NVML's index (1g.5gb before 1g.5gb+me)."""
    return (profile.slices, profile.memory_mib, profile.index)


def profiles(gpus: list[tuple[Gpu, tuple[MigProfile, ...]]]) -> str:
    """`nvidia-smi mig -lgip`."""
    heads = [
        "| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                              Free/Total   GiB              CE    JPEG  OFA  |",
    ]
    rows = []
    for gpu, found in gpus:
        for p in sorted(found, key=profile_order):
            free = str(p.remaining.value) if p.remaining.value is not None else "N/A"
            first = (
                f"|{gpu.index:>4}  {printable(p.name):<16}{p.id:>4}     {f'{free}/{p.instances}':<11}"
                f"{p.memory_mib / 1024:<11.2f}{'Yes' if p.p2p else 'No':<5}{p.sms:>4}{p.decoders:>6}{p.encoders:>6}   |"
            )
            second = f"|{'':58}{p.copy_engines:>4}{p.jpeg:>6}{p.ofa:>6}   |"
            rows.append([first, second])
    return _box(79, "GPU instance profiles:", heads, rows)


def _names(found: tuple[MigProfile, ...]) -> dict[int, str]:
    return {p.id: p.name for p in found}


def gpu_instances(gpus: list[tuple[Gpu, tuple[MigGpuInstance, ...], tuple[MigProfile, ...]]]) -> str:
    """`nvidia-smi mig -lgi`."""
    heads = [
        "| GPU   Name               Profile  Instance   Placement  |",
        "|                            ID       ID       Start:Size |",
    ]
    rows = []
    for gpu, instances, found in gpus:
        names = _names(found)
        for gi in instances:
            name = printable(names.get(gi.profile_id, "N/A"))
            placement = f"{gi.placement_start}:{gi.placement_size}"
            rows.append([f"|{gpu.index:>4}  {name:<19}{gi.profile_id:>5}{gi.id:>9}{'':10}{placement:<8}|"])
    return _box(59, "GPU instances:", heads, rows)


def compute_instances(gpus: list[tuple[Gpu, tuple[MigGpuInstance, ...]]]) -> str:
    """`nvidia-smi mig -lci`."""
    heads = [
        "| GPU     GPU       Name             Profile   Instance   Placement  |",
        "|       Instance                       ID        ID       Start:Size |",
        "|         ID                                                         |",
    ]
    rows = []
    for gpu, instances in gpus:
        for gi in instances:
            for ci in gi.compute_instances:
                placement = f"{ci.placement_start}:{ci.placement_size}"
                rows.append(
                    [
                        f"|{gpu.index:>4}{gi.id:>7}{'':7}{printable(ci.name):<18}{ci.profile_id:>4}{ci.id:>10}{'':10}{placement:<8}|"
                    ]
                )
    return _box(70, "Compute instances:", heads, rows)


def to_json(gpus: list[Gpu]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "gpus": [
            {
                "index": gpu.index,
                "mig_mode_current": to_data(gpu.mig_mode_current),
                "profiles": to_data(gpu.mig_profiles),
                "gpu_instances": to_data(gpu.mig_instances),
            }
            for gpu in gpus
        ],
    }
