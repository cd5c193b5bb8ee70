"""Compatibility: torch in its child process, driver CUDA vs torch CUDA, architectures, cuDNN, NCCL."""

from __future__ import annotations

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.checks.base import (
    COMPAT,
    STEADY,
    always,
    check,
    dotted,
    no_nvml,
    per_gpu,
    result,
    torch_cuda_build,
    torch_missing,
    usable_gpus,
)
from gpudiag.checks.compat import ArchSupport, Verdict, arch_support, driver_vs_runtime, parse_version
from gpudiag.model import Gpu, NvmlStatus, Reason, TorchRuntime, cuda_version_text
from gpudiag.parsing import parse_count


def _runtime_or_skip(check_id: str, facts: Facts) -> tuple[TorchRuntime | None, list[CheckResult]]:
    """torch's runtime facts for a CUDA build, or the SKIP result that says why there are none."""
    t = facts.torch
    if t.value is None:
        quiet = t.reason in (Reason.NOT_FOUND, Reason.UNAVAILABLE)
        why = (t.detail or "torch not probed") if quiet else "torch does not work here (see compat.torch)"
        return None, [result(check_id, COMPAT, Status.SKIP, why)]
    if t.value.cuda is None:
        return None, [result(check_id, COMPAT, Status.SKIP, "CPU-only torch (see compat.torch)")]
    return t.value, []


def _expected_devices(facts: Facts) -> tuple[int, str] | None:
    """How many CUDA devices torch should see here, and the CUDA_VISIBLE_DEVICES setting ("" if unset)."""
    from gpudiag.visibility import ORDER_VAR, VISIBLE_VAR, resolve, shown_value

    m = facts.machine
    if m.nvml.status is not NvmlStatus.OK:
        return None
    env = m.env_map
    value = env.get(VISIBLE_VAR)
    count = len(resolve(m, value, env.get(ORDER_VAR)).devices)
    return count, ("" if value is None else f"{VISIBLE_VAR}={shown_value(value)}")


@check(
    "compat.torch",
    COMPAT,
    "torch imports and initialises CUDA, in a child process",
    fails=(
        "import error, hang or crash (said where: import, library versions, CUDA init), CPU-only build "
        '("Torch not compiled with CUDA enabled"), `torch.cuda.is_available()` false; WARN when torch sees '
        "another number of devices than NVML and `CUDA_VISIBLE_DEVICES` imply"
    ),
    reads=("compute_capability", "compute_mode", "memory", "mig_mode_current"),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=always,
    finding=STEADY,
)
def torch_works(facts: Facts, options: Options) -> list[CheckResult]:
    t = facts.torch
    if t.value is None:
        if t.reason is Reason.NOT_FOUND and options.torch_expected:
            return [result("compat.torch", COMPAT, Status.FAIL, t.detail, "install torch in that environment")]
        if t.reason in (Reason.NOT_FOUND, Reason.UNAVAILABLE):
            fix = "" if t.reason is Reason.UNAVAILABLE else "pip install torch, or point --python at your training venv"
            return [result("compat.torch", COMPAT, Status.SKIP, t.detail or "torch not probed", fix)]
        return [
            result(
                "compat.torch",
                COMPAT,
                Status.FAIL,
                t.detail,
                "reinstall torch in that environment; `python -c 'import torch'` shows the full error",
            )
        ]
    rt = t.value
    if rt.cuda is None:
        return [
            result(
                "compat.torch",
                COMPAT,
                Status.FAIL,
                f"torch {rt.version} is a CPU-only build ('Torch not compiled with CUDA enabled')",
                "install a CUDA build of torch (pip install torch --index-url https://download.pytorch.org/whl/cu12x)",
            )
        ]
    expected = _expected_devices(facts)
    if not rt.cuda_available:
        fix = "see the driver, device and compatibility checks"
        if expected is not None and expected[0] == 0 and expected[1] and usable_gpus(facts):
            fix = f"{expected[1]} hides every GPU: see env.visible_devices"
        return [
            result(
                "compat.torch",
                COMPAT,
                Status.FAIL,
                f"torch {rt.version} cannot use CUDA: {rt.cuda_error or 'torch.cuda.is_available() is False'}",
                fix,
            )
        ]
    if expected is not None and expected[0] != rt.device_count:
        setting = f" ({expected[1]})" if expected[1] else ""
        return [
            result(
                "compat.torch",
                COMPAT,
                Status.WARN,
                f"torch sees {rt.device_count} CUDA device(s), NVML implies {expected[0]}{setting}",
                "`gpudiag visible --probe` compares CUDA's view with NVML's",
            )
        ]
    timing = f"import {rt.import_seconds:.1f} s, CUDA init {rt.init_seconds:.1f} s"
    return [
        result(
            "compat.torch",
            COMPAT,
            Status.PASS,
            f"torch {rt.version} (CUDA {rt.cuda}) sees {rt.device_count} device(s); {timing}",
        )
    ]


