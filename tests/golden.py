"""Golden files: expected output kept under tests/golden/, compared byte for byte.

After a deliberate change of output, rewrite them by running the tests with GPUDIAG_UPDATE_GOLDEN
set (``GPUDIAG_UPDATE_GOLDEN=1 python -m pytest -n 2 -m "not slow"``), then review
``git diff tests/golden/``: never keep a change you cannot explain.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
UPDATE_ENV = "GPUDIAG_UPDATE_GOLDEN"


def command_output(code: int, out: str, err: str) -> str:
    """A command's exit status and both streams, as the golden files of commands hold them."""
    return f"exit={code}\n--- stdout\n{out}--- stderr\n{err}"


def assert_matches_golden(path: Path, text: str) -> None:
    """``text`` is what ``path`` holds; with GPUDIAG_UPDATE_GOLDEN set, ``path`` is rewritten first."""
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    assert path.exists(), f"no golden file {shown}: run with {UPDATE_ENV}=1 and review it"
    assert text == path.read_text(), f"not what {shown} holds (a deliberate change? {UPDATE_ENV}=1, review the diff)"
