"""The work units of tests/conftest.py's scheduler name tests that exist (a renamed one would
quietly leave its unit)."""

from __future__ import annotations

import importlib

from tests.conftest import TORCH_IN_THE_WORKER, work_unit


def test_the_tests_that_import_torch_in_the_worker_are_one_unit_and_exist() -> None:
    for prefix in TORCH_IN_THE_WORKER:
        module, _, name = prefix.partition("::")
        function = name.removesuffix("[")
        assert callable(
            getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), function, None)
        ), prefix
    units = {work_unit(prefix + ("address]" if prefix.endswith("[") else "")) for prefix in TORCH_IN_THE_WORKER}
    assert units == {"torch in the worker"}
    assert work_unit("tests/test_deep_children.py::test_the_whole_deep_run_at_level_3").endswith("level_3")
