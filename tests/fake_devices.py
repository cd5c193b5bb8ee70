"""CPU stand-ins for the deep diagnostics' children (check --level 2-4), for machines without a GPU.

The children run by path exactly as on a GPU node, with ``device_type="cpu"`` and small sizes
(:data:`CPU`); a ``sitecustomize`` (:data:`FAULTS`, put on ``PYTHONPATH`` by :func:`install`) stands
in for a bad device: it wraps the children's own ``diag.sync`` and ``patterns.Tester`` so that the
device named by ``FAKE_DIAG_BAD`` is slow, hangs, crashes, raises, or has a data bit stuck at 0
(``FAKE_DIAG_MODES``: a mode for each of several devices, so that one child serves several claims).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpudiag.probe.child import CHILDREN

CPU_MEMTEST = {"device_type": "cpu", "devices": 2, "cpu_bytes": 1 << 18, "reserve_bytes": 0, "chunk_bytes": 1 << 16}
CPU_MEMTEST["block_words"] = 4096
CPU_STRESS = {"device_type": "cpu", "devices": 2, "seconds": 1.0, "n": 96, "dtype": "float32"}
CPU_STRESS |= {"window_seconds": 0.1, "check_every": 3}
CPU_ALLREDUCE = {"backend": "gloo", "device_type": "cpu", "ranks": 2, "sizes": [4096, 65536], "warmup": 1, "iters": 2}
CPU = {"memtest": CPU_MEMTEST, "stress": CPU_STRESS, "allreduce": CPU_ALLREDUCE}

FAULTS = f"""
import json, os, sys, threading, time
if os.environ.get("FAKE_DIAG_MODE"):
    sys.path.insert(0, {str(CHILDREN)!r})
    import diag, patterns
    MODE = os.environ["FAKE_DIAG_MODE"]
    BAD = int(os.environ.get("FAKE_DIAG_BAD", "-1"))
    MODES = {{int(k): v for k, v in json.loads(os.environ.get("FAKE_DIAG_MODES", "{{}}")).items()}} or {{BAD: MODE}}
    DELAY = float(os.environ.get("FAKE_DIAG_DELAY", "0"))
    BEGUN = time.monotonic()

    def _mode():
        name = threading.current_thread().name
        return MODES.get(int(name.rsplit("-", 1)[1])) if name.startswith("gpudiag-device-") else None

    _sync = diag.sync

    def sync(torch, dev, index):
        _sync(torch, dev, index)
        mode = MODES.get(index)
        if mode is None or time.monotonic() - BEGUN < DELAY:
            return
        if mode == "slow":
            time.sleep(0.05)
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "crash":
            os.abort()
        elif mode == "raise":
            raise RuntimeError("CUDA error: an illegal memory access was encountered\\nmore")

    diag.sync = sync
    _sweep = patterns.Tester._sweep

    def sweep(self, descending, check, write, found):
        _sweep(self, descending, check, write, found)
        if _mode() == "stuck" and write is not None:
            self.chunks[0][5] &= ~(1 << 7)  # bit 7 of one word stuck at 0

    patterns.Tester._sweep = sweep
"""


def install(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    bad: int = 1,
    delay: float = 0.0,
    modes: dict[int, str] | None = None,
) -> None:
    """Make device ``bad`` of every deep child started from now on misbehave as ``mode`` (or each
    device of ``modes`` as its mode)."""
    (tmp_path / "sitecustomize.py").write_text(FAULTS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_DIAG_MODE", mode)
    monkeypatch.setenv("FAKE_DIAG_BAD", str(bad))
    monkeypatch.setenv("FAKE_DIAG_MODES", json.dumps(modes or {}))
    monkeypatch.setenv("FAKE_DIAG_DELAY", str(delay))


def settings(phase: str, **changes: Any) -> dict[str, Any]:
    return {**CPU[phase], **changes}
