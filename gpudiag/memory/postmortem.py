"""OOM post-mortems (``gpudiag.oom/1``), read back: ``gpudiag memory --postmortem FILE``.

The tracker writes the in-process part at the OOM (:mod:`gpudiag.track.oom`); its publisher then
adds the whole machine as ``gpudiag memory --json`` shows it (:mod:`gpudiag.oom_machine`, a program
it runs). :func:`load` reads a report, :func:`write_torch_snapshot` takes PyTorch's snapshot out.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.files import read_input, write_atomic
from gpudiag.track.oom import SCHEMA


def load(path: Path) -> dict[str, Any]:
    """A post-mortem file, or a usage error that says why it is not one."""
    raw = read_input(path, "--postmortem")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"--postmortem {path}: not JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"--postmortem {path}: JSON nested too deeply to be a post-mortem") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"--postmortem {path}: schema is {found!r}; gpudiag.track writes {SCHEMA!r}")
    return data


def write_torch_snapshot(doc: dict[str, Any], out: Path) -> bool:
    """PyTorch's own snapshot from the report, pickled as ``torch.cuda.memory._dump_snapshot`` writes it
    (what pytorch.org/memory_viz and ``torch/cuda/_memory_viz.py`` open). False if none was recorded."""
    snap = doc.get("torch_snapshot")
    if not isinstance(snap, dict):
        return False
    write_atomic(out, pickle.dumps(snap))
    return True
