"""How tests/conftest.py shares the quick loop out. The scheduler `--dist loadgroup` gets, run against
two pretend workers: every test runs once, a grouped module on one worker, and workers are sent tests
in chunks (one test per report kept each worker waiting on the main process). And the quick loop's
collection leaves a sweep's slow cases unmade."""

from __future__ import annotations

import types
from typing import Any

import pytest

from tests import conftest  # its hooks, called as pytest would (imported by name, one would be this module's own)
from tests.unit_scheduling import BUFFER_S

GROUPED = [f"tests/test_layers.py::test_rule_{n}" for n in range(10)]
SINGLE = [f"tests/test_model.py::test_{n}" for n in range(990)]
COLLECTION = SINGLE[:500] + GROUPED + SINGLE[500:]


class Worker:
    def __init__(self, name: str) -> None:
        self.gateway = types.SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []  # each message's indexes
        self.pending: list[int] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)
        self.pending.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler() -> Any:
    config = types.SimpleNamespace(
        getvalue=lambda name: {"dist": "loadgroup", "tx": ["popen", "popen"]}[name],
        option=types.SimpleNamespace(loadscopereorder=False),
    )
    log = types.SimpleNamespace(loadscopesched=lambda *args: None)
    return conftest.pytest_xdist_make_scheduler(config, log)  # type: ignore[arg-type]


def run(sched: Any, workers: list[Worker], pace: dict[str, int], seconds: float = 0.01) -> dict[str, list[str]]:
    """Each worker reports tests of ``seconds`` in turn (``pace`` tests per round); what each one ran.
    Holds that no worker holds more than :data:`BUFFER_S` of work (three tests at least) and a unit."""
    ran: dict[str, list[str]] = {worker.gateway.id: [] for worker in workers}
    while sched.workqueue or any(worker.pending for worker in workers):
        progressed = False
        for worker in workers:
            for _ in range(pace[worker.gateway.id]):
                if not worker.pending:
                    break
                index = worker.pending.pop(0)
                ran[worker.gateway.id].append(COLLECTION[index])
                sched.mark_test_complete(worker, index, seconds)
                progressed = True
                assert len(worker.pending) <= max(3, BUFFER_S / seconds) + len(GROUPED), len(worker.pending)
        assert progressed, "a worker waits with nothing sent"
    assert sched.tests_finished and not sched.has_pending
    return ran


def started() -> tuple[Any, list[Worker]]:
    sched = scheduler()
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, COLLECTION)
    sched.schedule()
    return sched, workers


def test_every_test_runs_once_and_a_grouped_module_on_one_worker() -> None:
    sched, workers = started()
    ran = run(sched, workers, {"gw0": 3, "gw1": 1})
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(COLLECTION)
    assert set(GROUPED) <= set(ran["gw0"]) or set(GROUPED) <= set(ran["gw1"])
    assert len(ran["gw0"]) > 2 * len(ran["gw1"])  # the faster worker ran more: the load follows the pace
    assert all(worker.shutting_down for worker in workers)


def test_quick_tests_go_in_chunks_not_one_per_report() -> None:
    sched, workers = started()
    run(sched, workers, {"gw0": 1, "gw1": 1}, seconds=0.01)
    messages = sum(len(worker.sent) for worker in workers)
    assert messages < len(COLLECTION) // 10, messages


def test_tests_that_take_seconds_go_two_or_three_at_a_time() -> None:
    """The whole suite starts with its slow tests: a worker that held a chunk of them would run them
    one after another while the other had nothing left."""
    sched, workers = started()
    ran = run(sched, workers, {"gw0": 1, "gw1": 1}, seconds=3.0)
    assert sorted(ran["gw0"] + ran["gw1"]) == sorted(COLLECTION)


def sweep(markexpr: str) -> Any:
    """A pretend metafunc of a sweep over three cases, the middle one slow, as pytest made them."""
    case = lambda name, *marks: types.SimpleNamespace(id=name, marks=list(marks))  # noqa: E731
    calls = [case("quick-a"), case("slow-b", pytest.mark.slow.mark), case("quick-c")]
    return types.SimpleNamespace(
        config=types.SimpleNamespace(option=types.SimpleNamespace(markexpr=markexpr)), _calls=calls
    )


def test_the_quick_loop_makes_no_test_of_a_slow_case_and_keeps_the_others_ids() -> None:
    metafunc = sweep("not slow")
    conftest.pytest_generate_tests(metafunc)
    assert [call.id for call in metafunc._calls] == ["quick-a", "quick-c"]
    for markexpr in ("", "slow", "not gpu"):  # any other selection makes every case, for -m to judge
        metafunc = sweep(markexpr)
        conftest.pytest_generate_tests(metafunc)
        assert [call.id for call in metafunc._calls] == ["quick-a", "slow-b", "quick-c"]
    metafunc = sweep("not slow")
    metafunc._calls = metafunc._calls[1:2]  # every case slow: left for -m, not turned into one bare test
    conftest.pytest_generate_tests(metafunc)
    assert [call.id for call in metafunc._calls] == ["slow-b"]
