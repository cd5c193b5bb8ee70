"""`bench-transfer`'s progress on a terminal: which copy is running, how many of the tasks are done.

Nothing at all when stderr is not a terminal (logs, pipes), and gone once the run ends (transient).
"""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpudiag.bench.plan import Task


class BenchProgress:
    """A context manager around rich's progress bar, fed by the benchmark child's events."""

    def __init__(self, console: Any) -> None:
        self._display = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # nothing, not even a blank line, into logs and pipes
        )
        self._bar = self._display.add_task("starting torch and CUDA in a child process", total=None)

    def tasks(self, planned: list[Task]) -> None:
        self._display.update(self._bar, total=len(planned), completed=0)

    def start(self, task: Task) -> None:
        self._display.update(self._bar, description=task.label(), completed=task.index)

    def __enter__(self) -> BenchProgress:
        self._display.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._display.stop()
