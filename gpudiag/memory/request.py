"""What `gpudiag memory` was asked for, checked: files to read (``--postmortem``, ``--plot``), one
sample, or a watch and the conditions that end it. Every usage error is raised here, before the
machine is read."""

from __future__ import annotations

from pathlib import Path

import msgspec

from gpudiag.errors import UsageError
from gpudiag.memory.loop import WatchOptions
from gpudiag.selection import GpuSelection, parse_selection
from gpudiag.units import duration, interval, seconds, size


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag memory`, as given (see the command for what each one means)."""

    watch: bool = False
    interval: float = 1.0
    count: int | None = None
    ids: str | None = None
    json_output: bool = False
    log: Path | None = None
    until_free: str | None = None
    timeout: float | None = None
    alert_free_below: str | None = None
    alert_oom_within: str | None = None
    postmortem: Path | None = None
    torch_snapshot: Path | None = None
    plot: Path | None = None
    output: Path | None = None
    prometheus: int | None = None
    bind: str = "127.0.0.1"
    textfile: Path | None = None

    @property
    def offline(self) -> bool:
        """``--postmortem`` and ``--plot`` read files, not the machine."""
        return any(v is not None for v in (self.postmortem, self.plot, self.torch_snapshot, self.output))


def check_offline(r: Request) -> None:
    """The options that go with ``--postmortem`` or ``--plot``, or a usage error."""
    if (r.postmortem is None) == (r.plot is None):
        raise UsageError(
            "--postmortem FILE or --plot LOG (one of them; --torch-snapshot goes with the first, "
            "--output with the second)"
        )
    if r.postmortem is not None and r.output is not None:
        raise UsageError("--output goes with --plot")
    if r.plot is not None and r.torch_snapshot is not None:
        raise UsageError("--torch-snapshot goes with --postmortem")


class Prepared(msgspec.Struct, frozen=True):
    """What a sample or a watch of the machine was asked, parsed."""

    watch: WatchOptions | None  # None: one sample
    gpus: GpuSelection | None  # the GPUs --id names; None: every GPU


def prepare(r: Request) -> Prepared:
    """The sample or watch the options ask for, and its GPUs; or a usage error."""
    interval(r.interval, "--interval")
    seconds(r.timeout, "--timeout")
    if r.count is not None and r.count < 1:
        raise UsageError("--count must be 1 or more")
    gpus = parse_selection(r.ids)  # the same rule as `list --id`: '' or '0,,1' is a usage error
    if r.prometheus is not None and not 0 < r.prometheus < 65536:
        raise UsageError(f"--prometheus {r.prometheus}: not a TCP port")
    if r.log is not None and r.log.suffix.lower() not in (".csv", ".jsonl"):
        raise UsageError(f"--log {r.log}: use a .csv or .jsonl file name")
    if r.timeout is not None and r.until_free is None:
        raise UsageError("--timeout goes with --until-free")
    options = WatchOptions(
        interval=r.interval,
        count=r.count,
        until_free=size(r.until_free, "--until-free"),
        timeout=r.timeout,
        alert_free_below=size(r.alert_free_below, "--alert-free-below"),
        alert_oom_within=duration(r.alert_oom_within, "--alert-oom-within"),
    )
    looping = r.watch or any(
        v is not None for v in (r.count, r.until_free, r.alert_free_below, r.alert_oom_within, r.log, r.prometheus)
    )
    if r.textfile is not None and looping:
        raise UsageError("--textfile writes one sample (for cron, Prolog, Epilog); serve a watch with --prometheus")
    return Prepared(options if looping else None, gpus)