@check(
    "compat.driver_cuda",
    COMPAT,
    "driver's highest CUDA vs torch's CUDA build",
    fails=(
        'driver major older (error 35, "driver too old"); WARN: same major, older minor, above the '
        "minor-version-compatibility floor (PTX from the newer toolkit fails, error 222)"
    ),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=always,
    finding=STEADY,
)
def driver_cuda(facts: Facts, options: Options) -> list[CheckResult]:
    m = facts.machine
    if m.nvml.status is not NvmlStatus.OK:
        return no_nvml("compat.driver_cuda", COMPAT, facts)
    build, version = torch_cuda_build(facts)
    if not version:
        return [result("compat.driver_cuda", COMPAT, Status.SKIP, f"no torch to compare with: {torch_missing(facts)}")]
    if build is None:
        return [result("compat.driver_cuda", COMPAT, Status.SKIP, f"torch {version} is not a CUDA build")]
    cuda = m.nvml.cuda_driver_version.value
    if cuda is None:
        return [result("compat.driver_cuda", COMPAT, Status.SKIP, "the driver's CUDA version is unknown")]
    runtime = parse_version(build)
    if not runtime:
        return [result("compat.driver_cuda", COMPAT, Status.SKIP, f"unreadable torch CUDA version {build!r}")]
    driver_cuda_v = (cuda // 1000, (cuda % 1000) // 10)
    driver = parse_version(m.nvml.driver_version.get("0"))
    verdict = driver_vs_runtime(driver_cuda_v, (runtime[0], runtime[1] if len(runtime) > 1 else 0), driver)
    supported = cuda_version_text(cuda)
    text = (
        f"driver {m.nvml.driver_version.get('?')} supports CUDA {supported}; torch {version} is built for CUDA {build}"
    )
    if verdict is Verdict.OK:
        return [result("compat.driver_cuda", COMPAT, Status.PASS, text)]
    if verdict is Verdict.MINOR_COMPAT:
        return [
            result(
                "compat.driver_cuda",
                COMPAT,
                Status.WARN,
                f"{text}: runs under minor-version compatibility, but PTX built by the newer toolkit cannot be "
                "JIT-compiled (error 222, 'provided PTX was compiled with an unsupported toolchain')",
                f"upgrade the driver to one supporting CUDA {build}",
            )
        ]
    return [
        result(
            "compat.driver_cuda",
            COMPAT,
            Status.FAIL,
            f"{text}: 'The NVIDIA driver on your system is too old' (error 35)",
            f"upgrade the driver to one supporting CUDA {build}, or install a torch built for CUDA ≤ {supported}",
        )
    ]


@check(
    "compat.arch",
    COMPAT,
    "each GPU's compute capability vs torch's compiled architectures",
    fails=(
        'no matching cubin or PTX ("no kernel image is available", error 209), with the CUDA build to '
        "install; WARN: PTX only (JIT at first launch)"
    ),
    reads=("compute_capability",),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=always,
    finding=STEADY,
)
def compute_capability(facts: Facts, options: Options) -> list[CheckResult]:
    rt, skip = _runtime_or_skip("compat.arch", facts)
    if rt is None:
        return skip
    arch_list = rt.arch_list
    if not arch_list:
        return [result("compat.arch", COMPAT, Status.SKIP, "torch reports no compiled CUDA architectures")]
    built = sorted(n for n in map(_arch_number, arch_list) if n is not None)

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        cc = gpu.compute_capability.value
        if cc is None:
            return Status.SKIP, "compute capability unknown", ""
        support, arch = arch_support(cc, arch_list)
        label = f"sm_{cc[0]}{cc[1]}"
        if support is ArchSupport.CUBIN:
            return Status.PASS, f"{label}: native kernels ({arch})", ""
        if support is ArchSupport.PTX:
            return (
                Status.WARN,
                f"{label}: only PTX ({arch}): kernels are JIT-compiled at first launch (slow start, large cache)",
                f"install a torch build with sm_{cc[0]}{cc[1]} kernels",
            )
        if built and cc > built[-1]:
            first = _first_cuda_for(cc)
            fix = (
                f"install a torch built with CUDA ≥ {first} (the cu{first.replace('.', '')} wheels or newer)"
                if first
                else f"install a torch built with a newer CUDA that includes {label}"
            )
        else:
            fix = f"install a torch build that still includes {label} (e.g. a cu126 wheel), or build from source"
        return (
            Status.FAIL,
            f"{label} is not in torch's architectures ({' '.join(arch_list)}): "
            "'no kernel image is available for execution on the device' (error 209)",
            fix,
        )

    return per_gpu("compat.arch", COMPAT, facts, judge)


# The first CUDA toolkit that compiles for a compute capability (CUDA release notes).
_FIRST_CUDA = (
    ((11, 0), "13.0"),
    ((10, 3), "12.9"),
    ((12, 1), "12.9"),
    ((10, 0), "12.8"),
    ((12, 0), "12.8"),
    ((9, 0), "11.8"),
    ((8, 9), "11.8"),
    ((8, 7), "11.4"),
    ((8, 6), "11.1"),
    ((8, 0), "11.0"),
)


def _first_cuda_for(capability: tuple[int, int]) -> str:
    return next((cuda for cc, cuda in _FIRST_CUDA if cc == capability), "")


def _arch_number(arch: str) -> tuple[int, int] | None:
    digits = arch.split("_", 1)[-1].rstrip("af")
    number = parse_count(digits)
    if number is None or len(digits) < 2:
        return None
    return number // 10, number % 10


def _cudnn_triple(encoded: int) -> tuple[int, int, int]:
    """cuDNN's integer version: 90100 = 9.1.0 (from 9 on), 8902 = 8.9.2 (before)."""
    if encoded >= 90000:
        return encoded // 10000, encoded % 10000 // 100, encoded % 100
    return encoded // 1000, encoded % 1000 // 100, encoded % 100


@check(
    "compat.cudnn",
    COMPAT,
    "cuDNN runtime vs the version torch was built with",
    fails="other major, older minor; cuDNN ≥ 9.11 with a GPU below sm_75",
    reads=("compute_capability",),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=always,
    produces=(Status.PASS, Status.FAIL, Status.SKIP),
    finding=STEADY,
)
def cudnn(facts: Facts, options: Options) -> list[CheckResult]:
    rt, skip = _runtime_or_skip("compat.cudnn", facts)
    if rt is None:
        return skip
    if rt.cudnn_version is None:
        return [result("compat.cudnn", COMPAT, Status.SKIP, "no cuDNN in this torch")]
    run = _cudnn_triple(rt.cudnn_version)
    text = f"cuDNN {dotted(run)}"
    if rt.cudnn_compiled is not None:
        compiled = rt.cudnn_compiled
        text += f" (torch built with {dotted(compiled)})"
        if run[0] != compiled[0] or run[1] < compiled[1]:
            return [
                result(
                    "compat.cudnn",
                    COMPAT,
                    Status.FAIL,
                    f"{text}: torch refuses this runtime ('cuDNN version incompatibility')",
                    f"use the cuDNN torch ships (nvidia-cudnn-cu12=={compiled[0]}.{compiled[1]}.*); "
                    "check LD_LIBRARY_PATH for another cuDNN",
                )
            ]
    old = []
    if facts.machine.nvml.status is NvmlStatus.OK:
        old = [g.label for g in usable_gpus(facts) if (g.compute_capability.value or (99, 0)) < (7, 5)]
    if run >= (9, 11, 0) and old:
        return [
            result(
                "compat.cudnn",
                COMPAT,
                Status.FAIL,
                f"{text} does not support GPUs below sm_75: {', '.join(old)}",
                "install a torch whose cuDNN is older than 9.11 on these GPUs",
            )
        ]
    return [result("compat.cudnn", COMPAT, Status.PASS, text)]


@check(
    "compat.nccl",
    COMPAT,
    "NCCL",
    fails="WARN: several GPUs and no NCCL",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=always,
    produces=(Status.PASS, Status.WARN, Status.SKIP),
    finding=STEADY,
)
def nccl(facts: Facts, options: Options) -> list[CheckResult]:
    rt, skip = _runtime_or_skip("compat.nccl", facts)
    if rt is None:
        return skip
    gpus = len(usable_gpus(facts)) if facts.machine.nvml.status is NvmlStatus.OK else 0
    if rt.nccl_version is None:
        if gpus > 1:
            return [
                result(
                    "compat.nccl",
                    COMPAT,
                    Status.WARN,
                    f"{gpus} GPUs but this torch has no NCCL: multi-GPU training (DDP) cannot use the nccl backend",
                    "install an official CUDA build of torch (it bundles NCCL)",
                )
            ]
        return [result("compat.nccl", COMPAT, Status.SKIP, f"no NCCL, and {gpus} GPU(s): not needed")]
    return [result("compat.nccl", COMPAT, Status.PASS, f"NCCL {dotted(rt.nccl_version)}")]
