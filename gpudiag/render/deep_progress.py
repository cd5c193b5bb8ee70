"""`check --level 2-4`'s progress on a terminal: one line for the phase of the deep tests running,
on stderr.

Nothing at all when stderr is not a terminal (logs, pipes, schedulers), and gone once the run ends
(transient), so that the checklist or the JSON on stdout is all that stays.
"""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gpudiag.checks.deep.progress import Progress as DeepProgress


class TerminalProgress(DeepProgress):
    """A rich progress display driven by the deep run's phases; a context manager that ends it."""

    def __init__(self, console: Any) -> None:
        self._display = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}", style="dim"),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # nothing, not even a blank line, into logs and pipes
        )
        self._task: TaskID | None = None
        self._started = False

    def phase(self, name: str, total: float | None = None) -> None:
        if not self._started:
            self._display.start()
            self._started = True
        if self._task is not None:
            self._display.remove_task(self._task)
        self._task = self._display.add_task(name, total=total, detail="")

    def update(self, completed: float, detail: str = "") -> None:
        if self._task is not None:
            self._display.update(self._task, completed=completed, detail=detail[:60])

    def done(self) -> None:
        if self._started:
            self._display.stop()
            self._started = False

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()
