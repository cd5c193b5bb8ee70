"""`gpudiag list` as rich renderables, in nvidia-smi's layout and vocabulary."""

from __future__ import annotations

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gpudiag import __version__
from gpudiag.model import (
    Gpu,
    GpuProcess,
    GpuState,
    HostState,
    Machine,
    MigDevice,
    Reason,
    cuda_version_text,
)
from gpudiag.readings import groups_of
from gpudiag.render.format import NA, mib_text, missing_note, percent_style, temperature_style, text
from gpudiag.render.printable import printable

# The readings the tables and notes show; list reads nothing else (InfoROM, PCIe, ECC history ... are check's).
READS = (
    "memory",
    "utilization",
    "temperature_c",
    "temperature_slowdown_c",
    "fan_percent",
    "power_draw_w",
    "power_limit_w",
    "pstate",
    "persistence_mode",
    "compute_mode",
    "ecc_mode_current",
    "ecc_errors.volatile_uncorrected",
    "mig_mode_current",
    "mig_devices",
    "processes",
)
GROUPS = groups_of(READS)

_COLUMNS = (
    "GPU",
    "Name",
    "Bus-Id",
    "Persist",
    "Fan",
    "Temp",
    "Perf",
    "Pwr:Usage/Cap",
    "Memory-Usage",
    "GPU-Util",
    "Compute M.",
    "MIG M.",
    "ECC",
)
# Dropped in this order until the table fits the terminal; then the name is cut (to MIN_NAME_WIDTH),
# then utilization and temperature go whole. The GPU index and its memory always stay whole.
_DROP_ORDER = ("Compute M.", "Persist", "MIG M.", "Bus-Id", "ECC", "Fan", "Perf", "Pwr:Usage/Cap")
_LAST_TO_GO = ("GPU-Util", "Temp")


def header(machine: Machine) -> Text:
    nvml = machine.nvml
    parts = [
        f"gpudiag {__version__}",
        f"Driver Version: {text(nvml.driver_version)}",
        f"CUDA Version: {text(nvml.cuda_driver_version, cuda_version_text)}",
        f"NVML: {text(nvml.nvml_version)}",
    ]
    tb = machine.torch_build
    if tb.value is not None:
        build = f"CUDA {tb.value.cuda}" if tb.value.cuda else ("ROCm " + tb.value.hip if tb.value.hip else "CPU-only")
        parts.append(printable(f"torch {tb.value.version} ({build})"))
    line = Text("  ".join(parts), style="bold")
    if machine.source != "live":
        line.append(f"\n{printable(machine.source)}", style="dim")
    return line


def _watts(w: float) -> str:
    """Whole watts, cut as nvidia-smi cuts them: 71.936 W is "71W" (the idle H100's table)."""
    return f"{int(w)}W"


def _power(gpu: Gpu) -> str:
    draw = text(gpu.power_draw_w, _watts)
    cap = text(gpu.power_limit_w, _watts)
    return f"{draw} / {cap}"


def _memory_cell(gpu: Gpu) -> Text:
    m = gpu.memory.value
    if m is None:
        return Text(NA)
    share = 100.0 * m.used_bytes / m.total_bytes if m.total_bytes else 0.0
    return Text(f"{mib_text(m.used_bytes)} / {mib_text(m.total_bytes)}", style=percent_style(share))


def _util_cell(gpu: Gpu) -> Text:
    u = gpu.utilization.value
    if u is None:
        return Text(NA)
    return Text(f"{u.gpu_percent}%", style=percent_style(u.gpu_percent))


def _temp_cell(gpu: Gpu) -> Text:
    t = gpu.temperature_c.value
    if t is None:
        return Text(NA)
    return Text(f"{t}C", style=temperature_style(t, gpu.temperature_slowdown_c.value))


def _ecc_cell(gpu: Gpu) -> Text:
    if gpu.ecc_mode_current.value is False:
        return Text("Off")
    count = gpu.ecc_errors.volatile_uncorrected.value
    if count is None:
        return Text(NA)
    return Text(str(count), style="red bold" if count else "")


