"""What `gpudiag bench-transfer` was asked for: its options checked and parsed once into the
:class:`~gpudiag.bench.plan.Plan` the child runs and how the result is shown. Every usage error is
raised here, before torch's files or NVML are read.

The command hands over its options as a :class:`Request` (``cli.common.request_of``);
:func:`prepare` returns the :class:`Prepared` run or raises one :class:`~gpudiag.errors.UsageError`.
"""

from __future__ import annotations

import enum

import msgspec

from gpudiag.bench.plan import Plan, make_plan
from gpudiag.errors import UsageError


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag bench-transfer`, as given (see the command for what each one means)."""

    sizes: str | None = None
    sweep: bool = False
    modes: str | None = None
    device: str | None = None
    iters: int = 16
    samples: int = 3
    gib: bool = False
    json_output: bool = False
    csv_output: bool = False


class Output(enum.Enum):
    TABLE = "table"
    JSON = "json"  # gpudiag.bench-transfer/1
    CSV = "csv"  # one row per figure


class Prepared(msgspec.Struct, frozen=True):
    plan: Plan
    output: Output
    binary: bool  # GiB/s (2^30 B/s) rather than GB/s
    explicit_peer: bool  # peer modes asked for by name: with one GPU, a note says none was measured


def prepare(r: Request, replay: str | None) -> Prepared:
    """The run ``r`` asks for on this machine, or the first usage error in it (a replay is one)."""
    if r.json_output and r.csv_output:
        raise UsageError("choose one of --json and --csv")
    plan = make_plan(r.modes, r.sizes, r.sweep, r.iters, r.samples, r.device)
    if replay:
        raise UsageError("bench-transfer measures this machine; it cannot run on a replay")
    output = Output.JSON if r.json_output else Output.CSV if r.csv_output else Output.TABLE
    explicit_peer = r.modes is not None and any(m.is_peer for m in plan.modes)
    return Prepared(plan, output, r.gib, explicit_peer)
