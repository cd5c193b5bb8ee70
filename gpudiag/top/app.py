"""`gpudiag top`'s Textual application: the GPUs and their processes, refreshed every interval.

Keys: ``q`` quits; ``,`` / ``.`` move the sort column, ``r`` reverses it (or click a heading); ``/``
filters (``user:NAME gpu:N words``; Escape clears); ``g`` shows only the selected GPU's processes;
``t`` nests processes under their parents; Enter shows a process's detail; ``T`` / ``K`` / ``I``
send SIGTERM / SIGKILL / SIGINT after a confirmation (own processes unless root; never on a replay).
Every text from outside is escaped (render.printable) and handed to Textual as ``Text``, never markup.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Static

from gpudiag.exitcodes import ExitCode
from gpudiag.render.printable import printable
from gpudiag.top import rows

if TYPE_CHECKING:
    from gpudiag.api import Sample
    from gpudiag.memory.state import WatchState
    from gpudiag.top.host import LiveHost, ReplayedHost

GIB = 1 << 30
INTERRUPTED = int(ExitCode.INTERRUPTED)  # 128 + SIGINT, as every watch interrupted by Ctrl-C
DEFAULT_INTERVAL = 2.0


class Source(Protocol):
    """What the app reads: gpudiag.api.Sampler (or a test's stand-in)."""

    @property
    def state(self) -> WatchState: ...

    def sample(self) -> Sample: ...


def _num(value: Any, fmt: str = "{}", missing: str = "-") -> Text:
    return Text(missing if value is None else fmt.format(value), justify="right")


def _health(status: str) -> Text:
    style = {"FAIL": "bold red", "LOST": "bold red", "WARN": "yellow"}.get(status, "")
    return Text(status, style=style)


def gpu_cells(g: rows.GpuLine, columns: list[str]) -> list[Text]:
    cells = {
        "gpu": _num(g.index),
        "name": Text(printable(g.name)),
        "util": _num(g.util, "{}%"),
        "mem": Text(
            "-"
            if g.mem_used is None or g.mem_total is None
            else f"{g.mem_used / GIB:.1f}/{g.mem_total / GIB:.0f}G {g.mem_percent or 0:3.0f}%",
            justify="right",
        ),
        "temp": _num(g.temp, "{}C"),
        "power": Text(
            "-" if g.power is None else f"{g.power:.0f}/{g.power_limit:.0f}W" if g.power_limit else f"{g.power:.0f}W",
            justify="right",
        ),
        "clocks": Text(f"{g.sm_clock if g.sm_clock is not None else '-'}/{g.mem_clock or '-'}", justify="right"),
        "health": _health(g.health),
        "procs": _num(g.processes),
        "history": Text(g.history, style="green"),
    }
    return [cells[c] for c in columns]


def proc_cells(p: rows.ProcLine, columns: list[str], tree: bool) -> list[Text]:
    command = printable(p.command)
    if tree and p.depth:
        command = "  " * (p.depth - 1) + ("└─ " if p.last else "├─ ") + command
    cells = {
        "gpu": _num(p.gpu),
        "pid": _num(p.pid),
        "user": Text(printable(p.user)),
        "type": Text(p.kind),
        "mem": _num(None if p.mem is None else round(p.mem / (1 << 20)), "{}MiB"),
        "memp": _num(None if p.mem_percent is None else round(p.mem_percent), "{}%"),
        "sm": _num(p.sm, "{}%"),
        "cuda": Text(p.cuda),
        "history": Text(p.history, style="cyan"),
        "command": Text(command, no_wrap=True, overflow="ellipsis"),
    }
    return [cells[c] for c in columns]


def _shown(cell: Any) -> tuple[Any, ...]:
    return (cell.plain, cell.style, cell.justify) if isinstance(cell, Text) else (repr(cell),)


class Table(DataTable[Text]):
    """A DataTable that renders again only the cells and lines whose text changed. DataTable keys its
    render caches on a counter that every ``update_cell`` bumps, so a refresh that changes a few
    figures renders every visible cell anew (~0.3 ms each: most of `top`'s cost per refresh on 8 GPUs
    and 64 processes); here a rendering is kept by what it shows, where, and how it is highlighted."""

    LIMIT = 20_000  # renderings kept (a few screens' worth), then started over

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cells: dict[tuple[Any, ...], Any] = {}
        self._lines: dict[tuple[Any, ...], Any] = {}
        self._strips: dict[tuple[Any, ...], Any] = {}

    def _state(self) -> tuple[Any, ...]:
        return (self._show_hover_cursor, self._pseudo_class_state, self.has_focus, self.cursor_type, self.show_cursor)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> Any:
        if row_index < 0 or column_index < 0:  # headings and labels: DataTable's own way
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key, column_key = self._row_locations.get_key(row_index), self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        cell = self._data[row_key][column_key]
        key = (row_index, column_index, base_style, width, cursor, hover, *self._state(), *_shown(cell))
        lines = self._cells.get(key)
        if lines is None:
            if len(self._cells) > self.LIMIT:
                self._cells.clear()
            lines = self._cells[key] = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        return lines

    def _render_line_in_row(
        self,
        row_key: Any,
        line_no: int,
        base_style: Style,
        cursor_location: Any,
        hover_location: Any,
    ) -> Any:
        columns = self.ordered_columns
        if row_key is self._header_row_key:
            shown: tuple[Any, ...] = tuple(c.label.plain for c in columns)
        elif row_key in self._row_locations:
            cells = self._data[row_key]
            shown = (self._row_locations.get(row_key), *(_shown(cells.get(c.key)) for c in columns))
        else:
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        widths = tuple(c.get_render_width(self) for c in columns)
        key = (row_key, line_no, base_style, cursor_location, hover_location, *self._state(), widths, shown)
        lines = self._lines.get(key)
        if lines is None:
            if len(self._lines) > self.LIMIT:
                self._lines.clear()
                self._strips.clear()  # keyed on the ids of what _lines held
            lines = self._lines[key] = super()._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )
        return lines

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Any:
        try:
            row_key, line_no = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        pair = self._render_line_in_row(row_key, line_no, base_style, self.cursor_coordinate, self.hover_coordinate)
        key = (y, x1, x2, self.size.width, base_style, id(pair))  # pair: kept in _lines while it is cached here
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) > self.LIMIT:
                self._strips.clear()
            strip = self._strips[key] = super()._render_line(y, x1, x2, base_style)
        return strip


