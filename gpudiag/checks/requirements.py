"""Requirements a CI job asserts about its runner: --require-driver/-cuda/-capability/-gpu/-torch."""

from __future__ import annotations

from gpudiag.checks import Action, CheckResult, Facts, Options, Scope, Status
from gpudiag.checks.base import (
    REQUIRE,
    STEADY,
    Judge,
    check,
    pass_if,
    result,
    torch_cuda_build,
    torch_missing,
    usable_gpus,
)
from gpudiag.checks.compat import parse_version
from gpudiag.model import Gpu, NvmlStatus, cuda_version_text


def _asks_torch_cuda(options: Options) -> bool:
    """--require-cuda judges torch's CUDA build too."""
    return options.require_cuda is not None


def _asks_torch_version(options: Options) -> bool:
    return options.require_torch is not None


@check(
    "req.driver",
    REQUIRE,
    "`--require-driver`",
    fails="the driver is older, or NVML cannot say",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def require_driver(facts: Facts, options: Options) -> list[CheckResult]:
    want = options.require_driver
    if not want:
        return []
    have = facts.machine.nvml.driver_version.value
    if have is None:
        return [
            result("req.driver", REQUIRE, Status.FAIL, f"driver ≥ {want} required; NVML unavailable", "see nvml.init")
        ]
    good = parse_version(have) >= parse_version(want)
    fix = "" if good else f"upgrade the driver to {want} or later"
    return [result("req.driver", REQUIRE, pass_if(good), f"driver {have}, required ≥ {want}", fix)]


@check(
    "req.cuda",
    REQUIRE,
    "`--require-cuda`: the driver's CUDA and torch's build, one result each",
    fails="either is older, or cannot be read",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=_asks_torch_cuda,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def require_cuda(facts: Facts, options: Options) -> list[CheckResult]:
    want_text = options.require_cuda
    if not want_text:
        return []
    want = parse_version(want_text)[:2]
    out = []
    cuda = facts.machine.nvml.cuda_driver_version.value
    if cuda is None:
        out.append(
            result(
                "req.cuda",
                REQUIRE,
                Status.FAIL,
                f"CUDA ≥ {want_text} required; driver's CUDA unknown",
                "see nvml.init",
                "driver",
            )
        )
    else:
        good = (cuda // 1000, (cuda % 1000) // 10) >= want
        out.append(
            result(
                "req.cuda",
                REQUIRE,
                pass_if(good),
                f"driver supports CUDA {cuda_version_text(cuda)}, required ≥ {want_text}",
                "" if good else f"upgrade the driver to one supporting CUDA {want_text}",
                "driver",
            )
        )
    build, version = torch_cuda_build(facts)
    if build is None:
        what = f"torch {version} is not a CUDA build" if version else torch_missing(facts)
        out.append(
            result(
                "req.cuda",
                REQUIRE,
                Status.FAIL,
                f"{what}; CUDA ≥ {want_text} required",
                "install a CUDA torch",
                "torch",
            )
        )
    else:
        good = parse_version(build)[:2] >= want
        out.append(
            result(
                "req.cuda",
                REQUIRE,
                pass_if(good),
                f"torch {version} built for CUDA {build}, required ≥ {want_text}",
                "" if good else f"install a torch built for CUDA {want_text} or later",
                "torch",
            )
        )
    return out


def _gpu_requirement(check_id: str, facts: Facts, wanted: str, judge: Judge) -> list[CheckResult]:
    fix = f"run the job on a node with {wanted}"
    if facts.machine.nvml.status is not NvmlStatus.OK:
        return [result(check_id, REQUIRE, Status.FAIL, f"{wanted} required; NVML unavailable", "see nvml.init")]
    gpus = usable_gpus(facts)
    if not gpus:
        return [result(check_id, REQUIRE, Status.FAIL, f"{wanted} required; no usable GPU", fix)]
    out = []
    for gpu in gpus:
        status, finding = judge(gpu)[:2]
        out.append(result(check_id, REQUIRE, status, finding, fix if status is Status.FAIL else "", gpu.label))
    return out


@check(
    "req.capability",
    REQUIRE,
    "`--require-capability`, per GPU",
    fails="a GPU's compute capability is lower, or unknown",
    reads=("compute_capability",),
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def require_capability(facts: Facts, options: Options) -> list[CheckResult]:
    want_text = options.require_capability
    if not want_text:
        return []
    parsed = parse_version(want_text)
    want = (parsed[0], parsed[1] if len(parsed) > 1 else 0)

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        cc = gpu.compute_capability.value
        if cc is None:
            return Status.FAIL, f"compute capability unknown, required ≥ {want_text}", ""
        good = cc >= want
        return pass_if(good), f"compute capability {cc[0]}.{cc[1]}, required ≥ {want_text}", ""

    return _gpu_requirement("req.capability", facts, f"compute capability ≥ {want_text}", judge)


@check(
    "req.gpu",
    REQUIRE,
    "`--require-gpu`, per GPU",
    fails="a GPU's name does not contain it (case aside)",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def require_gpu(facts: Facts, options: Options) -> list[CheckResult]:
    wanted = options.require_gpu
    if not wanted:
        return []

    def judge(gpu: Gpu) -> tuple[Status, str, str]:
        name = gpu.name.get("?")
        good = wanted.casefold() in name.casefold()
        return pass_if(good), f"{name} {'matches' if good else 'does not match'} {wanted!r}", ""

    return _gpu_requirement("req.gpu", facts, f"a GPU named like {wanted!r}", judge)


@check(
    "req.torch",
    REQUIRE,
    "`--require-torch`: a version specifier (`>=2.3`)",
    fails="torch's version does not satisfy it, or torch is missing",
    scope=Scope.JOB,
    action=Action.FIX_JOB,
    needs_torch=_asks_torch_version,
    produces=(Status.PASS, Status.FAIL),
    finding=STEADY,
)
def require_torch(facts: Facts, options: Options) -> list[CheckResult]:
    spec = options.require_torch
    if not spec:
        return []
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    _, version = torch_cuda_build(facts)
    if not version:
        return [
            result("req.torch", REQUIRE, Status.FAIL, f"torch {spec} required; {torch_missing(facts)}", "install torch")
        ]
    try:
        good = Version(version) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return [result("req.torch", REQUIRE, Status.FAIL, f"torch version {version!r} is not a valid version")]
    return [
        result(
            "req.torch",
            REQUIRE,
            pass_if(good),
            f"torch {version} {'satisfies' if good else 'does not satisfy'} {spec}",
            "" if good else f"pip install 'torch{spec}'",
        )
    ]
