"""CUDA / driver / architecture compatibility rules, from NVIDIA's and PyTorch's documents.

Sources: CUDA Toolkit release notes, Table 3 (minimum Linux driver per toolkit) and the
minor-version-compatibility section; torch.cuda.get_arch_list semantics (sm_XY = cubin,
compute_XY = PTX).
"""

from __future__ import annotations

import enum
import re

from gpudiag.parsing import leading_version

# Oldest driver that runs any CUDA toolkit of this major version under minor-version
# compatibility (NVIDIA: "CUDA Compatibility", minor version compatibility).
MINOR_COMPAT_FLOOR = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}


class Verdict(str, enum.Enum):
    OK = "ok"
    MINOR_COMPAT = "minor_compat"  # runs, but PTX built by the newer toolkit cannot JIT (error 222)
    TOO_OLD = "too_old"


def parse_version(text: str) -> tuple[int, ...]:
    """'550.54.15' -> (550, 54, 15); '12.4' -> (12, 4). Non-numeric parts end the version."""
    return leading_version(text)


def driver_vs_runtime(driver_cuda: tuple[int, int], runtime: tuple[int, int], driver: tuple[int, ...]) -> Verdict:
    """Can a driver whose highest CUDA is ``driver_cuda`` run code built with CUDA ``runtime``?"""
    if driver_cuda[0] > runtime[0] or (driver_cuda[0] == runtime[0] and driver_cuda[1] >= runtime[1]):
        return Verdict.OK
    if driver_cuda[0] == runtime[0]:
        floor = MINOR_COMPAT_FLOOR.get(runtime[0])
        if floor is not None and driver >= floor:
            return Verdict.MINOR_COMPAT
    return Verdict.TOO_OLD


class ArchSupport(str, enum.Enum):
    CUBIN = "cubin"  # native kernels for this GPU
    PTX = "ptx"  # only PTX: JIT-compiled at first launch (slow start, needs a new enough driver)
    NONE = "none"  # "no kernel image is available for execution on the device"


def arch_support(capability: tuple[int, int], arch_list: tuple[str, ...]) -> tuple[ArchSupport, str]:
    """Which of torch's compiled architectures serve a GPU of this compute capability."""
    major, minor = capability
    best_cubin, best_ptx = "", ""
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_([0-9]{1,8}?)([0-9])([af]?)", arch)
        if not match:
            continue
        kind, a_major, a_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "sm":
            # sm_XY runs on X.Y..X.9 of the same major; sm_XYa / sm_XYf only on exactly X.Y.
            fits = a_major == major and (a_minor == minor if suffix else a_minor <= minor)
            if fits:
                best_cubin = arch
        elif (a_major, a_minor) <= (major, minor) and not suffix:
            best_ptx = arch
    if best_cubin:
        return ArchSupport.CUBIN, best_cubin
    if best_ptx:
        return ArchSupport.PTX, best_ptx
    return ArchSupport.NONE, ""
