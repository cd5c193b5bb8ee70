"""Each check rule on example machines: pass, warn, fail and skip."""

from __future__ import annotations

import dataclasses

import pytest

from gpudiag.checks import CheckResult, Facts, FunctionalResult, Options, Status, rules
from gpudiag.model import Machine, Reading, Reason, TorchRuntime
from gpudiag.probe.collect import collect
from gpudiag.probe.devices import DeviceFacts, DeviceNode


def facts(name: str, **kw: object) -> Facts:
    machine = collect(name)
    base: dict[str, object] = {"machine": machine, "torch": machine.torch_runtime, "devices": None}
    base.update(kw)
    return Facts(**base)  # type: ignore[arg-type]


def results(f: Facts, check_id: str, options: Options | None = None) -> list[CheckResult]:
    return rules.run(f, options or Options(), only=(check_id,))


def statuses(f: Facts, check_id: str, options: Options | None = None) -> list[Status]:
    return [r.status for r in results(f, check_id, options)]


def test_nvml_init_failures_name_the_fix() -> None:
    r = results(facts("driver-mismatch"), "nvml.init")[0]
    assert r.status is Status.FAIL
    assert "loaded kernel module: 535.129.03" in r.finding and "reboot" in r.fix
    assert statuses(facts("no-driver"), "nvml.init") == [Status.FAIL]
    assert statuses(facts("h100x8-healthy"), "nvml.init") == [Status.PASS]
    # The other NVML-based checks skip rather than pile up failures.
    assert statuses(facts("no-driver"), "health.ecc") == [Status.SKIP]


def test_gpu_count_and_lost_gpus() -> None:
    assert statuses(facts("h100x8-healthy"), "nvml.gpu_count", Options(expect_gpus=8)) == [Status.PASS]
    assert statuses(facts("h100x8-healthy"), "nvml.gpu_count", Options(expect_gpus=4)) == [Status.FAIL]
    assert statuses(facts("zero-gpus"), "nvml.gpu_count") == [Status.FAIL]
    lost = results(facts("gpu-lost"), "nvml.gpu_lost")
    assert [(r.status, r.target) for r in lost] == [(Status.FAIL, "GPU 2")]


def _devices(missing: str = "", modules: tuple[str, ...] = ("nvidia", "nvidia_uvm")) -> DeviceFacts:
    nodes = tuple(DeviceNode(f"/dev/{n}", n != missing, n != missing) for n in ("nvidiactl", "nvidia-uvm", "nvidia0"))
    return DeviceFacts(nodes, frozenset(modules), True)


def test_device_nodes_and_modules() -> None:
    assert statuses(facts("h100x8-healthy", devices=_devices()), "host.device_nodes") == [Status.PASS]
    r = results(facts("h100x8-healthy", devices=_devices("nvidia-uvm")), "host.device_nodes")[0]
    assert r.status is Status.FAIL and "CUDA unknown error" in r.finding and "nvidia-modprobe" in r.fix
    assert statuses(facts("h100x8-healthy", devices=_devices(modules=("nvidia",))), "host.kernel_modules") == [
        Status.FAIL
    ]
    nouveau = _devices(modules=("nouveau",))
    assert results(facts("h100x8-healthy", devices=nouveau), "host.kernel_modules")[0].finding.startswith("the nouveau")
    assert statuses(facts("h100x8-healthy"), "host.device_nodes") == [Status.SKIP]  # replay: not recorded


def test_driver_cuda_pass_warn_fail_skip() -> None:
    assert statuses(facts("h100x8-healthy"), "compat.driver_cuda") == [Status.PASS]
    assert statuses(facts("driver535-torch-cu128"), "compat.driver_cuda") == [Status.WARN]
    old = facts("v100x4-tutorial")
    newer_torch = dataclasses.replace(
        old.machine,
        torch_build=Reading.of(dataclasses.replace(old.machine.torch_build.value, cuda="12.1")),  # type: ignore[type-var]
    )
    fail = results(dataclasses.replace(old, machine=newer_torch), "compat.driver_cuda")[0]
    assert fail.status is Status.FAIL and "too old" in fail.finding
    assert statuses(facts("gtx1050-desktop"), "compat.driver_cuda") == [Status.SKIP]  # no torch


def test_arch_list_against_compute_capability() -> None:
    r = results(facts("p100-torch-cu128"), "compat.arch")[0]
    assert r.status is Status.FAIL and "sm_60" in r.finding and "no kernel image" in r.finding
    assert statuses(facts("driver535-torch-cu128"), "compat.arch") == [Status.PASS]
    assert statuses(facts("h100x8-healthy"), "compat.arch") == [Status.SKIP]  # runtime not recorded