def _mig_label(mig: MigDevice, parent_name: str | None) -> str:
    """'└ MIG 3g.20gb  GI 1 CI 0': the profile without the parent's name repeated."""
    name = text(mig.name)
    parent = printable(parent_name) if parent_name else ""
    if parent and name.startswith(f"{parent} MIG "):
        name = name[len(parent) + 5 :]
    return f"└ MIG {name}  GI {text(mig.gpu_instance_id)} CI {text(mig.compute_instance_id)}"


def _natural_width(console: Console, table: Table) -> int:
    """The table's natural width, as rich measures it. Measuring costs as much as rendering (~5-8 ms
    for 8 GPUs, ~30 ms for 64 processes), and a narrow terminal measures several tables: when every
    cell is one line of text the width is added up from the text instead (:func:`text_width`)."""
    width = text_width(console, table)
    if width is None:
        width = Measurement.get(console, console.options.update_width(10_000), table).maximum
    return width


def text_width(console: Console, table: Table) -> int | None:
    """The table's natural width from its cells' text, as rich's measurement adds it up: each
    column is its widest cell plus the cell padding (none at the outer edges without pad_edge),
    capped at the column's max_width; then a separator between columns and the edges when shown.
    None when a cell is not one line of text, or the table or a column is set up otherwise than
    these tables are (fixed or minimum widths, collapsed padding, a footer): rich measures those."""
    columns = table.columns
    if (
        table.width is not None
        or table.min_width is not None
        or table.collapse_padding
        or table.show_footer
        or not table.show_header
        or not columns
    ):
        return None
    _, pad_right, _, pad_left = table.padding
    total = 0
    for position, column in enumerate(columns):
        if column.width is not None or column.min_width is not None:
            return None
        left = pad_left if table.pad_edge or position > 0 else 0
        right = pad_right if table.pad_edge or position < len(columns) - 1 else 0
        widest = 0
        for cell in (column.header, *column.cells):
            if isinstance(cell, Text):
                plain = cell.plain
            elif isinstance(cell, str):  # as the console shows a string (markup and emoji off: as written)
                plain = console.render_str(cell, highlight=False).plain
            else:
                return None
            if "\t" in plain or len(plain.splitlines()) > 1:  # lines as rich splits them (\u2028, \x85 too)
                return None
            widest = max(widest, cell_len(plain))
        width = widest + left + right
        if column.max_width is not None:
            width = min(width, column.max_width + left + right)
        total += width
    if table.box is not None:
        total += len(columns) - 1 + (2 if table.show_edge else 0)
    return total


def gpu_table(gpus: tuple[Gpu, ...], console: Console) -> Table:
    """The GPU table with as many columns as fit the console's width. Detail columns go first;
    if the rest is still too wide, the name is cut; below that, utilization and temperature go:
    the GPU index and its memory stay whole (at COLUMNS' floor of 40 too)."""
    shown = list(_COLUMNS)
    for column in (None, *_DROP_ORDER):
        if column is not None:
            shown.remove(column)
        table = _gpu_table(gpus, shown)
        if _natural_width(console, table) <= console.width:
            return table
    for column in (None, *_LAST_TO_GO):
        if column is not None:
            shown.remove(column)
        natural = _natural_width(console, _gpu_table(gpus, shown))
        if natural <= console.width:
            return _gpu_table(gpus, shown)
        # Without the name the table is narrower by the name, its padding (2) and a separator (1).
        name = natural - _natural_width(console, _gpu_table(gpus, [c for c in shown if c != "Name"])) - 3
        name_width = name - (natural - console.width)
        if name_width >= MIN_NAME_WIDTH:
            return _gpu_table(gpus, shown, name_width=name_width)
    return _gpu_table(gpus, shown, name_width=MIN_NAME_WIDTH)  # wider than the console: the terminal wraps


MIN_NAME_WIDTH = 8  # "NVIDIA …": below this a name says nothing


