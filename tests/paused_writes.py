"""gpudiag with its file writes paused half-way, so that a test can send a signal mid-write.

``python tests/paused_writes.py GPUDIAG-ARGS...`` runs gpudiag's entry point with
:func:`gpudiag.files._write_all` (which every file gpudiag writes goes through) writing half
of its bytes on call number ``$PAUSE_AT`` (default 1), creating the file ``$PAUSED`` and
sleeping: the test waits for that file, then signals the process.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gpudiag import files
from gpudiag.entry import main

_real_write_all = files._write_all
_calls = [0]


def _paused_write_all(fd: int, payload: bytes) -> None:
    _calls[0] += 1
    if _calls[0] != int(os.environ.get("PAUSE_AT", "1")):
        _real_write_all(fd, payload)
        return
    _real_write_all(fd, payload[: len(payload) // 2])
    Path(os.environ["PAUSED"]).touch()
    time.sleep(30)
    _real_write_all(fd, payload[len(payload) // 2 :])


if __name__ == "__main__":
    files._write_all = _paused_write_all
    sys.argv[0] = "gpudiag"
    main()
