"""The registry: every check, its stable id and area, in the order they are shown; selection and running.

Thresholds and their sources are in the project's field notes, section 2 (DCGM's
diagnostics and health watches, NVIDIA's CUDA compatibility documents, PyTorch's errors).
Ids are stable: scripts select them with ``--only``/``--skip`` and read them in JSON/JUnit.
Each rule takes (Facts, Options) and returns results; none touches the outside.
"""

from __future__ import annotations

from gpudiag.checks import CheckResult, Facts, Options
from gpudiag.checks.base import COMPAT, CONFIG, DRIVER, FUNCTIONAL, HEALTH, REQUIRE, Check
from gpudiag.checks.config import compute_mode, environment, mig, persistence, visible_devices
from gpudiag.checks.driver import device_nodes, gpu_count, gpu_lost, kernel_modules, nouveau, nvml_init
from gpudiag.checks.health import (
    clock_events,
    ecc,
    free_memory,
    functional,
    inforom,
    leftover_processes,
    pcie,
    recovery_action,
    retired_pages,
    row_remap,
    temperature,
)
from gpudiag.checks.requirements import (
    require_capability,
    require_cuda,
    require_driver,
    require_gpu,
    require_torch,
)
from gpudiag.checks.software import compute_capability, cudnn, driver_cuda, nccl, torch_works

CHECKS: tuple[Check, ...] = (
    Check("nvml.init", DRIVER, "NVML initialises (driver loaded, library matches the kernel module)", nvml_init),
    Check("nvml.gpu_count", DRIVER, "GPU count (--expect-gpus)", gpu_count),
    Check("nvml.gpu_lost", DRIVER, "no GPU lost or fallen off the bus", gpu_lost),
    Check(
        "host.device_nodes",
        DRIVER,
        "/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidiaN present and accessible",
        device_nodes,
    ),
    Check("host.kernel_modules", DRIVER, "nvidia and nvidia_uvm kernel modules loaded", kernel_modules),
    Check("host.nouveau", DRIVER, "no GPU bound to nouveau", nouveau),
    Check("compat.torch", COMPAT, "torch imports and initialises CUDA (in a child process)", torch_works),
    Check("compat.driver_cuda", COMPAT, "driver's CUDA vs torch's CUDA build", driver_cuda),
    Check("compat.arch", COMPAT, "compute capability vs torch's compiled architectures", compute_capability),
    Check("compat.cudnn", COMPAT, "cuDNN runtime vs the version torch was built with", cudnn),
    Check("compat.nccl", COMPAT, "NCCL present for several GPUs", nccl),
    Check("env.visible_devices", CONFIG, "CUDA_VISIBLE_DEVICES leaves a device", visible_devices),
    Check("env.variables", CONFIG, "no debugging/profiling variables", environment),
    Check("config.mig", CONFIG, "MIG mode and instances", mig),
    Check("config.compute_mode", CONFIG, "compute mode", compute_mode),
    Check("config.persistence", CONFIG, "persistence mode", persistence),
    Check("health.ecc", HEALTH, "volatile uncorrected ECC errors", ecc),
    Check("health.retired_pages", HEALTH, "retired and pending pages", retired_pages),
    Check("health.row_remap", HEALTH, "row remapping: pending, failed, counts", row_remap),
    Check("health.recovery_action", HEALTH, "NVML's recovery action", recovery_action),
    Check("health.clock_events", HEALTH, "clock events (throttling)", clock_events),
    Check("health.temperature", HEALTH, "temperature vs the GPU's slowdown threshold", temperature),
    Check("health.inforom", HEALTH, "InfoROM valid", inforom),
    Check("health.processes", HEALTH, "no leftover compute or graphics processes", leftover_processes),
    Check("health.free_memory", HEALTH, "free memory (--min-free)", free_memory),
    Check("health.pcie", HEALTH, "PCIe link: slot vs GPU, and under load", pcie),
    Check("req.driver", REQUIRE, "--require-driver", require_driver),
    Check("req.cuda", REQUIRE, "--require-cuda (the driver's and torch's)", require_cuda),
    Check("req.capability", REQUIRE, "--require-capability", require_capability),
    Check("req.gpu", REQUIRE, "--require-gpu", require_gpu),
    Check("req.torch", REQUIRE, "--require-torch", require_torch),
    Check("func.gpu", FUNCTIONAL, "functional test per GPU", functional),
)

CHECK_IDS = tuple(c.id for c in CHECKS)


def matches(check_id: str, pattern: str) -> bool:
    """A pattern is a check id or a prefix ending at a dot: ``health`` selects ``health.ecc``."""
    return check_id == pattern or check_id.startswith(pattern.rstrip(".") + ".")


def selected(check_id: str, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> bool:
    """Whether ``--only``/``--skip`` patterns keep this check."""
    if only and not any(matches(check_id, p) for p in only):
        return False
    return not any(matches(check_id, p) for p in skip)


def run(facts: Facts, options: Options, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[CheckResult]:
    """Every selected check's results, in the registry's order."""
    results: list[CheckResult] = []
    for check in CHECKS:
        if selected(check.id, only, skip):
            results.extend(check.rule(facts, options))
    return results
