"""The machine's view an OOM post-mortem adds: ``python -m gpudiag.oom_machine``, run by the tracker.

The tracker (:mod:`gpudiag.track`) runs inside the training process and imports the standard
library only; at an OOM it runs this program with its own entry of that moment as JSON on stdin
(``null`` for none), and this program prints the whole machine as ``gpudiag memory --json`` shows
it, as one JSON document: NVML's reading (or the replay named by ``GPUDIAG_REPLAY``) with the
tracker's entries. What cannot be read is said in the document (``{"unavailable": why}``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def machine_document(own: dict[str, Any] | None = None) -> dict[str, Any]:
    """This machine now (or the replay named by GPUDIAG_REPLAY), as a ``gpudiag.memory/2`` document.

    ``own``: the calling process's tracker entry of this moment, in place of its last publication."""
    from gpudiag.memory.build import build
    from gpudiag.memory.tracked import tracked_entries
    from gpudiag.memory.view import GROUPS
    from gpudiag.model import NvmlStatus
    from gpudiag.render.memory_view import to_json
    from gpudiag.sources import open_source
    from gpudiag.track.entries import parse_entry

    replay = os.environ.get("GPUDIAG_REPLAY") or None
    with open_source(replay, facts=GROUPS) as source:
        machine = source.read()
    if machine.nvml.status is not NvmlStatus.OK:
        return {"unavailable": machine.nvml.detail}
    tracked = tracked_entries(replay is not None)
    fresh: frozenset[int] = frozenset()
    if own is not None:
        entry = parse_entry(own)
        if entry is not None:
            tracked[entry.pid] = entry
            fresh = frozenset({entry.pid})
    view = build(machine, tracked, same_moment=fresh)
    return to_json(view, time.time())


def main() -> None:
    try:
        own = json.loads(sys.stdin.read() or "null")
        document = machine_document(own if isinstance(own, dict) else None)
    except Exception as exc:  # no NVML in this container, a driver problem: the report says why
        document = {"unavailable": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(document))


if __name__ == "__main__":
    main()
