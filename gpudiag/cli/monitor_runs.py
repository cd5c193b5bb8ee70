"""What `gpudiag dmon` and `pmon` do once their options are a Request (cli.smi_requests): their Typer
commands and the plain front (cli.plain_front: a bounded ``-c N`` of ``--json`` or ``--format
csv``) both run these. Their options are read here, once, before the machine is: the metric
letters as columns, the pacing, the lines' layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpudiag.errors import UsageError

if TYPE_CHECKING:
    from gpudiag.cli.plain import Settings
    from gpudiag.cli.smi_requests import Dmon, Pmon
    from gpudiag.model import Gpu, Reading

MAX_DELAY = 10.0  # nvidia-smi pmon's: NVML keeps a process's samples for a few seconds only


def dmon(s: Settings, r: Dmon) -> None:
    """Device figures, one line per GPU per interval (like nvidia-smi dmon); a replay plays its series."""
    from gpudiag import monitor
    from gpudiag.cli import monitor_loop
    from gpudiag.cli.smi_requests import selection
    from gpudiag.cli.smi_views import open_views
    from gpudiag.probe.monitor import RowReader
    from gpudiag.render import dmon_view

    columns = monitor.select(r.select)
    monitor_loop.check_options(r.count, r.delay)
    layout = monitor_loop.line_layout(r.options, r.output_format, r.json_output)

    opened = open_views(s, selection(r))
    out = monitor_loop.Output(r.filename)
    gone: list[Gpu] = []
    said: set[int] = set()
    try:
        reader = RowReader(opened.source, monitor.row_keys(columns))
        before: dict[int, tuple[Any, float]] = {}

        def step(n: int, at: float, clock: float) -> None:
            lines = [] if r.json_output or n else dmon_view.header_lines(columns, layout)
            found: list[tuple[int, str, tuple[Reading[Any], ...]]] = []
            for gpu in opened.gpus:
                if gpu.index in said:
                    continue
                position = opened.position(gpu)
                now = reader.read(position)
                if now is None:
                    gone.append(monitor_loop.lost(gpu, said))
                    continue
                last = before.get(position)
                values = monitor.values(columns, now, last[0] if last else None, clock - last[1] if last else 0.0)
                before[position] = (now, clock)
                found.append((gpu.index, gpu.state.value, values))
                if not r.json_output:
                    lines.append(dmon_view.line(gpu.index, values, at, layout))
            if r.json_output:
                lines.append(dmon_view.json_line(n, at, columns, found))
            out.write(lines)

        monitor_loop.run(opened, step, r.delay, r.count)
    finally:
        out.close()
        opened.close()
    monitor_loop.exit_code(opened, gone)


def pmon(s: Settings, r: Pmon) -> None:
    """Each process's share of its GPU, one line per process per interval (like nvidia-smi pmon)."""
    from gpudiag import monitor
    from gpudiag.cli import monitor_loop
    from gpudiag.cli.smi_requests import selection
    from gpudiag.cli.smi_views import open_views
    from gpudiag.probe.monitor import PROCESS_LOAD, RowReader
    from gpudiag.render import pmon_view

    columns = monitor.select_pmon(r.select)
    monitor_loop.check_options(r.count, r.delay)
    if r.delay > MAX_DELAY:
        raise UsageError(f"--delay {r.delay:g}: at most {MAX_DELAY:g} seconds (NVML keeps a process's samples briefly)")
    layout = monitor_loop.line_layout(r.options, r.output_format, r.json_output)

    opened = open_views(s, selection(r))
    out = monitor_loop.Output(r.filename)
    gone: list[Gpu] = []
    said: set[int] = set()
    try:
        reader = RowReader(opened.source, ("processes", PROCESS_LOAD))

        def step(n: int, at: float, clock: float) -> None:
            lines = [] if r.json_output or n else pmon_view.header_lines(columns, layout)
            rows: list[monitor.ProcessRow] = []
            sampled: list[int] = []
            for gpu in opened.gpus:
                if gpu.index in said:
                    continue
                now = reader.read(opened.position(gpu))
                if now is None:
                    gone.append(monitor_loop.lost(gpu, said))
                    continue
                sampled.append(gpu.index)
                rows += monitor.process_rows(gpu.index, columns, now["processes"], now[PROCESS_LOAD])
            if r.json_output:
                lines.append(pmon_view.json_line(n, at, columns, sampled, rows))
            else:
                lines += [pmon_view.line(row, at, layout) for row in rows]
            out.write(lines)

        monitor_loop.run(opened, step, r.delay, r.count)
    finally:
        out.close()
        opened.close()
    monitor_loop.exit_code(opened, gone)
