"""The sampling loop `dmon` and `pmon` share: one source, a sample every ``--delay`` seconds, on a
replay its recorded series (gpudiag.replay.series) sample by sample, lines out as they come (to stdout,
or appended whole to ``--filename``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from gpudiag.cli import plain
from gpudiag.cli.smi_views import Opened, say
from gpudiag.errors import UsageError
from gpudiag.model import Gpu, GpuState
from gpudiag.pacing import repeat
from gpudiag.render import smi_errors
from gpudiag.render.dmon_view import Layout
from gpudiag.units import interval


def check_options(count: int | None, delay: float) -> None:
    if count is not None and count < 1:
        raise UsageError("--count must be at least 1")
    interval(delay, "--delay")  # nvidia-smi takes whole seconds from 1; gpudiag tenths too


def parse_letters(value: str, allowed: str, option: str) -> str:
    bad = [c for c in value if c not in allowed]
    if bad:
        raise UsageError(f"{option} {value!r}: unknown letter {bad[0]!r}; use {', '.join(allowed)}")
    return value


def parse_format(value: str | None) -> tuple[bool, bool, bool]:
    """``--format csv,noheader,nounit`` (any of them): (csv, header, units)."""
    words = [w.strip() for w in (value or "").split(",") if w.strip()]
    unknown = [w for w in words if w not in ("csv", "noheader", "nounit")]
    if unknown:
        raise UsageError(f"--format {value!r}: unknown {unknown[0]!r}; use csv, noheader, nounit")
    return "csv" in words, "noheader" not in words, "nounit" not in words


def line_layout(options: str, output_format: str | None, json_output: bool) -> Layout:
    """``-o`` and ``--format`` as the lines' layout (render.dmon_view.Layout, which pmon shares); neither
    goes with ``--json``."""
    letters = parse_letters(options, "DT", "--options")
    csv, header, units = parse_format(output_format)
    if json_output and (options or output_format):
        raise UsageError("--json goes without --options and --format")
    return Layout(date="D" in letters, time="T" in letters, csv=csv, header=header, units=units)


class Output:
    """Where the lines go: stdout, or a log file that grows a whole sample at a time (files.AppendLog)."""

    def __init__(self, filename: Path | None) -> None:
        self._log = None
        if filename is not None:
            from gpudiag.files import AppendLog

            self._log = AppendLog(filename)

    def write(self, lines: list[str]) -> None:
        if not lines:
            return
        text = "".join(line + "\n" for line in lines)
        if self._log is None:
            plain.echo(text, nl=False)  # outside text (process names) cannot reach the terminal as a control
        else:
            from gpudiag.render.printable import guard

            self._log.append(guard(text))

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


Step = Callable[[int, float, float], None]  # (sample number, when it was taken, a clock for rates)


def run(opened: Opened, step: Step, delay: float, count: int | None) -> None:
    """Call ``step`` once per sample: ``count`` times (until Ctrl-C without it); a replay plays its
    series once through (a snapshot without one is one sample), and says so on stderr if ``count``
    asked for more."""
    source = opened.source
    recorded = source.play()
    total = count if not recorded else min(count or recorded, recorded)

    def sample(n: int) -> None:
        if recorded and n:
            source.seek(n)
        at = source.sample_time()
        step(n, at, at if recorded else time.monotonic())

    taken = repeat(sample, delay, total, time.monotonic, time.sleep)  # a signal goes through: 128+N
    if recorded and count is not None and count > taken:
        kind = "series" if source.series is not None else "snapshot (no series recorded beside it)"
        say(f"{source.name}: its {kind} holds {taken} sample(s), all shown")


def lost(gpu: Gpu, said: set[int]) -> Gpu:
    """A GPU that stopped answering mid-run: nvidia-smi's line for it, once; the GPU, marked lost."""
    from msgspec.structs import replace

    gone = replace(gpu, state=GpuState.LOST)
    if gpu.index not in said:
        said.add(gpu.index)
        say(smi_errors.unusable_gpu(gone))
    return gone


def exit_code(opened: Opened, gone: list[Gpu]) -> None:
    from gpudiag.cli.smi_views import finish

    finish(opened, gone)
    raise SystemExit(0)
