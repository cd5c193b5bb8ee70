"""``python -m gpudiag.track script.py [args…]``: run a script with the tracker on, like cProfile."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import gpudiag.track


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m gpudiag.track SCRIPT [ARGS...]   (or: -m MODULE [ARGS...])", file=sys.stderr)
        return 2
    module = argv[1] if argv[0] == "-m" and len(argv) > 1 else None
    sys.argv = argv[1:] if module else argv  # what the program expects, and what the entry shows
    if not gpudiag.track.start():
        print("gpudiag.track: cannot use a private runtime directory; running without tracking", file=sys.stderr)
    if module:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, str(Path(argv[0]).resolve().parent))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