class ConfirmSignal(ModalScreen[bool]):
    """Asks before a signal is sent: y / Enter sends, n / Escape does not."""

    BINDINGS: ClassVar[list[BindingType]] = [
        ("y", "answer(True)", "Send"),
        ("n", "answer(False)", "Cancel"),
        ("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self._question), id="question")
            with Horizontal(id="buttons"):
                yield Button("Send (y)", id="yes", variant="error")
                yield Button("Cancel (n)", id="no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, send: bool) -> None:
        self.dismiss(send)


class Detail(ModalScreen[None]):
    """A process's detail: its command line, CUDA environment, allocator figures and forecast."""

    BINDINGS: ClassVar[list[BindingType]] = [
        ("escape", "close", "Close"),
        ("enter", "close", "Close"),
        ("q", "close", "Close"),
    ]

    def __init__(self, text: Text) -> None:
        super().__init__()
        self._text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="detail"):
            yield Static(self._text)
            yield Static(Text("Escape, Enter or q: back", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)


class TopApp(App[int]):
    """The monitor. ``source``: where samples come from; ``host``: the live host, or a replay's."""

    TITLE = "gpudiag top"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #summary { height: 1; padding: 0 1; }
    #gpus { height: auto; max-height: 50%; }
    #filter { display: none; height: 3; }
    #filter.shown { display: block; }
    #procs { height: 1fr; }
    #status { height: 1; padding: 0 1; }
    ConfirmSignal, Detail { align: center middle; }
    #dialog { width: 76; height: auto; border: thick $error; padding: 1 2; background: $surface; }
    #buttons { height: auto; align: center middle; }
    #buttons Button { margin: 1 2 0 2; }
    #detail { width: 90%; height: auto; max-height: 90%; border: round $primary; padding: 0 1; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit_top", "Quit"),
        # Ctrl-C is a key here (the terminal is raw), read as the interrupt it is everywhere else: 130.
        Binding("ctrl+c", "interrupt", "Interrupt", show=False, priority=True),
        Binding("slash", "filter", "Filter"),
        Binding("comma", "sort(-1)", "Sort <"),
        Binding("full_stop", "sort(1)", "Sort >"),
        Binding("r", "reverse", "Reverse"),
        Binding("t", "tree", "Tree"),
        Binding("g", "this_gpu", "This GPU"),
        Binding("enter", "detail", "Detail", show=False),
        Binding("T", "signal('TERM')", "SIGTERM"),
        Binding("K", "signal('KILL')", "SIGKILL"),
        Binding("I", "signal('INT')", "SIGINT"),
        Binding("escape", "clear_filter", "Clear", show=False),
        Binding("tab", "focus_next", "Switch table", show=False),
    ]

    def __init__(
        self,
        source: Source,
        host: LiveHost | ReplayedHost,
        interval: float = DEFAULT_INTERVAL,
        described: str = "",
        cuda: Callable[[Sample, int, int], str] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.host = host
        self.interval = interval
        self.described = described
        self._cuda = cuda
        self.sample: Sample | None = None
        self.sort_column = "mem"
        self.reverse = True
        self.tree_view = False
        self.filter = rows.Filter()
        self.gpu_lines: list[rows.GpuLine] = []
        self.proc_lines: list[rows.ProcLine] = []  # as shown: sorted, filtered, nested
        self._gpu_columns: list[str] = []
        self._proc_columns: list[str] = []
        self._shown: dict[str, list[list[str]]] = {"gpus": [], "procs": []}
        self.message = ""
        self._lines: dict[str, str] = {}
        self._reading_since: float | None = None  # a read in its thread since then

    # --- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="summary")
        yield Table(id="gpus", cursor_type="row", zebra_stripes=False)
        yield Input(
            placeholder="filter: user:NAME gpu:N words (Enter keeps it, Escape clears)",
            id="filter",
            select_on_focus=False,  # `/` adds to the filter (after `g`'s gpu:N), never replaces it
        )
        yield Table(id="procs", cursor_type="row", zebra_stripes=False)
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_sample()  # the first screen from the first sample, before anything else is drawn
        self.query_one("#procs", DataTable).focus()
        self.set_interval(self.interval, self._tick)

    def on_resize(self) -> None:
        self._draw(force=True)

    def columns_for(self, width: int) -> tuple[list[str], list[str]]:
        """The columns that fit: every one from FULL_WIDTH on, the compact set below it (80 columns)."""
        full = width >= rows.FULL_WIDTH
        return (
            [key for key, _, _ in rows.GPU_COLUMNS if full or key not in rows.GPU_COMPACT_HIDDEN],
            [key for key, _, _ in rows.PROC_COLUMNS if full or key not in rows.PROC_COMPACT_HIDDEN],
        )

    def command_width(self, columns: list[str]) -> int:
        """What the other columns (each with its padding) and the scroll bar leave to the command."""
        others = sum(rows.PROC_WIDTHS[c] + 2 for c in columns if c != "command")
        return max(rows.MIN_COMMAND_WIDTH, self.size.width - others - 4)

    # --- data --------------------------------------------------------------------------------

    def _tick(self) -> None:
        """Read the next sample in a thread of its own: a slow or hung NVML call leaves the screen
        answering keys (q still quits), and the status line says how long the read has taken."""
        if self._reading_since is not None:
            waited = time.monotonic() - self._reading_since
            if waited > 2 * self.interval:
                self.say(f"the last read has taken {waited:.0f} s (NVML not answering?); showing the one before")
            return
        self._reading_since = time.monotonic()
        threading.Thread(target=self._read, name="gpudiag-top-read", daemon=True).start()

    def _read(self) -> None:
        try:
            sample, error = self.source.sample(), ""
        except Exception as exc:  # shown on the status line; the last sample stays
            sample, error = None, f"read failed: {type(exc).__name__}: {exc}"
        with contextlib.suppress(RuntimeError):  # the app has ended meanwhile
            self.call_from_thread(self._took, sample, error)

    def _took(self, sample: Sample | None, error: str) -> None:
        self._reading_since = None
        if sample is None:
            self.say(printable(error))
            return
        if self.message.startswith("the last read has taken"):
            self.message = ""
        self._show(sample)

    def refresh_sample(self) -> None:
        """Read and show a sample now (the first one; tests)."""
        self._show(self.source.sample())

    def _show(self, sample: Sample) -> None:
        self.sample = sample
        state = self.source.state
        self.host.forget({p.process.pid for p in self.sample.memory.processes})
        self.gpu_lines = rows.gpu_lines(self.sample, state.util_history)
        self._all_procs = rows.proc_lines(self.sample, state.process_series, self._cuda_of)
        self._draw()

    def _cuda_of(self, gpu: int, pid: int) -> str:
        if self._cuda is None or self.sample is None:
            return ""
        return self._cuda(self.sample, gpu, pid)

    def _arranged(self) -> list[rows.ProcLine]:
        procs = rows.filter_procs(getattr(self, "_all_procs", []), self.filter)
        procs = rows.sort_procs(procs, self.sort_column, self.reverse)
        if self.tree_view:
            procs = rows.tree(procs, self.host.parents([p.pid for p in procs]))
        return procs

    def _draw(self, force: bool = False) -> None:
        if self.sample is None:
            return
        gpu_columns, proc_columns = self.columns_for(self.size.width)
        gpus_table = self.query_one("#gpus", DataTable)
        procs_table = self.query_one("#procs", DataTable)
        if force or gpu_columns != self._gpu_columns:
            self._gpu_columns = gpu_columns
            gpus_table.clear(columns=True)
            for key, label, _ in rows.GPU_COLUMNS:
                if key in gpu_columns:
                    gpus_table.add_column(label, key=key)
            self._shown["gpus"] = []
        if force or proc_columns != self._proc_columns:
            self._proc_columns = proc_columns
            procs_table.clear(columns=True)
            for key, label, _ in rows.PROC_COLUMNS:
                if key in proc_columns:
                    marker = (" v" if self.reverse else " ^") if key == self.sort_column else ""
                    width = self.command_width(proc_columns) if key == "command" else rows.PROC_WIDTHS[key]
                    procs_table.add_column(label + marker, key=key, width=width)
            self._shown["procs"] = []
        self._fill(gpus_table, "gpus", [(str(g.index), gpu_cells(g, gpu_columns)) for g in self.gpu_lines])
        self.proc_lines = self._arranged()
        self._fill(
            procs_table, "procs", [(p.key, proc_cells(p, proc_columns, self.tree_view)) for p in self.proc_lines]
        )
        self._summary()

    def _fill(self, table: DataTable[Any], name: str, lines: list[tuple[str, list[Text]]]) -> None:
        """Rows into ``table``: changed cells only when the rows are the same ones in the same order
        (a refresh of 64 processes then touches a few cells), else the rows anew, the cursor kept."""
        plain = [[cell.plain for cell in cells] for _, cells in lines]
        keys = [key for key, _ in lines]
        before = self._shown[name]
        shown_keys = [row.value for row in table.rows]
        if keys == shown_keys and len(before) == len(plain):
            for (key, cells), old, new in zip(lines, before, plain, strict=True):
                for column, cell, was, now in zip(table.columns, cells, old, new, strict=True):
                    if was != now:
                        table.update_cell(key, column, cell)
        else:
            current = None
            if table.row_count and 0 <= table.cursor_row < table.row_count:
                current = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            table.clear()
            for key, cells in lines:
                table.add_row(*cells, key=key)
            if current in keys:
                table.move_cursor(row=keys.index(current))
        self._shown[name] = plain

    def _summary(self) -> None:
        s = self.sample
        if s is None:
            return
        label = next((label for key, label, _ in rows.PROC_COLUMNS if key == self.sort_column), self.sort_column)
        parts = [
            printable(self.described),
            f"{len(self.gpu_lines)} GPUs",
            f"{len(self.proc_lines)}/{len(getattr(self, '_all_procs', []))} processes",
            f"sort {label}{' desc' if self.reverse else ''}",
        ]
        if self.tree_view:
            parts.append("tree" if self.host.live else "tree (a replay records no parents)")
        if not self.filter.empty:
            parts.append("filter " + printable(self.query_one("#filter", Input).value))
        machine_findings = [r for r in s.health if not r.target and r.status.value in ("WARN", "FAIL")]
        if machine_findings:
            parts.append(f"{machine_findings[0].status.value}: {printable(machine_findings[0].finding)}")
        self._update("#summary", " | ".join(p for p in parts if p), "")
        self._update("#status", self.message or self.filter.error, "bold")

    def _update(self, widget: str, text: str, style: str) -> None:
        """A line's new text, only when it changed (an update lays the screen out again)."""
        if self._lines.get(widget) != text:
            self._lines[widget] = text
            self.query_one(widget, Static).update(Text(text, style=style))

    # --- actions -----------------------------------------------------------------------------

    def action_quit_top(self) -> None:
        self.exit(return_code=0)

    def action_interrupt(self) -> None:
        self.exit(return_code=INTERRUPTED)

    def action_sort(self, step: int) -> None:
        keys = [key for key, _, _ in rows.PROC_COLUMNS if key in self._proc_columns]
        at = keys.index(self.sort_column) if self.sort_column in keys else 0
        self.set_sort(keys[(at + step) % len(keys)])

    def set_sort(self, column: str, reverse: bool | None = None) -> None:
        self.sort_column = column
        if reverse is not None:
            self.reverse = reverse
        self._draw(force=True)

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._draw(force=True)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id != "procs":
            return
        column = str(event.column_key.value)
        self.set_sort(column, (not self.reverse) if column == self.sort_column else self.reverse)

    def action_tree(self) -> None:
        self.tree_view = not self.tree_view
        self._draw()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter = rows.parse_filter(event.value)
        self._draw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#procs", DataTable).focus()
        if not event.value:
            event.input.remove_class("shown")

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.filter = rows.Filter()
        self.query_one("#procs", DataTable).focus()
        self._draw()

    def action_this_gpu(self) -> None:
        gpus_table = self.query_one("#gpus", DataTable)
        if not gpus_table.row_count:
            return
        index = int(str(gpus_table.coordinate_to_cell_key(gpus_table.cursor_coordinate).row_key.value))
        box = self.query_one("#filter", Input)
        words = [w for w in box.value.split() if not w.startswith("gpu:")]
        if f"gpu:{index}" not in box.value.split():
            words.append(f"gpu:{index}")
        box.value = " ".join(words)
        box.add_class("shown")
        self.filter = rows.parse_filter(box.value)
        self._draw()

    def selected(self) -> rows.ProcLine | None:
        table = self.query_one("#procs", DataTable)
        if not self.proc_lines or not 0 <= table.cursor_row < len(self.proc_lines):
            return None
        return self.proc_lines[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A GPU under the cursor: its health findings on the status line."""
        if event.data_table.id != "gpus" or event.row_key.value is None:
            return
        index = int(event.row_key.value)
        line = next((g for g in self.gpu_lines if g.index == index), None)
        if line is not None and event.data_table.has_focus:
            said = "; ".join(line.findings) if line.findings else f"health {line.health}"
            self.say(f"GPU {index}: {printable(said)}")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "procs":
            self.action_detail()
        elif event.data_table.id == "gpus":
            self.action_this_gpu()

    def action_detail(self) -> None:
        if isinstance(self.focused, Input):
            return
        p = self.selected()
        if p is not None and self.sample is not None:
            self.push_screen(Detail(detail_text(self.sample, p, self.host)))

    def action_signal(self, name: str) -> None:
        p = self.selected()
        if p is None:
            return
        refused = self.host.why_not(p.pid)
        if refused:
            self.say(f"PID {p.pid} not signalled: {refused}")
            return
        question = f"Send SIG{name} to PID {p.pid} ({printable(p.user)}: {printable(p.command)[:80]})?"
        asked_about = self.host.started(p.pid)  # the process asked about, not one that reuses its PID later

        def answered(send: bool | None) -> None:
            self.say(self.host.send(p.pid, name, asked_about) if send else f"SIG{name} not sent")

        self.push_screen(ConfirmSignal(question), answered)

    def say(self, message: str) -> None:
        self.message = message
        self._summary()


def detail_text(sample: Sample, p: rows.ProcLine, host: LiveHost | ReplayedHost) -> Text:
    """A process's detail as lines of plain text (outside text escaped)."""
    from gpudiag.top.host import cuda_env
    from gpudiag.trend import duration_text

    lines = [
        f"PID {p.pid} on GPU {p.gpu}{f' ({p.cuda} in the process)' if p.cuda else ''}, user {printable(p.user)}",
        f"command: {printable(p.command)}",
        f"GPU memory: {'-' if p.mem is None else f'{p.mem / (1 << 20):.0f} MiB'}"
        f"{'' if p.mem_percent is None else f' ({p.mem_percent:.1f}% of the GPU)'}"
        f", SM: {'-' if p.sm is None else f'{p.sm}%'}",
    ]
    if p.history:
        n = len(p.history)
        lines.append(f"GPU memory history: {p.history} ({n} sample{'s' * (n > 1)}, against the GPU's memory)")
    environ = host.environ(p.pid)
    if environ is None:
        lines.append("environment: " + ("not recorded in a replay" if not host.live else "not readable"))
    else:
        found = cuda_env(environ)
        lines.append("environment (CUDA, NCCL, torch, ranks):" + ("" if found else " none set"))
        lines += [f"  {printable(k)}={printable(v)}" for k, v in found.items()]
    row = next((r for r in sample.memory.processes if r.key == (p.gpu, p.pid)), None)
    b = row.breakdown if row is not None else None
    if b is None:
        lines.append("allocator: not tracked (gpudiag.track.start() in the program publishes it)")
    else:
        mib = 1 << 20
        lines.append(
            f"allocator (cuda:{b.torch_index}): allocated {b.allocated_bytes / mib:.0f} MiB, "
            f"reserved {b.reserved_bytes / mib:.0f} MiB, cached free {b.cached_free_bytes / mib:.0f} MiB, "
            f"peak {b.peak_allocated_bytes / mib:.0f} MiB, retries {b.alloc_retries}, OOMs {b.ooms}"
        )
        if b.other_bytes is not None:
            lines.append(f"  outside PyTorch's allocator (context, libraries): {b.other_bytes / mib:.0f} MiB")
        if b.fragmentation_percent is not None:
            lines.append(f"  fragmentation: {b.fragmentation_percent:.1f}% of reserved")
    if row is not None and row.steps is not None and row.steps.growth_bytes_per_step is not None:
        lines.append(f"steps: {row.steps.count}, growth {row.steps.growth_bytes_per_step / (1 << 20):.1f} MiB/step")
    for f in sample.memory.forecasts:
        if f.gpu_index == p.gpu and f.pid in (p.pid, None):
            who = "this process" if f.pid is not None else f"GPU {p.gpu}"
            lines.append(f"forecast: {who} fills up in {duration_text(f.full_in_s)} ({f.basis})")
    return Text("\n".join(lines))
