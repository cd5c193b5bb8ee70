"""`gpudiag exporter`: serve the node's GPUs as Prometheus metrics, until stopped."""

import functools
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpudiag.cli.common import echo, handle_errors, request_of, settings
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.export.request import DEFAULT_PORT

if TYPE_CHECKING:
    from gpudiag.export.request import Serve


def _attributor(serve: "Serve") -> Any:
    from gpudiag.export.attribution import ProcReader
    from gpudiag.export.exporter import Attributor

    kubelet = None
    if serve.kubelet_socket is not None and (serve.kubelet_named or serve.kubelet_socket.exists()):
        from gpudiag.export.kubelet import KubeletClient, KubeletUnavailableError

        try:
            kubelet = KubeletClient(serve.kubelet_socket)
        except KubeletUnavailableError as exc:
            echo(f"gpudiag: {exc}", err=True, one_line=True)
    return Attributor(ProcReader(serve.proc_root) if serve.proc_root is not None else None, kubelet)


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
    from gpudiag.export.exporter import Exporter
    from gpudiag.export.request import Request, prepare
    from gpudiag.memory.tracked import tracked_entries
    from gpudiag.model import NvmlStatus
    from gpudiag.sources import open_source

    s = settings(ctx)
    serve = prepare(request_of(Request, locals()), s.replay)
    attributor = _attributor(serve)
    with open_source(s.replay) as source:
        if source.session.info.status is not NvmlStatus.OK:
            echo(
                f"gpudiag: {source.session.info.detail}; serving gpudiag_nvml_up 0 and retrying",
                err=True,
                one_line=True,
            )
        exporter = Exporter(
            source=source,
            compat=serve.compat,
            hostname=serve.hostname,
            max_process_series=serve.max_process_series,
            tracked=functools.partial(tracked_entries, s.replay is not None),  # a replay's: those recorded with it
            attributor=attributor,
            log=None if serve.once else _say,  # a check's change of verdict or finding, once (kubectl logs)
            once=serve.once,  # GPM's figures: one window waited for, not measured since a scrape
        )
        try:
            if serve.once:  # a scrape's text: printable already (gpudiag.export.exposition)
                sys.stdout.write(exporter.render_text().decode())
                return
            _serve(exporter, serve)
        finally:
            if attributor.kubelet is not None:
                attributor.kubelet.close()


def _say(line: str) -> None:
    echo(line, err=True, one_line=True)  # a check's finding carries outside text


def _serve(exporter: Any, serve: "Serve") -> None:
    from gpudiag.export.exporter import Server

    bind, compat = serve.bind, serve.compat
    try:
        server = Server(exporter, bind, serve.port)
    except (OSError, ValueError) as exc:  # port in use, address not local, bad address
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GpudiagError(f"cannot serve metrics on {bind}:{serve.port}: {detail}", ExitCode.USAGE) from None
    try:
        typer.echo(
            f"gpudiag: exporter ({compat}) serving http://{bind}:{server.port}/metrics, /healthz, /livez, /readyz",
            err=True,
        )
        threading.Event().wait()  # until a signal (gpudiag.edge): SIGTERM from systemd or the kubelet, 143
    finally:
        server.shutdown()
