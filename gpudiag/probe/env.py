"""The environment variables that change which GPUs a job sees or how CUDA behaves."""

from __future__ import annotations

from collections.abc import Mapping

# Visibility: what narrows the set of GPUs a process sees.
VISIBILITY_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "GPU_DEVICE_ORDINAL",
    "CUDA_MPS_PIPE_DIRECTORY",
    "CUDA_MPS_LOG_DIRECTORY",
)

# Variables DCGM's diagnostics warn about: debuggers, profilers, injection, coredumps.
DCGM_WARNED_VARS = (
    "NSIGHT_CUDA_DEBUGGER",
    "CUDA_INJECTION32_PATH",
    "CUDA_INJECTION64_PATH",
    "CUDA_AUTO_BOOST",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
    "CUDA_COREDUMP_FILE",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION",
    "CUDA_PROFILE",
    "COMPUTE_PROFILE",
    "OPENCL_PROFILE",
)

# Behaviour: those, and others that slow or change CUDA jobs.
BEHAVIOUR_VARS = (
    "CUDA_LAUNCH_BLOCKING",
    *DCGM_WARNED_VARS,
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
)

RELEVANT_VARS = VISIBILITY_VARS + BEHAVIOUR_VARS


def relevant_env(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The relevant variables that are set (an empty value counts: it means something)."""
    return tuple((name, environ[name]) for name in RELEVANT_VARS if name in environ)
