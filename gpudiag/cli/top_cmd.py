"""`gpudiag top`: the interactive monitor (Textual, the `gpudiag[top]` extra), live or on a replay."""

import os
import sys
from typing import Annotated

import typer

from gpudiag.cli.common import handle_errors, request_of, require_nvml, settings


@handle_errors
def command(
    ctx: typer.Context,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between refreshes (at least 0.1).")] = 2.0,
) -> None:
    """Interactive monitor of the GPUs and their processes, like nvitop (q quits).

    Live, or on a replay its recorded series: sort by any column, filter by user, GPU or text, a
    process tree, a process's detail, SIGTERM / SIGKILL / SIGINT after a confirmation."""
    from gpudiag.top.request import Request, prepare

    s = settings(ctx)
    top = prepare(request_of(Request, locals()), terminal=sys.stdin.isatty() and sys.stdout.isatty())
    from gpudiag.api import Sampler
    from gpudiag.top.app import TopApp
    from gpudiag.top.host import LiveHost, ReplayedHost, cuda_names

    if s.color == "never":
        os.environ["NO_COLOR"] = "1"  # Textual's own switch
    with Sampler(s.replay) as sampler:
        require_nvml(sampler.sample().machine.nvml)  # NVML that cannot start: its one line and exit code
        host = LiveHost() if s.replay is None else ReplayedHost()
        described = f"replay {s.replay}" if s.replay else "live"
        app = TopApp(sampler, host, top.interval, described, cuda_names(host))
        app.run()
    raise typer.Exit(app.return_code or 0)