def _runtime(**changes: object) -> Reading[TorchRuntime]:
    base = collect("p100-torch-cu128").torch_runtime.value
    assert base is not None
    return Reading.of(dataclasses.replace(base, **changes))  # type: ignore[arg-type]


def test_torch_runtime_states() -> None:
    cpu = _runtime(cuda=None, cuda_available=False, version="2.13.0+cpu")
    r = results(facts("h100x8-healthy", torch=cpu), "compat.torch")[0]
    assert r.status is Status.FAIL and "CPU-only" in r.finding
    hung = Reading.missing(Reason.UNKNOWN_ERROR, "torch hung: no answer within 90 s")
    assert results(facts("h100x8-healthy", torch=hung), "compat.torch")[0].finding.startswith("torch hung")
    missing = Reading.missing(Reason.NOT_FOUND, "torch is not installed for /usr/bin/python3")
    assert statuses(facts("h100x8-healthy", torch=missing), "compat.torch") == [Status.SKIP]
    assert statuses(facts("misconfigured-node"), "compat.torch") == [Status.FAIL]
    partial = _runtime(device_count=4)
    assert statuses(facts("h100x8-healthy", torch=partial), "compat.torch") == [Status.WARN]


def test_cudnn_and_nccl() -> None:
    assert statuses(facts("p100-torch-cu128"), "compat.cudnn") == [Status.PASS]
    mismatch = _runtime(cudnn_version=90100, cudnn_compiled=(9, 7, 1))
    assert statuses(facts("p100-torch-cu128", torch=mismatch), "compat.cudnn") == [Status.FAIL]
    new_cudnn_old_gpu = _runtime(cudnn_version=91100, cudnn_compiled=(9, 11, 0))
    r = results(facts("p100-torch-cu128", torch=new_cudnn_old_gpu), "compat.cudnn")[0]
    assert r.status is Status.FAIL and "below sm_75" in r.finding
    assert statuses(facts("h100x8-healthy", torch=_runtime(nccl_version=None)), "compat.nccl") == [Status.WARN]
    assert statuses(facts("p100-torch-cu128", torch=_runtime(nccl_version=None)), "compat.nccl") == [Status.SKIP]


def test_visible_devices_and_environment() -> None:
    assert statuses(facts("misconfigured-node"), "env.visible_devices") == [Status.FAIL]
    assert statuses(facts("v100x4-tutorial"), "env.visible_devices") == [Status.PASS]
    assert statuses(facts("h100x8-healthy"), "env.visible_devices") == [Status.PASS]
    mixed = facts("mixed-gpus-workstation")
    env = dataclasses.replace(mixed.machine, env=(("CUDA_VISIBLE_DEVICES", "0"),))
    assert statuses(dataclasses.replace(mixed, machine=env), "env.visible_devices") == [Status.WARN]
    assert statuses(facts("misconfigured-node"), "env.variables") == [Status.WARN]
    assert statuses(facts("h100x8-healthy"), "env.variables") == [Status.PASS]


def test_configuration_rules() -> None:
    assert statuses(facts("a100-mig-no-instances"), "config.mig") == [Status.FAIL]
    assert statuses(facts("a100-mig"), "config.mig") == [Status.PASS]
    assert statuses(facts("gtx1050-desktop"), "config.mig") == [Status.SKIP]  # GeForce: not supported
    assert statuses(facts("misconfigured-node"), "config.compute_mode") == [Status.PASS, Status.FAIL]
    assert statuses(facts("misconfigured-node"), "config.persistence") == [Status.WARN, Status.WARN]


def _with_gpu(name: str, **changes: object) -> Facts:
    f = facts(name)
    gpu = dataclasses.replace(f.machine.gpus[0], **changes)  # type: ignore[arg-type]
    machine: Machine = dataclasses.replace(f.machine, gpus=(gpu, *f.machine.gpus[1:]))
    return dataclasses.replace(f, machine=machine)


def test_health_rules_fail_on_the_ecc_machine() -> None:
    f = facts("a100-ecc-errors")
    for check_id in ("health.ecc", "health.row_remap", "health.recovery_action", "health.clock_events"):
        assert statuses(f, check_id) == [Status.FAIL], check_id
    assert statuses(f, "health.temperature") == [Status.WARN]


def test_health_rules_skip_what_a_geforce_does_not_support() -> None:
    f = facts("geforce-no-ecc-power")
    for check_id in ("health.ecc", "health.retired_pages", "health.row_remap", "health.recovery_action"):
        assert statuses(f, check_id) == [Status.SKIP], check_id


