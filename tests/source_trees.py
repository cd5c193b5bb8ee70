"""gpudiag's modules as syntax trees, parsed once per process: the layer rules (tests/test_layers.py)
and the size limits (tests/test_sizes.py) read every module, and parsing them all costs ~1 CPU-s.
The two modules are one work unit (tests/conftest.py), so one worker parses them once."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpudiag"


@functools.cache
def tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule that reads it."""
    return ast.parse(path.read_text(), str(path))
