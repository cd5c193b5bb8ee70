"""Configuration: CUDA_VISIBLE_DEVICES, environment variables, MIG, compute mode, persistence."""

from __future__ import annotations

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.checks.base import CONFIG, STEADY, check, no_nvml, per_gpu, result, skip_reason, usable_gpus
from gpudiag.model import ComputeMode, Gpu, NvmlStatus
from gpudiag.probe.env import DCGM_WARNED_VARS

# visibility's notes about compute modes and lost GPUs are reported by their own checks.
_REPORTED_ELSEWHERE = ("compute mode", "cannot be used (lost or failed)")


@check(
    "env.visible_devices",
    CONFIG,
    "`CUDA_VISIBLE_DEVICES` (read as CUDA reads it, see `gpudiag visible`)",
    fails=(
        "leaves no device (error 100); WARN: the value means something other than it looks (e.g. integer ids "
        "under CUDA's default order on mixed GPUs)"
    ),
    reads=("compute_capability", "compute_mode", "memory", "mig_mode_current"),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    finding=STEADY,
)
def visible_devices(facts: Facts, options: Options) -> list[CheckResult]:
    from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR, resolve, shown_value

    m = facts.machine
    if m.nvml.status is not NvmlStatus.OK:
        return no_nvml("env.visible_devices", CONFIG, facts)
    env = m.env_map
    if VISIBLE_VAR not in env:
        return [result("env.visible_devices", CONFIG, Status.PASS, f"{VISIBLE_VAR} unset: every GPU visible")]
    value = env[VISIBLE_VAR]
    r = resolve(m, value, env.get(ORDER_VAR))
    shown = shown_value(value)
    if not r.devices and usable_gpus(facts):
        return [
            result(
                "env.visible_devices",
                CONFIG,
                Status.FAIL,
                f"{VISIBLE_VAR}={shown} leaves no device (cuInit: {r.cuinit_error}"
                + (", 'no CUDA-capable device is detected')" if "(100)" in r.cuinit_error else ")"),
                "fix or unset the variable: `gpudiag visible` explains how CUDA reads it",
            )
        ]
    seen = ", ".join(
        f"cuda:{d.ordinal}=GPU {d.gpu_index}" + (f" MIG {d.mig.index}" if d.mig is not None else "") for d in r.devices
    )
    warnings = [w for w in r.warnings if not any(s in w for s in _REPORTED_ELSEWHERE)]
    if warnings:
        return [
            result(
                "env.visible_devices",
                CONFIG,
                Status.WARN,
                f"{VISIBLE_VAR}={shown} → {seen}; {warnings[0]}",
                "run `gpudiag visible` for the details",
            )
        ]
    return [result("env.visible_devices", CONFIG, Status.PASS, f"{VISIBLE_VAR}={shown} → {seen}")]


@check(
    "env.variables",
    CONFIG,
    "variables DCGM warns about, `CUDA_LAUNCH_BLOCKING`",
    fails="WARN when set",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    produces=(Status.PASS, Status.WARN),
    finding=STEADY,
)
def environment(facts: Facts, options: Options) -> list[CheckResult]:
    env = facts.machine.env_map
    found = [f"{k}={env[k]}" for k in DCGM_WARNED_VARS if k in env]
    if env.get("CUDA_LAUNCH_BLOCKING", "0").strip() not in ("", "0"):
        found.append(f"CUDA_LAUNCH_BLOCKING={env['CUDA_LAUNCH_BLOCKING']} (serialises every kernel launch)")
    if found:
        return [
            result(
                "env.variables",
                CONFIG,
                Status.WARN,
                f"set: {'; '.join(found)}",
                "unset them for production runs: debuggers, profilers and injection libraries slow or change CUDA",
            )
        ]
    return [result("env.variables", CONFIG, Status.PASS, "no debugging or profiling variables set")]


@check(
    "config.mig",
    CONFIG,
    "MIG mode",
    fails="enabled without instances; WARN: a mode change pending until reset",
    reads=("mig_mode_current", "mig_mode_pending", "mig_devices"),
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    finding=STEADY,
)
def mig(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        current, pending = gpu.mig_mode_current, gpu.mig_mode_pending
        if current.value is None:
            return Status.SKIP, f"MIG {skip_reason(current.reason, current.detail)}", ""
        if current.value and not gpu.mig_devices:
            return (
                Status.FAIL,
                "MIG enabled with no instances: CUDA workloads cannot run",
                "create instances (nvidia-smi mig -cgi <profiles> -C) or disable MIG (nvidia-smi -i N -mig 0)",
            )
        if pending.value is not None and pending.value != current.value:
            return (
                Status.WARN,
                f"MIG mode changes to {'on' if pending.value else 'off'} at the next GPU reset",
                "reset the GPU (nvidia-smi -r -i N) to apply it, or revert the pending change",
            )
        if current.value:
            return Status.PASS, f"MIG enabled, {len(gpu.mig_devices)} instance(s)", ""
        return Status.PASS, "MIG disabled", ""

    return per_gpu("config.mig", CONFIG, facts, judge)


@check(
    "config.compute_mode",
    CONFIG,
    "compute mode",
    fails="Prohibited; WARN: Exclusive_Process",
    reads=("compute_mode",),
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    finding=STEADY,
)
def compute_mode(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        mode = gpu.compute_mode.value
        if mode is None:
            return Status.SKIP, skip_reason(gpu.compute_mode.reason, gpu.compute_mode.detail), ""
        if mode is ComputeMode.PROHIBITED:
            return (
                Status.FAIL,
                "compute mode Prohibited: no CUDA context can be created",
                "nvidia-smi -i N -c DEFAULT",
            )
        if mode in (ComputeMode.EXCLUSIVE_PROCESS, ComputeMode.EXCLUSIVE_THREAD):
            return (
                Status.WARN,
                f"compute mode {mode.value}: one process at a time; another context blocks the job",
                "expected on schedulers that hand out whole GPUs; otherwise nvidia-smi -i N -c DEFAULT",
            )
        return Status.PASS, f"compute mode {mode.value}", ""

    return per_gpu("config.compute_mode", CONFIG, facts, judge)


@check(
    "config.persistence",
    CONFIG,
    "persistence mode",
    fails="WARN when off (1–3 s per GPU per job)",
    reads=("persistence_mode",),
    scope=Scope.NODE,
    action=Action.FIX_CONFIG,
    produces=(Status.PASS, Status.WARN, Status.SKIP),
    finding=STEADY,
)
def persistence(facts: Facts, options: Options) -> list[CheckResult]:
    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        on = gpu.persistence_mode.value
        if on is None:
            return Status.SKIP, skip_reason(gpu.persistence_mode.reason, gpu.persistence_mode.detail), ""
        if not on:
            return (
                Status.WARN,
                "persistence mode off: every job pays 1-3 s of driver initialisation per GPU",
                "enable nvidia-persistenced (or nvidia-smi -pm 1)",
            )
        return Status.PASS, "persistence mode on", ""

    return per_gpu("config.persistence", CONFIG, facts, judge)