def test_retired_pages_thresholds() -> None:
    from gpudiag.model import RetiredPages

    assert statuses(facts("v100x4-tutorial"), "health.retired_pages")[0] is Status.PASS
    many = _with_gpu("v100x4-tutorial", retired_pages=Reading.of(RetiredPages(60, 3, False)))
    assert statuses(many, "health.retired_pages")[0] is Status.FAIL
    pending = _with_gpu("v100x4-tutorial", retired_pages=Reading.of(RetiredPages(1, 0, True)))
    assert statuses(pending, "health.retired_pages")[0] is Status.FAIL


def test_throttle_temperature_inforom_processes_memory() -> None:
    assert (
        statuses(_with_gpu("h100x8-healthy", clock_event_reasons=Reading.of(0x20)), "health.clock_events")[0]
        is Status.WARN
    )
    hot = _with_gpu("h100x8-healthy", temperature_c=Reading.of(88))
    assert statuses(hot, "health.temperature")[0] is Status.FAIL
    bad_rom = _with_gpu("h100x8-healthy", inforom_valid=Reading.of(False))
    assert statuses(bad_rom, "health.inforom")[0] is Status.FAIL
    assert statuses(facts("gtx1050-desktop"), "health.processes") == [Status.FAIL]  # a python compute process
    assert statuses(facts("gtx1050-desktop"), "health.processes", Options(allow_processes=True)) == [Status.WARN]
    tight = Options(min_free_bytes=80 * 1024**3)
    assert set(statuses(facts("h100x8-healthy"), "health.free_memory", tight)) == {Status.FAIL}
    assert set(statuses(facts("h100x8-healthy"), "health.free_memory")) == {Status.PASS}


def test_requirements() -> None:
    f = facts("h100x8-healthy")
    ok = Options(
        require_driver="550", require_cuda="12.4", require_capability="9.0", require_gpu="h100", require_torch=">=2.3"
    )
    assert {r.status for r in results(f, "req", ok)} == {Status.PASS}
    bad = Options(
        require_driver="555.1", require_cuda="12.6", require_capability="10.0", require_gpu="B200", require_torch="<2.0"
    )
    found = results(f, "req", bad)
    assert {r.status for r in found} == {Status.FAIL}
    assert {r.id for r in found} == {"req.driver", "req.cuda", "req.capability", "req.gpu", "req.torch"}
    assert results(f, "req") == []  # nothing required, nothing reported
    assert {r.status for r in results(facts("no-driver"), "req", Options(require_gpu="H100"))} == {Status.FAIL}


def _functional(**changes: object) -> FunctionalResult:
    base = FunctionalResult(0, 0, True, "", 0.35, True, 2.1e-6, 48.2, (5, 16), 0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_functional_results() -> None:
    f = facts("h100x8-healthy", functional=(_functional(),))
    r = results(f, "func.gpu")[0]
    assert r.status is Status.PASS and "48.2 TFLOP/s" in r.finding and "Gen5 x16 under load" in r.finding
    wrong = facts("h100x8-healthy", functional=(_functional(matmul_rel_error=float("nan")),))
    assert statuses(wrong, "func.gpu") == [Status.FAIL]
    memory = facts("h100x8-healthy", functional=(_functional(memory_ok=False),))
    assert statuses(memory, "func.gpu") == [Status.FAIL]
    crashed = facts("h100x8-healthy", functional=(_functional(ok=False, error="RuntimeError: CUDA error: ECC"),))
    assert statuses(crashed, "func.gpu") == [Status.FAIL]
    throttled = facts("h100x8-healthy", functional=(_functional(loaded_clock_events=0x40),))
    assert statuses(throttled, "func.gpu") == [Status.WARN]
    skipped = facts("h100x8-healthy", functional_skip_reason="--quick")
    assert results(skipped, "func.gpu")[0].finding == "--quick"


def test_only_and_skip_select_by_id_or_area() -> None:
    f = facts("h100x8-healthy")
    assert {r.id for r in rules.run(f, Options(), only=("health",))} <= {
        c.id for c in rules.CHECKS if c.id.startswith("health.")
    }
    assert not [
        r for r in rules.run(f, Options(), skip=("health", "config")) if r.id.startswith(("health.", "config."))
    ]


@pytest.mark.parametrize("name", ["h100x8-healthy", "v100x4-tutorial", "a100-mig", "gtx1050-desktop"])
def test_every_rule_returns_results_with_ids_from_the_registry(name: str) -> None:
    ids = {c.id for c in rules.CHECKS}
    for r in rules.run(facts(name), Options(require_gpu="x")):
        assert r.id in ids or r.id.startswith("req.")
        assert "\n" not in r.finding
