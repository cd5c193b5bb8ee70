"""Run another NVML program against a replayed machine: the fake installed as pynvml's library.

``python -m gpudiag.replay NAME|FILE -m MODULE [ARGS...]`` (or ``SCRIPT [ARGS...]``) loads the
replay's fake NVML library into the real ``pynvml`` module (nvidia-ml-py) before the program runs,
so a tool such as gpustat or nvitop reads the example machine unmodified, through pynvml's own
wrappers. No sitecustomize, no environment variable: the program runs in this interpreter, as
``python -m`` would run it; pynvml's own library state is put back when it ends.
"""

from __future__ import annotations

import importlib.util
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.replay import fixtures
from gpudiag.replay.c_boundary import installed
from gpudiag.replay.fake_nvml import FakeNvml

USAGE = "usage: python -m gpudiag.replay NAME|FILE (-m MODULE | SCRIPT) [ARGS...]"


def fake_for(spec: str) -> FakeNvml:
    """The fake NVML of this example machine or snapshot file (its ``library`` is what pynvml loads)."""
    machine, _ = fixtures.load(spec)
    return FakeNvml(machine)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] in ("-h", "--help") or (args[1] == "-m" and len(args) < 3):
        print(USAGE, file=sys.stderr)
        return int(ExitCode.OK if args[:1] in (["-h"], ["--help"]) else ExitCode.USAGE)
    try:
        fake = fake_for(args[0])
    except UsageError as exc:
        print(f"gpudiag.replay: {exc}", file=sys.stderr)
        return int(exc.code)
    if args[1] == "-m" and importlib.util.find_spec(args[2]) is None:
        print(f"gpudiag.replay: no module named {args[2]!r}", file=sys.stderr)
        return int(ExitCode.USAGE)
    if args[1] != "-m" and not Path(args[1]).is_file():
        print(f"gpudiag.replay: no such script: {args[1]}", file=sys.stderr)
        return int(ExitCode.USAGE)
    argv = sys.argv
    try:
        with installed(fake.library):
            if args[1] == "-m":
                sys.argv = [args[2], *args[3:]]
                runpy.run_module(args[2], run_name="__main__", alter_sys=True)
            else:
                sys.argv = args[1:]
                runpy.run_path(args[1], run_name="__main__")
    finally:
        sys.argv = argv
    return 0
