"""What `gpudiag top` costs at rest: the share of one core it takes between refreshes.

`gpudiag --replay h100x8-training-64procs top` (8 GPUs, 64 processes) runs on a pseudo-terminal of
SIZE, as a person runs it, at the default refresh (2 s) or ``--interval``; after WARMUP seconds (start-up
and the first screens left out) its CPU time (user + system, from /proc) is read over WINDOW seconds.
Target: ≤ 2 % of a core at the default refresh. Then it is sent `q` and must exit 0.

Usage: python benchmarks/bench_top.py [--window 30] [--warmup 5] [--interval 2] [--size 80x30] [--runs 3]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import platform
import pty
import select
import struct
import sys
import termios
import time
from pathlib import Path

TARGET_PERCENT = 2.0
EXAMPLE = "h100x8-training-64procs"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def drain(fd: int, seconds: float) -> None:
    """Read what the app draws (a terminal that is not read blocks the writer)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


def one_run(interval: float | None, columns: int, lines: int, warmup: float, window: float) -> float:
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines)})
        extra = [] if interval is None else ["--interval", str(interval)]
        os.execv(sys.executable, [sys.executable, "-m", "gpudiag", "--replay", EXAMPLE, "top", *extra])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    drain(fd, warmup)
    before, t0 = cpu_seconds(pid), time.monotonic()
    drain(fd, window)
    used, elapsed = cpu_seconds(pid) - before, time.monotonic() - t0
    os.write(fd, b"q")
    drain(fd, 3)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"gpudiag top exited {code} on q")
    return 100.0 * used / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--interval", type=float, default=None, help="default: top's own (2 s)")
    parser.add_argument("--size", default="80x30")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    columns, lines = (int(v) for v in args.size.split("x"))
    print(f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; {EXAMPLE}, {args.size}")
    shares = [one_run(args.interval, columns, lines, args.warmup, args.window) for _ in range(args.runs)]
    worst = max(shares)
    refresh = "default refresh" if args.interval is None else f"--interval {args.interval:g}"
    print(
        f"gpudiag top, {refresh}: "
        + ", ".join(f"{s:.2f}%" for s in shares)
        + f" of a core (target ≤ {TARGET_PERCENT}%)"
    )
    return 0 if args.interval is not None or worst <= TARGET_PERCENT else 1


if __name__ == "__main__":
    raise SystemExit(main())
