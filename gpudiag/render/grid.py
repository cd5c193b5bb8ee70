"""A table drawn as plain text lines, cheap enough to redraw every second: the memory views' tables."""

from __future__ import annotations

import msgspec
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.text import Text


class Column(msgspec.Struct, frozen=True):
    header: str
    justify: str = "right"  # "left" | "right"
    flexible: bool = False  # takes the width that is left, cut with "…" (one per grid)
    max_width: int | None = None
    drop: int = 0  # when the terminal is too narrow, columns with the highest drop go first (0: never)


class Grid:
    """A table drawn as plain text lines: rich's Table look (header, rule, 3-space gaps), at a
    tenth of its cost, which a refresh every second on a 64-process node needs. Widths come
    from the cells; the flexible column takes what the terminal has left, and optional
    columns are dropped, least useful first, when even that does not fit."""

    GAP = "   "

    def __init__(self, columns: list[Column]) -> None:
        self.columns = columns
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: str | Text) -> None:
        self.rows.append([c if isinstance(c, Text) else Text(c) for c in cells])

    def _widths(self, shown: list[int]) -> dict[int, int]:
        widths = {}
        for i in shown:
            col = self.columns[i]
            natural = max([cell_len(col.header), *(row[i].cell_len for row in self.rows)])
            widths[i] = min(natural, col.max_width) if col.max_width else natural
        return widths

    def lines(self, width: int) -> list[Text]:
        shown = list(range(len(self.columns)))
        widths = self._widths(shown)
        flexible = next((i for i in shown if self.columns[i].flexible), None)

        def total() -> int:
            return sum(widths[i] for i in shown) + len(self.GAP) * (len(shown) - 1)

        droppable = sorted((i for i in shown if self.columns[i].drop), key=lambda i: -self.columns[i].drop)
        while total() > width and droppable:
            if flexible is not None:
                floor = max(cell_len(self.columns[flexible].header), 12)
                if total() - widths[flexible] + floor <= width:
                    break
            shown.remove(droppable.pop(0))
        if flexible is not None and total() > width:
            widths[flexible] = max(cell_len(self.columns[flexible].header), widths[flexible] - (total() - width))
            if total() > width:  # what is left are the identity columns (GPU, PID, memory): they stay whole
                shown.remove(flexible)
        out = [self._line([Text(self.columns[i].header, style="bold") for i in shown], shown, widths)]
        out.append(Text("─" * min(total(), width)))
        out += [self._line([row[i] for i in shown], shown, widths) for row in self.rows]
        return out

    def _line(self, cells: list[Text], shown: list[int], widths: dict[int, int]) -> Text:
        line = Text(no_wrap=True, overflow="crop", end="")
        for n, (cell, i) in enumerate(zip(cells, shown, strict=True)):
            cell = cell.copy()
            last = n == len(shown) - 1
            cell.truncate(widths[i], overflow="ellipsis")
            if not (last and self.columns[i].justify == "left"):  # no trailing blanks
                cell.align("left" if self.columns[i].justify == "left" else "right", widths[i])
            if n:
                line.append(self.GAP)
            line.append_text(cell)
        line.rstrip()
        return line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            if options.ascii_only:  # a Latin-1 or ASCII terminal: the rule, bars and sparklines in ASCII
                line.plain = line.plain.translate(_ASCII)
            yield from line.render(console)
            yield Segment.line()


_ASCII = str.maketrans("─█░▁▂▃▄▅▆▇└", "-#._.,-=+*`")
