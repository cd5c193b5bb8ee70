"""What `gpudiag visible` was asked: the options checked against each other (every usage error, before
NVML is read), and the CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER to evaluate, each with where it comes from."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpudiag.errors import UsageError
from gpudiag.readings import groups_of
from gpudiag.selection import GpuSelection, parse_selection
from gpudiag.visibility.result import ORDER_VAR, ORDERS, VISIBLE_VAR

# The readings the visibility rules and the view use: memory size, capability, compute mode, MIG instances.
READS = ("memory", "compute_capability", "compute_mode", "mig_mode_current", "mig_devices")
GROUPS = groups_of(READS)


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag visible`, as given (see the command for what each one means)."""

    value: str | None = None
    unset: bool = False
    order: str | None = None
    select: str | None = None
    probe: bool = False
    json_output: bool = False


class Setting(msgspec.Struct, frozen=True):
    """The two variables CUDA reads, as evaluated, and where each comes from (an option or the environment)."""

    value: str | None  # CUDA_VISIBLE_DEVICES; None: unset
    origin: str
    order: str | None  # CUDA_DEVICE_ORDER; None: unset
    order_origin: str


class Prepared(msgspec.Struct, frozen=True):
    """The options read into what they mean."""

    order: str | None  # --order as CUDA reads it; None: not given
    select: GpuSelection | None  # the GPUs or MIG instance --select names; None: not given


def prepare(r: Request, replay: str | None) -> Prepared:
    """The options read, once they agree; else a usage error (every one before NVML is read)."""
    if r.value is not None and r.unset:
        raise UsageError("choose one of --value and --unset")
    order_option = None
    if r.order is not None:
        order_option = r.order.strip().upper()
        if order_option not in ORDERS:
            raise UsageError(f"--order {r.order!r}: use FASTEST_FIRST or PCI_BUS_ID")
    if r.probe and replay:
        raise UsageError("--probe asks this machine's CUDA runtime; it cannot probe a replayed machine")
    if r.probe and r.select is not None:
        raise UsageError("choose one of --probe and --select (probe the selection with --value)")
    return Prepared(order_option, parse_selection(r.select, "--select", instances=True))


def setting(r: Request, order: str | None, env: Mapping[str, str], replayed: bool) -> Setting:
    """The options' values (``order``: as :func:`prepare` read it), else the (recorded) environment's."""
    recorded = "recorded environment" if replayed else "environment"
    if r.unset:
        current, origin = None, "--unset"
    elif r.value is not None:
        current, origin = r.value, "--value"
    else:
        current, origin = env.get(VISIBLE_VAR), recorded
    current_order, order_origin = (order, "--order") if order is not None else (env.get(ORDER_VAR), recorded)
    return Setting(current, origin, current_order, order_origin)
