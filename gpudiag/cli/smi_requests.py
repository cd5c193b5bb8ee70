"""What the nvidia-smi views (`stat`, `topo`, `nvlink`, `mig`, `dmon`, `pmon`) were asked: each view's options as a
Request (the Struct its Typer command builds with cli.common.request_of, and cli.plain_front from
argv), and the reading of them into what they mean, once, with every usage error before the
machine is read. The views have no domain package of their own: they show what cli.smi_views
opens, so their requests sit beside it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from gpudiag.errors import UsageError
from gpudiag.selection import GpuSelection, parse_selection


class Stat(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag stat`, as given."""

    ids: str | None = None
    show_cmd: bool = False
    show_pid: bool = False
    show_power: bool = False
    no_processes: bool = False
    watch: bool = False
    interval: float = 1.0
    count: int | None = None
    json_output: bool = False


class StatLine(msgspec.Struct, frozen=True, kw_only=True):
    """What each of gpustat's lines shows besides the GPU (render.stat_view.block's options)."""

    show_cmd: bool
    show_pid: bool
    show_power: bool
    processes: bool


class Pacing(msgspec.Struct, frozen=True):
    """A watch's sampling: seconds between samples (checked), and how many (None: until Ctrl-C)."""

    interval: float
    count: int | None


def stat_line(r: Stat) -> StatLine:
    return StatLine(show_cmd=r.show_cmd, show_pid=r.show_pid, show_power=r.show_power, processes=not r.no_processes)


def stat_pacing(r: Stat) -> Pacing | None:
    """The watch's pacing, None for one sample; or a usage error."""
    from gpudiag.units import interval

    if (r.interval != 1.0 or r.count is not None) and not r.watch:
        raise UsageError("--interval and --count go with --watch")
    checked = interval(r.interval, "--interval")
    if r.count is not None and r.count < 1:
        raise UsageError("--count must be at least 1")
    return Pacing(checked, r.count) if r.watch else None


class Topo(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag topo`, as given."""

    matrix: bool = False
    p2p: str | None = None
    json_output: bool = False


def topo_capability(r: Topo) -> str | None:
    """The P2P capability whose matrix is asked (render.topo_view.P2P_CAPABILITIES' key), None for the
    link matrix; or a usage error."""
    from gpudiag.render.topo_view import P2P_CAPABILITIES

    if r.matrix and r.p2p is not None:
        raise UsageError("choose one of --matrix and --p2pstatus")
    if r.p2p is not None and r.p2p not in P2P_CAPABILITIES:
        raise UsageError(f"--p2pstatus {r.p2p!r}: use r (read), w (write), n (NVLink), a (atomics) or p (PCIe)")
    return r.p2p


class Nvlink(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag nvlink`, as given."""

    ids: str | None = None
    status: bool = False
    errorcounters: bool = False
    getthroughput: str | None = None
    json_output: bool = False


class NvlinkListing(msgspec.Struct, frozen=True):
    """Which per-link listing the text shows: ``status``, ``errors`` or ``throughput`` (of ``kind``:
    render.nvlink_view.THROUGHPUT's key)."""

    what: str
    kind: str | None = None


def nvlink_listing(r: Nvlink) -> NvlinkListing:
    from gpudiag.render.nvlink_view import THROUGHPUT

    options = (
        ("--status", r.status),
        ("--errorcounters", r.errorcounters),
        ("--getthroughput", r.getthroughput is not None),
    )
    chosen = [name for name, on in options if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    if r.getthroughput is not None:
        if r.getthroughput not in THROUGHPUT:
            raise UsageError(f"--getthroughput {r.getthroughput!r}: use d (data) or r (raw)")
        return NvlinkListing("throughput", r.getthroughput)
    return NvlinkListing("errors" if r.errorcounters else "status")


class Mig(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag mig`, as given."""

    ids: str | None = None
    lgip: bool = False
    lgi: bool = False
    lci: bool = False
    json_output: bool = False


def mig_listing(r: Mig) -> str:
    """Which of nvidia-smi mig's lists is asked: ``-lgip`` (the default), ``-lgi`` or ``-lci``."""
    chosen = [name for name, on in (("-lgip", r.lgip), ("-lgi", r.lgi), ("-lci", r.lci)) if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    return chosen[0] if chosen else "-lgip"


class _Sampling(msgspec.Struct, frozen=True, kw_only=True):
    """The options `gpudiag dmon` and `gpudiag pmon` share, as given (nvidia-smi's own pair)."""

    ids: str | None = None
    select: str = ""
    count: int | None = None
    delay: float = 1.0
    options: str = ""
    output_format: str | None = None
    filename: Path | None = None
    json_output: bool = False


class Dmon(_Sampling, frozen=True, kw_only=True):
    """Every option of `gpudiag dmon`, as given."""

    select: str = "puc"


class Pmon(_Sampling, frozen=True, kw_only=True):
    """Every option of `gpudiag pmon`, as given."""

    select: str = "u"


def selection(r: Stat | Nvlink | Mig | Dmon | Pmon) -> GpuSelection | None:
    """The GPUs the view's ``--id`` names, parsed (None: every GPU); '' or '0,,1' is a usage error."""
    return parse_selection(r.ids)
