"""``python -m gpudiag.track [--interval S] script.py [args…]`` (or ``-m module``): run with the tracker on.

Like ``python -m cProfile``: the program sees its own ``sys.argv`` and ``__name__ == "__main__"``,
its exceptions and exit status are its own, and the tracker's entry is removed when it ends.
"""

from __future__ import annotations

import os
import runpy
import sys

import gpudiag.track
from gpudiag.track.entries import DEFAULT_INTERVAL_S

USAGE = "usage: python -m gpudiag.track [--interval SECONDS] SCRIPT [ARGS...]  |  ... -m MODULE [ARGS...]"


def main(argv: list[str]) -> int:
    interval = DEFAULT_INTERVAL_S
    if argv[:1] == ["--interval"] and len(argv) > 1:
        try:
            interval = float(argv[1])
        except ValueError:
            interval = float("nan")
        if not interval > 0 or interval == float("inf"):
            print(f"gpudiag.track: --interval {argv[1]}: must be a positive number of seconds", file=sys.stderr)
            return 2
        argv = argv[2:]
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    module = argv[1] if argv[0] == "-m" else None
    if module is None and not os.path.isfile(argv[0]):
        print(f"gpudiag.track: can't open file {argv[0]!r}: no such file", file=sys.stderr)
        return 2
    if not gpudiag.track.start(interval):
        print("gpudiag.track: no private runtime directory; running without tracking", file=sys.stderr)
    if module is not None:
        sys.argv = argv[1:]  # run_module replaces argv[0] with the module's file, as `python -m` does
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python script.py` sets it
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
