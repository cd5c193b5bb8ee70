"""What `gpudiag exporter` was asked for: its options checked and parsed once into what it serves
and where (the metric names, the address, the kubelet socket and /proc tree that attribute processes
to pods and jobs, the hostname label). Every usage error is raised here, before NVML is opened.

The command hands over its options as a :class:`Request` (``cli.common.request_of``); :func:`prepare`
returns the :class:`Serve` to run or raises one :class:`~gpudiag.errors.UsageError`.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import msgspec

from gpudiag.errors import UsageError

DEFAULT_PORT = 9401
NODE_NAME_ENV = "NODE_NAME"  # set from the downward API in deploy/kubernetes/


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag exporter`, as given (see the command for what each one means)."""

    port: int = DEFAULT_PORT
    bind: str = "127.0.0.1"
    compat: str = "native"
    max_process_series: int = 256
    kubelet_socket: Path | None = None
    no_kubelet: bool = False
    proc_root: Path | None = None
    hostname: str | None = None
    once: bool = False


class Serve(msgspec.Struct, frozen=True, kw_only=True):
    compat: str  # metric names: "native" (gpudiag_*) or "dcgm" (dcgm-exporter's)
    bind: str
    port: int
    max_process_series: int
    kubelet_socket: Path | None  # the pod-resources socket to ask; None: --no-kubelet
    kubelet_named: bool  # named by --kubelet-socket: asked (and its failure said) even when it does not exist
    proc_root: Path | None  # the /proc tree read for owners; None: none (a replay's PIDs are not this host's)
    hostname: str  # the hostname label
    once: bool  # one scrape on stdout, then exit


def prepare(r: Request, replay: str | None) -> Serve:
    """The exporter ``r`` asks for, on this machine or ``replay``, or the first usage error in it."""
    from gpudiag.export.exporter import COMPAT
    from gpudiag.export.kubelet import DEFAULT_SOCKET

    if r.compat not in COMPAT:
        raise UsageError(f"--compat {r.compat!r}: use native or dcgm")
    if not 0 <= r.port < 65536:
        raise UsageError(f"--port {r.port}: not a TCP port")
    if r.max_process_series < 0:
        raise UsageError("--max-process-series must be 0 or more")
    if r.no_kubelet and r.kubelet_socket is not None:
        raise UsageError("--kubelet-socket and --no-kubelet contradict each other")
    return Serve(
        compat=r.compat,
        bind=r.bind,
        port=r.port,
        max_process_series=r.max_process_series,
        kubelet_socket=None if r.no_kubelet else (r.kubelet_socket or DEFAULT_SOCKET),
        kubelet_named=r.kubelet_socket is not None,
        proc_root=r.proc_root if r.proc_root is not None else (None if replay else Path("/proc")),
        hostname=r.hostname or os.environ.get(NODE_NAME_ENV) or socket.gethostname(),
        once=r.once,
    )
