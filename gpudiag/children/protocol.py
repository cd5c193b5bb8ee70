"""The line protocol between gpudiag and its children: markers, stages, emit, parse.

Standard library only, and importable both as ``gpudiag.children.protocol`` (by the parent)
and as the top-level ``protocol`` (by a child run by path, whose directory is ``sys.path[0]``).
A child prints ordinary lines and marked lines; the parent reads them as they come:

- ``RESULT {json}``: the child's final answer (one object; the last one counts);
- ``STAGE {json}``: how far the torch probe got (``{"stage": name, **facts}``);
- ``START idx uuid`` / ``LOADED idx uuid`` / ``GPU {json}`` / ``NO_CUDA why``: the functional test;
- ``EVENT {json}``: the benchmark's events;
- ``DIAG {json}``: the deep diagnostics' events (``{"kind": ..., ...}``, see ``diag``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

RESULT = "@@GPUDIAG_RESULT@@"
STAGE = "@@GPUDIAG_STAGE@@"
START = "@@GPUDIAG_START@@"
LOADED = "@@GPUDIAG_LOADED@@"
GPU = "@@GPUDIAG_GPU@@"
NO_CUDA = "@@GPUDIAG_NO_CUDA@@"
EVENT = "@@GPUDIAG_BENCH@@"
DIAG = "@@GPUDIAG_DIAG@@"

# The torch probe's stages, in order.
IMPORTING, IMPORTED, LIBRARIES, CUDA_INIT, RUNTIME = "importing", "imported", "libraries", "cuda_init", "runtime"


def exit_now(code: int = 0) -> None:
    """End a child that has said everything, skipping the interpreter's teardown: with torch
    loaded that teardown takes ~0.4 s (CPU torch 2.13 here), which the parent would wait for."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # the parent went away: nothing to tell
            stream.flush()
    os._exit(code)


def write(marker: str, text: str) -> None:
    """One marked line, flushed at once so the parent sees it even if the child then hangs."""
    sys.stdout.write(marker + text + "\n")
    sys.stdout.flush()


def emit(obj: dict[str, Any]) -> None:
    """The child's final answer."""
    write(RESULT, json.dumps(obj))


def stage(name: str, **facts: Any) -> None:
    write(STAGE, json.dumps({"stage": name, **facts}))


def say(marker: str, *parts: object) -> None:
    """A marker followed by space-separated words (``START 0 GPU-…``)."""
    write(marker, "".join(" " + str(p) for p in parts))


def first_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, for one-line reports."""
    text = str(exc).strip()
    line = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
    return line[:limit]


def payload(line: str, marker: str) -> dict[str, Any] | None:
    """The JSON object after ``marker`` on this line, or None (another line, or not an object)."""
    if not line.startswith(marker):
        return None
    try:
        value = json.loads(line[len(marker) :])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def words(line: str, marker: str) -> str | None:
    """The text after ``marker`` and its space, or None when the line is not this marker's."""
    head, _, rest = line.partition(" ")
    return rest if head == marker else None


def result(stdout: str) -> dict[str, Any] | None:
    """The last ``RESULT`` object in the child's output."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT):
            return payload(line, RESULT)
    return None
