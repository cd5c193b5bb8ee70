"""A pytest plugin that writes each test's CPU time: ``python -m pytest -p tests.cpu_times -n auto
--dist loadgroup`` with ``GPUDIAG_CPU_TIMES=PREFIX`` writes ``PREFIX.WORKER.json``, one per process.

Wall durations (``--durations``) on a shared machine say more about the load than about a test;
CPU time (the process's own, and its children's once reaped: gpudiag, torch, pip, gpustat) does not.
Each row: node id, wall seconds, own CPU-s, children's CPU-s, whether the test is ``slow``.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from typing import Any

import pytest

ENV = "GPUDIAG_CPU_TIMES"
_rows: list[tuple[str, float, float, float, bool]] = []


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    started, (own, children) = time.monotonic(), _cpu()
    try:
        return (yield)
    finally:
        own_after, children_after = _cpu()
        slow = item.get_closest_marker("slow") is not None
        _rows.append((item.nodeid, time.monotonic() - started, own_after - own, children_after - children, slow))


def pytest_sessionfinish(session: pytest.Session) -> None:
    prefix = os.environ.get(ENV)
    if not prefix:
        return
    own, children = _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{prefix}.{worker}.json", "w") as out:
        json.dump({"rows": _rows, "process_cpu": own, "children_cpu": children}, out)
