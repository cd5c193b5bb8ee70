"""`gpudiag check`: can a job run here, and if not, why and what to do."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, make_console, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

_VERSION = re.compile(r"^\d+(\.\d+)*$")


def _version_option(value: str | None, option: str, example: str) -> str | None:
    if value is not None and not _VERSION.match(value.strip()):
        raise UsageError(f"{option} {value!r}: expected a version like {example}")
    return value.strip() if value is not None else None


def _ids(values: list[str] | None, option: str) -> tuple[str, ...]:
    from gpudiag.checks.rules import CHECK_IDS

    out = []
    for value in values or []:
        for item in (v.strip() for v in value.split(",")):
            if not item:
                continue
            if not any(cid == item or cid.startswith(item.rstrip(".") + ".") for cid in CHECK_IDS):
                raise UsageError(f"{option} {item!r}: no such check; ids: {', '.join(CHECK_IDS)}")
            out.append(item)
    return tuple(out)


@handle_errors
def command(
    ctx: typer.Context,
    quick: Annotated[
        bool, typer.Option("--quick", help="Skip the functional test (seconds instead of ~10 s).")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Machine-readable results (gpudiag.check/1).")] = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write JUnit XML here (one test case per check).", dir_okay=False),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only these check ids or areas (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Skip these check ids or areas (repeatable).")
    ] = None,
    expect_gpus: Annotated[
        int | None, typer.Option("--expect-gpus", help="Fail unless NVML sees this many GPUs.")
    ] = None,
    min_free: Annotated[
        str | None, typer.Option("--min-free", help="Fail a GPU with less free memory, e.g. 20GiB.")
    ] = None,
    allow_processes: Annotated[
        bool, typer.Option("--allow-processes", help="Running compute processes warn instead of failing.")
    ] = False,
    require_driver: Annotated[str | None, typer.Option("--require-driver", help="Minimum driver, e.g. 550.")] = None,
    require_cuda: Annotated[
        str | None, typer.Option("--require-cuda", help="Minimum CUDA of the driver and of torch's build, e.g. 12.4.")
    ] = None,
    require_capability: Annotated[
        str | None, typer.Option("--require-capability", help="Minimum compute capability, e.g. 8.0.")
    ] = None,
    require_gpu: Annotated[
        str | None, typer.Option("--require-gpu", help='GPU name must contain this, e.g. "H100".')
    ] = None,
    require_torch: Annotated[
        str | None, typer.Option("--require-torch", help='torch version specifier, e.g. ">=2.3".')
    ] = None,
    python: Annotated[
        str | None, typer.Option("--python", help="Check the torch of this interpreter (e.g. your training venv).")
    ] = None,
    no_torch: Annotated[bool, typer.Option("--no-torch", help="Do not start torch at all (its checks SKIP).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds allowed for each torch child process.")] = 90.0,
) -> None:
    """Pre-job health and CUDA/driver/PyTorch compatibility checks, with exit codes for CI and schedulers."""
    from gpudiag.checks import Facts, Options, Status
    from gpudiag.checks import rules as check_rules
    from gpudiag.model import NvmlStatus, Reading, Reason, TorchRuntime
    from gpudiag.probe.collect import open_source
    from gpudiag.render import check_view
    from gpudiag.units import parse_size

    s = settings(ctx)
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout}: must be a positive number of seconds")
    if expect_gpus is not None and expect_gpus < 0:
        raise UsageError("--expect-gpus must be 0 or more")
    if require_torch is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(require_torch)
        except InvalidSpecifier:
            raise UsageError(f"--require-torch {require_torch!r}: expected a specifier like '>=2.3'") from None
    if python is not None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise UsageError(f"--python {python!r}: not an executable file")
    options = Options(
        expect_gpus=expect_gpus,
        min_free_bytes=parse_size(min_free) if min_free is not None else None,
        require_driver=_version_option(require_driver, "--require-driver", "550 or 550.54.15"),
        require_cuda=_version_option(require_cuda, "--require-cuda", "12.4"),
        require_capability=_version_option(require_capability, "--require-capability", "8.0"),
        require_gpu=require_gpu,
        require_torch=require_torch,
        allow_processes=allow_processes,
        quick=quick,
    )
    only_ids, skip_ids = _ids(only, "--only"), _ids(skip, "--skip")

    incomplete = False
    with open_source(s.replay) as source:
        machine = source.read()
        live = not s.replay
        torch: Reading[TorchRuntime]
        if no_torch:
            torch = Reading.missing(Reason.UNAVAILABLE, "--no-torch: torch not started")
        elif live:
            from gpudiag.probe.torch_runtime import probe

            torch = probe(python, timeout)
            incomplete = torch.reason is Reason.UNAVAILABLE
        elif machine.torch_runtime.reason is Reason.UNAVAILABLE:
            torch = Reading.missing(Reason.UNAVAILABLE, "torch runtime not recorded in this snapshot")
        else:
            torch = machine.torch_runtime
        devices = None
        if live:
            from gpudiag.probe.devices import read_device_facts

            devices = read_device_facts(
                tuple(g.minor_number.value for g in machine.gpus if g.minor_number.value is not None)
            )
        functional, why = None, ""
        if quick:
            why = "--quick"
        elif not live:
            why = "not run on a replayed machine"
        elif machine.nvml.status is not NvmlStatus.OK:
            why = "NVML unavailable"
        elif torch.value is None or not torch.value.cuda_available:
            why = "torch cannot use CUDA here (see compat.torch)"
        else:
            from gpudiag.checks import functional as functional_test

            uuids = {(g.uuid.value or "").removeprefix("GPU-").lower(): g.index for g in machine.gpus}

            def nvml_index_of(uuid: str) -> int | None:
                return uuids.get(uuid.removeprefix("GPU-").lower())

            def read_loaded(torch_index: int, _: str) -> tuple[int | None, tuple[int, int] | None, int | None]:
                devices_now = torch.value.devices if torch.value else ()
                index = nvml_index_of(devices_now[torch_index].uuid) if torch_index < len(devices_now) else None
                if index is None:
                    return None, None, None
                gpu = source.read().gpu(index)
                gen, width = gpu.pcie.gen_current.value, gpu.pcie.width_current.value
                return (
                    index,
                    (gen, width) if gen is not None and width is not None else None,
                    gpu.clock_event_reasons.value,
                )

            functional, why = functional_test.run(python, nvml_index_of, read_loaded, timeout + 20 * len(machine.gpus))
            incomplete = incomplete or functional is None

    facts = Facts(machine=machine, torch=torch, devices=devices, functional=functional, functional_skip_reason=why)
    results = check_rules.run(facts, options, only_ids, skip_ids)
    statuses = {r.status for r in results}
    if Status.FAIL in statuses or (strict and Status.WARN in statuses):
        code = ExitCode.FAILED
    elif incomplete:
        code = ExitCode.CHECK_INCOMPLETE
    else:
        code = ExitCode.OK

    if junit is not None:
        try:
            junit.write_text(check_view.to_junit(facts, results, strict))
        except OSError as exc:
            raise GpudiagError(f"cannot write {junit}: {exc.strerror or exc}", ExitCode.USAGE) from None
    if json_output:
        typer.echo(json.dumps(check_view.to_json(facts, results, strict, int(code)), indent=2))
    else:
        make_console(s).print(check_view.render(facts, results, strict))
    raise typer.Exit(int(code))
