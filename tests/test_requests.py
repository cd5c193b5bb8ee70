"""A command's options reach the layers below one way: as its Request, field by field by the
option's name (cli.common.request_of), then checked and parsed once into what they mean."""

from __future__ import annotations

import pytest
import typer.main

from gpudiag.checks.deep import levels
from gpudiag.checks.request import Request as CheckRequest
from gpudiag.checks.request import prepare
from gpudiag.cli.app import build_app
from gpudiag.cli.list_modes import Request as ListRequest
from gpudiag.errors import UsageError
from gpudiag.memory.request import Request as MemoryRequest


@pytest.mark.parametrize(("name", "kind"), [("check", CheckRequest), ("list", ListRequest), ("memory", MemoryRequest)])
def test_a_request_has_a_field_for_every_option_of_its_command(name: str, kind: type) -> None:
    group = typer.main.get_command(build_app(only=name))
    params = {p.name for p in group.commands[name].params}  # type: ignore[attr-defined]
    assert set(kind.__struct_fields__) == params


def test_the_level_is_parsed_once_into_what_it_runs() -> None:
    prepared = prepare(CheckRequest(level=3), replay=None)
    assert prepared.plan.level is levels.LEVELS[3]
    deep = prepared.plan.deep
    assert deep is not None and deep.level is levels.LEVELS[3] and deep.budget == levels.LEVELS[3].budget
    assert "stress.gemm" in deep.checks and "mem.bandwidth" not in deep.checks  # a level-4 check
    assert prepare(CheckRequest(level=2, budget=90.0, force=True), replay=None).plan.deep == levels.DeepPlan(
        levels.LEVELS[2], ("mem.test", "link.pcie", "link.peer", "link.nccl"), 90.0, force=True
    )


def test_level_1_plans_no_deep_test() -> None:
    plan = prepare(CheckRequest(), replay="h100x8-healthy").plan
    assert plan.level is levels.LEVELS[1] and plan.deep is None
    assert prepare(CheckRequest(level=2, only=["health"]), replay=None).plan.deep is None  # none selected


@pytest.mark.parametrize("number", [0, 5, -1])
def test_a_level_that_does_not_exist_is_a_usage_error(number: int) -> None:
    with pytest.raises(UsageError, match=f"--level {number}: expected 1 to 4"):
        prepare(CheckRequest(level=number), replay=None)
