"""Compatibility tables: driver vs CUDA runtime, and compute capability vs torch's arch list."""

from __future__ import annotations

import pytest

from gpudiag.checks.compat import ArchSupport, Verdict, arch_support, driver_vs_runtime, parse_version


@pytest.mark.parametrize(
    ("driver_cuda", "runtime", "driver", "verdict"),
    [
        ((12, 4), (12, 4), (550, 54, 15), Verdict.OK),
        ((13, 0), (12, 8), (580, 65, 6), Verdict.OK),  # newer major runs older runtimes
        ((12, 2), (12, 8), (535, 183, 1), Verdict.MINOR_COMPAT),  # 535 ≥ 525.60.13
        ((12, 0), (12, 4), (525, 60, 13), Verdict.MINOR_COMPAT),  # exactly the floor
        ((12, 0), (12, 4), (525, 60, 12), Verdict.TOO_OLD),  # just below the floor
        ((11, 4), (12, 1), (470, 82, 1), Verdict.TOO_OLD),  # older major: error 35
        ((10, 1), (10, 2), (418, 67), Verdict.TOO_OLD),  # no minor compatibility before CUDA 11
    ],
)
def test_driver_vs_runtime(
    driver_cuda: tuple[int, int], runtime: tuple[int, int], driver: tuple[int, ...], verdict: Verdict
) -> None:
    assert driver_vs_runtime(driver_cuda, runtime, driver) is verdict


@pytest.mark.parametrize(
    ("cc", "arch", "support", "used"),
    [
        ((9, 0), ("sm_80", "sm_90", "compute_90"), ArchSupport.CUBIN, "sm_90"),
        ((8, 6), ("sm_80", "sm_90"), ArchSupport.CUBIN, "sm_80"),  # sm_80 cubins run on 8.6
        ((8, 9), ("sm_90",), ArchSupport.NONE, ""),  # no forward compatibility across minors for cubins
        ((6, 0), ("sm_75", "sm_80", "sm_120", "compute_120"), ArchSupport.NONE, ""),  # P100 on cu128 wheels
        ((12, 0), ("sm_90", "compute_90"), ArchSupport.PTX, "compute_90"),  # JIT from PTX
        ((9, 0), ("sm_90a",), ArchSupport.CUBIN, "sm_90a"),
        ((10, 3), ("sm_100a",), ArchSupport.NONE, ""),  # 'a' variants only on exactly X.Y
        ((7, 0), (), ArchSupport.NONE, ""),
    ],
)
def test_arch_support(cc: tuple[int, int], arch: tuple[str, ...], support: ArchSupport, used: str) -> None:
    assert arch_support(cc, arch) == (support, used)


def test_parse_version() -> None:
    assert parse_version("550.54.15") == (550, 54, 15)
    assert parse_version("12.4") == (12, 4)
    assert parse_version("2.5.1+cu124") == (2, 5, 1)
