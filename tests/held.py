"""gpudiag held at a named point until a signal comes, so that a test signals it exactly there.

``HOLD_AT=POINT HELD=FILE python tests/held.py GPUDIAG-ARGS...`` runs gpudiag's entry point; at
``POINT`` it creates ``FILE`` and waits for a signal (whatever the signal's handler does ends the wait):

- ``imports``: while the CLI is imported (typer), the start-up handlers of gpudiag.edge set;
- ``command``: the command's first line, inside gpudiag.cli.common.handle_errors (its handlers set);
- ``answered``: after the answer is out and its exit code decided (gpudiag.edge.answered).

Nothing of this is in gpudiag: this wrapper patches the seams, as tests/paused_writes.py does, so
the test reaches its moment on a fast machine or a loaded one, never by a guessed delay.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

from gpudiag import edge

POINTS = ("imports", "command", "answered")


def hold() -> None:
    Path(os.environ["HELD"]).touch()
    while True:
        time.sleep(60)


class _OnImport(importlib.abc.MetaPathFinder):
    """Holds when ``typer`` is first imported; after ``gpudiag.cli.common`` is imported, makes its
    ``handle_errors`` hold at the start of every command it wraps."""

    def __init__(self, point: str) -> None:
        self.point = point

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if self.point == "imports" and name == "typer":
            sys.meta_path.remove(self)
            hold()
        if self.point == "command" and name == "gpudiag.cli.common":
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.loader is not None
            real_exec = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                real_exec(module)
                wrap = module.handle_errors

                def handle_errors(fn: Any) -> Any:
                    @functools.wraps(fn)
                    def held(*args: Any, **kwargs: Any) -> Any:
                        hold()
                        return fn(*args, **kwargs)  # pragma: no cover - a signal ends the hold

                    return wrap(held)

                module.handle_errors = handle_errors

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec
        return None


def _hold_once_answered() -> None:
    real = edge.answered

    def answered() -> None:
        real()
        hold()

    edge.answered = answered


if __name__ == "__main__":
    point = os.environ.get("HOLD_AT", "")
    if point not in ("", *POINTS):
        raise SystemExit(f"HOLD_AT: one of {', '.join(POINTS)}")
    if point == "answered":
        _hold_once_answered()
    elif point:
        sys.meta_path.insert(0, _OnImport(point))
    sys.argv[0] = "gpudiag"
    from gpudiag.entry import main

    main()