def _gpu_table(gpus: tuple[Gpu, ...], shown: list[str], name_width: int | None = None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    for name in shown:
        table.add_column(
            name,
            justify="right" if name in ("GPU", "Fan", "Temp", "GPU-Util", "ECC") else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=name_width if name == "Name" else None,
        )
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            row: dict[str, RenderableType] = {
                "GPU": str(gpu.index),
                "Name": Text("LOST" if gpu.state is GpuState.LOST else "ERROR", style="red bold"),
            }
            if "Bus-Id" in shown:
                row["Bus-Id"] = text(gpu.pci_bus_id)
            row["Memory-Usage"] = Text("N/A (see note)", style="red")
            table.add_row(*[row.get(c, "") for c in shown])
            continue
        mig = gpu.mig_mode_current.value
        cells: dict[str, RenderableType] = {
            "GPU": str(gpu.index),
            "Name": text(gpu.name),
            "Bus-Id": text(gpu.pci_bus_id),
            "Persist": text(gpu.persistence_mode, lambda on: "On" if on else "Off"),
            "Fan": text(gpu.fan_percent, lambda f: f"{f}%"),
            "Temp": _temp_cell(gpu),
            "Perf": text(gpu.pstate, lambda p: f"P{p}"),
            "Pwr:Usage/Cap": _power(gpu),
            "Memory-Usage": _memory_cell(gpu),
            "GPU-Util": _util_cell(gpu),
            "Compute M.": text(gpu.compute_mode, lambda m: m.value),
            "MIG M.": NA if mig is None else ("Enabled" if mig else "Disabled"),
            "ECC": _ecc_cell(gpu),
        }
        table.add_row(*[cells[c] for c in shown])
        for dev in gpu.mig_devices:
            mig_cells: dict[str, RenderableType] = {
                "Name": Text(_mig_label(dev, gpu.name.value), style="cyan"),
                "Bus-Id": Text(text(dev.uuid), style="dim"),
                "Memory-Usage": text(dev.memory, lambda m: f"{mib_text(m.used_bytes)} / {mib_text(m.total_bytes)}"),
            }
            table.add_row(*[mig_cells.get(c, "") for c in shown])
    return table


def _process_command(proc: GpuProcess) -> Text:
    host = proc.host
    if host.state is HostState.OTHER_NAMESPACE:
        return Text("(host PID: not visible in this container)", style="yellow")
    if host.state is HostState.VANISHED:
        return Text("(exited)", style="dim")
    if host.command.value is not None:
        return Text(printable(host.command.value))
    if host.name.value is not None:
        return Text(printable(host.name.value))
    return Text(f"({missing_note(host.command)})", style="dim")


# Process table columns that may be left out, in this order, when the terminal is narrow. GPU, the
# MIG instance, PID and GPU Memory always stay whole; the command is cut (or wrapped) last, and left
# out when not even MIN_COMMAND_SHOWN cells of it fit.
_PROCESS_DETAILS = ("User", "Type")
MIN_COMMAND_WIDTH = 16
MIN_COMMAND_SHOWN = 8
_Row = tuple[Gpu, GpuProcess | None, str]  # a process, or None and why the GPU's list is missing


def process_table(gpus: tuple[Gpu, ...], width: int, console: Console) -> Table | Text:
    """The processes table within ``width``: detail columns go first, then the command is cut."""
    rows = _process_rows(gpus)
    if not rows:
        return Text("No running processes found", style="dim")
    whole = _process_table(rows, [], command=True, command_width=width)
    if _natural_width(console, whole) <= width:  # nothing is cut: no need to measure the other columns
        return _process_table(rows, [], command=True, command_width=width, wrap=width >= 100)
    left_out: list[str] = []
    for detail in (None, *_PROCESS_DETAILS):
        if detail is not None:
            left_out.append(detail)
        others = _natural_width(console, _process_table(rows, left_out, command=False))
        room = width - others - 3  # three columns of padding and separator before the command
        if room >= MIN_COMMAND_WIDTH:
            break
    if room < MIN_COMMAND_SHOWN:  # the identity columns fill the line: no command rather than cut ones
        return _process_table(rows, left_out, command=False)
    return _process_table(rows, left_out, command=True, command_width=room, wrap=width >= 100)


def _process_rows(gpus: tuple[Gpu, ...]) -> list[_Row]:
    rows: list[_Row] = []
    for gpu in gpus:
        procs = gpu.processes
        if procs.value is None:
            if gpu.state is GpuState.OK:
                rows.append((gpu, None, missing_note(procs)))
            continue
        for proc in sorted(procs.value, key=lambda p: p.pid):
            rows.append((gpu, proc, ""))
    return rows


def _process_table(
    rows: list[_Row], left_out: list[str], *, command: bool, command_width: int = 0, wrap: bool = False
) -> Table:
    """The table; without the command column when ``command`` is False (to measure the rest)."""
    any_mig = any(p is not None and p.gpu_instance_id is not None for _, p, _ in rows)
    columns = ["GPU", *(["GI", "CI"] if any_mig else []), "PID", "Type", "User", "GPU Memory"]
    columns = [c for c in columns if c not in left_out]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in columns:
        table.add_column(
            name,
            justify="left" if name in ("Type", "User") else "right",
            no_wrap=True,
            max_width=16 if name == "User" else None,
            overflow="ellipsis",
        )
    if command:
        table.add_column(
            "Process", overflow="ellipsis" if not wrap else "fold", no_wrap=not wrap, max_width=command_width
        )
    for gpu, proc, note in rows:
        if proc is None:
            cells: dict[str, RenderableType] = {"GPU": str(gpu.index)}
            last: RenderableType = Text(f"processes: {note}", style="yellow")
        else:
            cells = {
                "GPU": str(gpu.index),
                "GI": text_or_dash(proc.gpu_instance_id),
                "CI": text_or_dash(proc.compute_instance_id),
                "PID": str(proc.pid),
                "Type": proc.kind.value,
                "User": text(proc.host.user),
                "GPU Memory": text(proc.used_memory_bytes, mib_text),
            }
            last = _process_command(proc)
        table.add_row(*[cells.get(c, "") for c in columns], *([last] if command else []))
    return table


def text_or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def notes(machine: Machine, gpus: tuple[Gpu, ...]) -> list[str]:
    """Explain what a reader cannot see in the tables: lost GPUs, odd N/A reasons, containers."""
    out = []
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            out.append(f"GPU {gpu.index}: {printable(gpu.state_detail)}")
    unusual = {Reason.NO_PERMISSION, Reason.FUNCTION_NOT_FOUND, Reason.UNKNOWN_ERROR}
    seen: set[str] = set()
    for gpu in gpus:
        if gpu.state is not GpuState.OK:
            continue
        for name, reading in (
            ("memory", gpu.memory),
            ("utilization", gpu.utilization),
            ("temperature", gpu.temperature_c),
            ("power", gpu.power_draw_w),
            ("processes", gpu.processes),
        ):
            if reading.reason in unusual:
                line = f"{name} N/A: {missing_note(reading)}"
                if line not in seen:
                    seen.add(line)
                    out.append(f"GPU {gpu.index}: {line}")
    foreign = sum(1 for g in gpus for p in g.processes.get(()) if p.host.state is HostState.OTHER_NAMESPACE)
    if foreign:
        hint = f" ({printable(machine.host.container_hint)})" if machine.host.container_hint else ""
        out.append(
            f"{foreign} process(es) belong to the host's PID namespace: this looks like a container{hint}; "
            "their PIDs mean nothing here (run the container with --pid=host to see them)"
        )
    if machine.nvml.process_query_api and machine.nvml.process_query_api != "_v3":
        out.append(
            f"process list read with the older NVML query ({printable(machine.nvml.process_query_api)}): this driver "
            "lacks the newer one"
        )
    return out


def render(machine: Machine, gpus: tuple[Gpu, ...], console: Console, show_processes: bool) -> Group:
    parts: list[RenderableType] = [header(machine), Text("")]
    if gpus:
        parts.append(gpu_table(gpus, console))
    else:
        parts.append(Text("No GPUs found: NVML is working but reports zero devices.", style="yellow"))
    if show_processes and gpus:
        parts += [Text(""), Text("Processes", style="bold"), process_table(gpus, console.width, console)]
    extra = notes(machine, gpus)
    if extra:
        parts.append(Text(""))
        parts += [Text(f"Note: {line}", style="yellow") for line in extra]
    return Group(*parts)
