"""`gpudiag memory --plot LOG`: a picture of a watched run, drawn with matplotlib (``gpudiag[plot]``).

One file that opens offline: SVG (the default), PNG or PDF as matplotlib writes them, or HTML
holding the SVG inline. Panels share the time axis: memory per GPU (NVML used, PyTorch reserved
and allocated, the GPU's total), memory per process, utilization, and the step rate when the
program called ``gpudiag.track.step()``; OOMs (drawn over the allocator retry that precedes them),
allocator retries and process starts and exits are marked across all of them, and the standing
forecast of a GPU or process is drawn as the line it extrapolates, from where it was made to the
limit at the time it gave.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.files import write_atomic
from gpudiag.memory.log import Run, Series

GiB = 1024**3
MAX_PROCESS_LINES = 10  # the biggest; a 64-process node would be noise
EVENT_STYLE = {"oom": ("tab:red", "-", "out of memory"), "retry": ("tab:orange", "--", "allocator retry")}
EVENT_STYLE |= {"start": ("tab:green", ":", "process started"), "exit": ("tab:gray", ":", "process exited")}
# Above the data, and an OOM above the allocator's retry that comes with it at the same moment.
EVENT_ZORDER = {"oom": 4.0, "retry": 3.5, "start": 3.0, "exit": 3.0}
EVENT_WIDTH = {"oom": 2.0, "retry": 1.2, "start": 1.2, "exit": 1.2}
FORECAST_STYLE = {"color": "tab:purple", "linestyle": (0, (4, 2)), "linewidth": 1.5, "zorder": 3.8}
FORMATS = (".svg", ".png", ".pdf", ".html")


def _figure() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise GpudiagError("--plot needs matplotlib: pip install 'gpudiag[plot]'", ExitCode.FAILED) from None
    matplotlib.rcParams["svg.hashsalt"] = "gpudiag"  # the same log draws the same file
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    return Figure


def _xs(series: Series, start: float, scale: float) -> list[float]:
    return [(t - start) / scale for t in series.times]


def _ys(series: Series, name: str, unit: float = 1.0) -> list[float]:
    return [float("nan") if v is None else v / unit for v in series.values.get(name, [])]


def step_rates(series: Series) -> list[float]:
    """Steps per second at each publication: the tracker's own rate (from its step times), else, in a log
    from before it carried one, between publications."""
    rates = series.values.get("rate", [])
    steps, times = series.values["step"], series.times
    out = []
    for n, rate in enumerate(rates or [None] * len(steps)):
        if rate is None and n and times[n] > times[n - 1]:
            rate = ((steps[n] or 0) - (steps[n - 1] or 0)) / (times[n] - times[n - 1])
        out.append(float("nan") if rate is None else rate)
    return out


def forecast_at(series: Series) -> int | None:
    """The sample where the forecast standing at the end of the log (or just before the OOM that ended
    it) began: the first of the last run of samples with one."""
    full = series.values.get("full_in_s", [])
    last = max((n for n, v in enumerate(full) if v is not None), default=None)
    if last is None:
        return None
    first = last
    while first > 0 and full[first - 1] is not None:
        first -= 1
    return first


def _draw_forecast(ax: Any, series: Series, start: float, scale: float, label: str) -> None:
    """The forecast as the line it extrapolates: from the level it saw to the limit at the time it gave."""
    n = forecast_at(series)
    if n is None:
        return
    full, level, limit = (series.values[k][n] for k in ("full_in_s", "level", "limit"))
    if full is None or level is None or limit is None:
        return
    x0 = (series.times[n] - start) / scale
    x1 = x0 + full / scale
    ax.plot([x0, x1], [level / GiB, limit / GiB], marker="x", markevery=[1], label=label, **FORECAST_STYLE)


def draw(run: Run) -> Any:
    """The figure for a run (matplotlib's Figure; no pyplot, no display)."""
    figure_class = _figure()
    start = run.start
    span = max((t for s in run.gpus.values() for t in s.times), default=start) - start
    scale, unit = (60.0, "min") if span > 600 else (1.0, "s")
    panels = ["gpu"]
    panels += ["process"] if run.processes else []
    panels += (
        ["util"] if any(any(v is not None for v in s.values.get("utilization", [])) for s in run.gpus.values()) else []
    )
    panels += ["steps"] if run.steps else []
    heights = {"gpu": 3, "process": 3, "util": 1.5, "steps": 1.5}
    fig = figure_class(figsize=(11, sum(heights[p] for p in panels) + 1), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False, height_ratios=[heights[p] for p in panels])[:, 0]
    colors = [f"C{i % 10}" for i in range(64)]
    for ax, panel in zip(axes, panels, strict=True):
        if panel == "gpu":
            for i, (index, s) in enumerate(sorted(run.gpus.items())):
                xs, c = _xs(s, start, scale), colors[i]
                ax.plot(xs, _ys(s, "used", GiB), color=c, label=f"GPU {index} used")
                if any(v is not None for v in s.values.get("reserved", [])):
                    ax.plot(xs, _ys(s, "reserved", GiB), color=c, linestyle="--", label=f"GPU {index} PyTorch reserved")
                    ax.plot(
                        xs, _ys(s, "allocated", GiB), color=c, linestyle=":", label=f"GPU {index} PyTorch allocated"
                    )
                totals = [v for v in s.values.get("total", []) if v]
                if totals:
                    ax.axhline(max(totals) / GiB, color=c, linewidth=0.8, alpha=0.5)
                _draw_forecast(ax, s, start, scale, f"GPU {index} forecast (used)")
            ax.set_ylabel("GiB per GPU")
            ax.set_title(f"{Path(run.source).name}: memory per GPU (line at the top: the GPU's total)", loc="left")
        elif panel == "process":
            peak = {
                k: max((v for v in s.values.get("used", []) if v is not None), default=0)
                for k, s in run.processes.items()
            }
            for i, key in enumerate(sorted(peak, key=lambda k: -peak[k])[:MAX_PROCESS_LINES]):
                s = run.processes[key]
                xs = _xs(s, start, scale)
                ax.plot(xs, _ys(s, "used", GiB), color=colors[i], label=s.label)
                if any(v is not None for v in s.values.get("allocated", [])):
                    ax.plot(xs, _ys(s, "allocated", GiB), color=colors[i], linestyle=":")
                _draw_forecast(ax, s, start, scale, f"PID {key[1]} forecast")
            more = len(peak) - MAX_PROCESS_LINES
            ax.set_ylabel("GiB per process")
            ax.set_title(
                "memory per process (NVML; dotted: PyTorch allocated)"
                + (f"; {more} smaller not drawn" if more > 0 else ""),
                loc="left",
            )
        elif panel == "util":
            for i, (index, s) in enumerate(sorted(run.gpus.items())):
                ax.plot(_xs(s, start, scale), _ys(s, "utilization"), color=colors[i], label=f"GPU {index}")
            ax.set_ylim(0, 105)
            ax.set_ylabel("util %")
        else:
            top = 0.0
            for i, (pid, s) in enumerate(sorted(run.steps.items())):
                rates = step_rates(s)
                top = max([top, *(r for r in rates if math.isfinite(r))])
                ax.plot(_xs(s, start, scale), rates, color=colors[i], marker=".", label=f"PID {pid}")
            # From 0, with room for the legend: a steady rate looks steady, not a wiggle in its third decimal.
            ax.set_ylim(0, (top or 1.0) * 1.6)
            ax.set_ylabel("steps/s")
        if panel != "util":
            ax.legend(loc="upper left", fontsize="small", ncols=2)
        ax.grid(alpha=0.3)
    _draw_events(axes, run, start, scale)
    axes[-1].set_xlabel(f"{unit} since the first sample")
    return fig


def _draw_events(axes: Any, run: Run, start: float, scale: float) -> None:
    """The run's events as vertical lines across every panel, each kind in the last panel's legend once."""
    seen: set[str] = set()
    for event in run.events:
        color, style, label = EVENT_STYLE[event.kind]
        for n, ax in enumerate(axes):
            ax.axvline(
                (event.at - start) / scale,
                color=color,
                linestyle=style,
                linewidth=EVENT_WIDTH[event.kind],
                zorder=EVENT_ZORDER[event.kind],
                label=label if n == len(axes) - 1 and event.kind not in seen else None,
            )
        seen.add(event.kind)
    if seen:
        axes[-1].legend(loc="upper left", fontsize="small", ncols=2)


def write(run: Run, target: Path) -> None:
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise GpudiagError(f"--output {target}: use .svg, .html, .png or .pdf", ExitCode.USAGE)
    fig = draw(run)
    image = io.BytesIO()
    if suffix == ".html":
        fig.savefig(image, format="svg", metadata={"Date": None})
        title = html.escape(f"gpudiag memory: {Path(run.source).name}")
        body = image.getvalue().decode("utf-8")
        body = body[body.index("<svg") :]  # inline: no XML prologue inside HTML
        data: str | bytes = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
            f"<body>\n{body}\n</body></html>\n"
        )
    else:
        metadata = {"Date": None} if suffix in (".svg", ".pdf") else {}
        fig.savefig(image, format=suffix[1:], metadata=metadata)
        data = image.getvalue()
    write_atomic(target, data)  # all or nothing: a full disk is exit 74 and no partial picture
