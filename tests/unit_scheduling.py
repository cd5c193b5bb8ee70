"""The scheduler ``--dist loadgroup`` gets (tests/conftest.py): xdist's loadscope over the suite's
work units, a worker holding about half a second of work.

Most units are one test. xdist's loadscope sends one unit per finished test and keeps two or three in
flight: in the quick loop (~10 ms a test) a worker then waits on the main process, busy on the same
two cores, after nearly every test; and loadscope counts what is in flight by walking every unit a
worker ever ran, at every report. Here a worker is sent, in one message, as many units as its recent
tests say make :data:`BUFFER_S` of work (never more than half its share of what is left), and
finished units leave the count. Tests that take seconds (the whole suite starts with them) still go
two or three at a time, so that none waits behind another on a busy worker at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdist.scheduler import LoadScopeScheduling

BUFFER_S = 0.5  # the work a worker holds: enough to hide the main process's answer, little to wait on at the end


class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
    def __init__(self, config: Any, log: Any, split: Callable[[str], str]) -> None:
        super().__init__(config, log)
        self._split = split
        self._index: dict[Any, dict[str, int]] = {}  # per worker: node id -> its index there
        self._in_flight: dict[Any, int] = {}  # per worker: tests sent and not yet reported
        self._queued: int | None = None  # tests in units not yet sent to any worker
        self._pace: dict[Any, float] = {}  # per worker: seconds a test, recently (a moving average)

    def _split_scope(self, nodeid: str) -> str:
        return self._split(nodeid)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        super().add_node_collection(node, collection)
        self._index[node] = {nodeid: index for index, nodeid in enumerate(collection)}

    def _assign_work_unit(self, node: Any) -> None:
        node.send_runtest_some(self._take_unit(node))

    def _take_unit(self, node: Any) -> list[int]:
        """The next unit, as the worker's indexes of its tests, counted as in flight there."""
        if self._queued is None:
            self._queued = sum(len(unit) for unit in self.workqueue.values())
        scope, unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = unit
        index = self._index[node]
        indexes = [index[nodeid] for nodeid, completed in unit.items() if not completed]
        self._queued -= len(indexes)
        self._in_flight[node] = self._in_flight.get(node, 0) + len(indexes)
        return indexes

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        nodeid = self.registered_collections[node][item_index]
        scope = self._split_scope(nodeid)
        workload = self.assigned_work[node]
        workload[scope][nodeid] = True
        self._in_flight[node] -= 1
        pace = self._pace.get(node)
        self._pace[node] = duration if pace is None else 0.7 * pace + 0.3 * duration
        if all(workload[scope].values()):
            del workload[scope]  # done: loadscope's counts and a crashed worker's requeue skip it
        self._reschedule(node)

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        target = self._target(node)
        if self._in_flight.get(node, 0) > max(2, target // 2):
            return
        chunk: list[int] = []
        while self.workqueue and self._in_flight.get(node, 0) < max(3, target):
            chunk += self._take_unit(node)
        node.send_runtest_some(chunk)  # one message

    def _target(self, node: Any) -> int:
        """How many tests this worker should hold: :data:`BUFFER_S` of them at its recent pace."""
        pace = self._pace.get(node)
        if pace is None:
            return 2  # nothing reported yet: loadscope's two
        share = (self._queued or 0) // max(len(self.assigned_work), 1)
        return max(2, min(share // 2, int(BUFFER_S / max(pace, 0.001))))

    def remove_node(self, node: Any) -> str | None:
        unsent = sum(not completed for unit in self.assigned_work.get(node, {}).values() for completed in unit.values())
        self._in_flight.pop(node, None)
        crashed = super().remove_node(node)
        if crashed is not None and self._queued is not None:
            self._queued += unsent  # the crashed worker's units are queued again
        return crashed
