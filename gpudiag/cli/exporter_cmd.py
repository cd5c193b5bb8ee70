"""`gpudiag exporter`: serve the node's GPUs as Prometheus metrics, until stopped."""

import functools
import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from gpudiag.cli.common import echo, handle_errors, settings
from gpudiag.errors import GpudiagError, UsageError
from gpudiag.exitcodes import ExitCode

DEFAULT_PORT = 9401
NODE_NAME_ENV = "NODE_NAME"  # set from the downward API in deploy/kubernetes/


def _attributor(replay: bool, proc_root: Path | None, kubelet_socket: Path | None, explicit_socket: bool) -> Any:
    from gpudiag.export.attribution import ProcReader
    from gpudiag.export.exporter import Attributor

    # A replayed machine's PIDs are not this host's: read /proc only when a tree is named.
    root = proc_root if proc_root is not None else (None if replay else Path("/proc"))
    kubelet = None
    if kubelet_socket is not None and (explicit_socket or kubelet_socket.exists()):
        from gpudiag.export.kubelet import KubeletClient, KubeletUnavailableError

        try:
            kubelet = KubeletClient(kubelet_socket)
        except KubeletUnavailableError as exc:
            echo(f"gpudiag: {exc}", err=True, one_line=True)
    return Attributor(ProcReader(root) if root is not None else None, kubelet)


@handle_errors
def command(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="TCP port for /metrics and /healthz.")] = DEFAULT_PORT,
    bind: Annotated[
        str, typer.Option("--bind", help="Address to listen on (0.0.0.0 or the pod IP to be scraped from outside).")
    ] = "127.0.0.1",
    compat: Annotated[
        str,
        typer.Option(
            "--compat", help="Metric names: native (gpudiag_*) or dcgm (dcgm-exporter's DCGM_FI_DEV_* and labels)."
        ),
    ] = "native",
    max_process_series: Annotated[
        int,
        typer.Option("--max-process-series", help="At most this many processes get per-process series (biggest)."),
    ] = 256,
    kubelet_socket: Annotated[
        Path | None,
        typer.Option(
            "--kubelet-socket",
            help="Kubelet pod-resources socket for pod/namespace/container labels (used when it exists).",
            dir_okay=False,
        ),
    ] = None,
    no_kubelet: Annotated[
        bool, typer.Option("--no-kubelet", help="Do not ask the kubelet; attribute by cgroups only.")
    ] = False,
    proc_root: Annotated[
        Path | None,
        typer.Option(
            "--proc-root", help="The host's /proc (e.g. /host/proc in a container) for attribution.", file_okay=False
        ),
    ] = None,
    hostname: Annotated[
        str | None,
        typer.Option("--hostname", help="Hostname label (default: $NODE_NAME, else this host's name)."),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Print one scrape on stdout and exit.")] = False,
) -> None:
    """Prometheus exporter per node: GPU, health and per-process metrics with pod/job attribution."""
    import socket

    from gpudiag.export.exporter import COMPAT, Exporter
    from gpudiag.export.kubelet import DEFAULT_SOCKET
    from gpudiag.memory.tracked import tracked_entries
    from gpudiag.model import NvmlStatus
    from gpudiag.probe.collect import open_source

    s = settings(ctx)
    if compat not in COMPAT:
        raise UsageError(f"--compat {compat!r}: use native or dcgm")
    if not 0 <= port < 65536:
        raise UsageError(f"--port {port}: not a TCP port")
    if max_process_series < 0:
        raise UsageError("--max-process-series must be 0 or more")
    if no_kubelet and kubelet_socket is not None:
        raise UsageError("--kubelet-socket and --no-kubelet contradict each other")
    replayed = s.replay is not None

    socket_path = None if no_kubelet else (kubelet_socket or DEFAULT_SOCKET)
    attributor = _attributor(replayed, proc_root, socket_path, kubelet_socket is not None)
    with open_source(s.replay) as source:
        if source.session.info.status is not NvmlStatus.OK:
            echo(
                f"gpudiag: {source.session.info.detail}; serving gpudiag_nvml_up 0 and retrying",
                err=True,
                one_line=True,
            )
        exporter = Exporter(
            source=source,
            compat=compat,
            hostname=hostname or os.environ.get(NODE_NAME_ENV) or socket.gethostname(),
            max_process_series=max_process_series,
            tracked=functools.partial(tracked_entries, replayed),  # a replay's: those recorded with it
            attributor=attributor,
            log=None if once else _say,  # a check's change of verdict or finding, once (kubectl logs)
            once=once,  # GPM's figures: one window waited for, not measured since a scrape
        )
        try:
            if once:  # a scrape's text: printable already (gpudiag.export.exposition)
                sys.stdout.write(exporter.render_text().decode())
                return
            _serve(exporter, bind, port, compat)
        finally:
            if attributor.kubelet is not None:
                attributor.kubelet.close()


def _say(line: str) -> None:
    echo(line, err=True, one_line=True)  # a check's finding carries outside text


def _serve(exporter: Any, bind: str, port: int, compat: str) -> None:
    from gpudiag.export.exporter import Server

    try:
        server = Server(exporter, bind, port)
    except (OSError, ValueError) as exc:  # port in use, address not local, bad address
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GpudiagError(f"cannot serve metrics on {bind}:{port}: {detail}", ExitCode.USAGE) from None
    try:
        typer.echo(
            f"gpudiag: exporter ({compat}) serving http://{bind}:{server.port}/metrics, /healthz, /livez, /readyz",
            err=True,
        )
        threading.Event().wait()  # until a signal (gpudiag.edge): SIGTERM from systemd or the kubelet, 143
    finally:
        server.shutdown()
