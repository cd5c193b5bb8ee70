"""OOM post-mortems (``gpudiag.oom/1``): the machine's view the tracker adds, and reading one back.

The tracker writes the in-process part at the OOM (:mod:`gpudiag.track.oom`); its publisher then
asks :func:`machine_document` for the whole machine as ``gpudiag memory --json`` shows it. The
command ``gpudiag memory --postmortem FILE`` reads a report with :func:`load`.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.files import read_input, write_atomic
from gpudiag.track.oom import SCHEMA


def machine_document(own: dict[str, Any] | None = None) -> dict[str, Any]:
    """This machine now (or the replay named by GPUDIAG_REPLAY), as a ``gpudiag.memory/2`` document.

    ``own``: the calling process's tracker entry of this moment, in place of its last publication."""
    from gpudiag.memory.build import build
    from gpudiag.memory.tracked import tracked_entries
    from gpudiag.memory.view import GROUPS
    from gpudiag.model import NvmlStatus
    from gpudiag.probe.collect import open_source
    from gpudiag.render.memory_view import to_json

    replay = os.environ.get("GPUDIAG_REPLAY") or None
    with open_source(replay, facts=GROUPS) as source:
        machine = source.read()
    if machine.nvml.status is not NvmlStatus.OK:
        return {"unavailable": machine.nvml.detail}
    tracked = tracked_entries(replay is not None)
    fresh: frozenset[int] = frozenset()
    if own is not None:
        from gpudiag.track.entries import parse_entry

        entry = parse_entry(own)
        if entry is not None:
            tracked[entry.pid] = entry
            fresh = frozenset({entry.pid})
    view = build(machine, tracked, same_moment=fresh)
    return to_json(view, time.time())


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
