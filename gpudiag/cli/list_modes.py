"""What one `gpudiag list` sample shows, chosen from its options: shared by one sample and --watch.

Between the command (`list_cmd`, which parses) and the watch loop (`list_watch`, which repeats),
so neither imports the other. Each output mode is a :class:`View`: the fact groups it reads,
and how it turns a machine into text (the rich table is the one that prints through a console).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec.structs import replace

from gpudiag.cli import plain
from gpudiag.errors import UsageError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import ALL_GROUPS, FactGroup, Gpu, Machine, NvmlStatus, Reading
from gpudiag.selection import GpuSelection, parse_selection, select_gpus
from gpudiag.serialize import to_data

# What `-q` and `-q -x` show none of (tests/test_read_what_is_shown.py holds it on every example), so
# they do not ask NVML for it: GPM, which also waits 0.1 s; what `-q` shows of the clocks, codecs and
# the rest it reads with the details.
NOT_IN_DETAILS = frozenset(
    {
        FactGroup.PROFILING,
        FactGroup.CAPABILITY,
        FactGroup.CLOCKS,
        FactGroup.CODECS,
        FactGroup.ENERGY,
        FactGroup.MEMORY_TEMPERATURE,
        FactGroup.MIG_LAYOUT,
        FactGroup.NVLINK_TRAFFIC,
        FactGroup.PCIE_REPLAYS,
        FactGroup.PCIE_TRAFFIC,
        FactGroup.VGPU,
        FactGroup.VIOLATIONS,
    }
)


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """The options of one `gpudiag list`, as given."""

    json_output: bool = False
    ids: str | None = None
    no_processes: bool = False
    details: bool = False
    display: str | None = None
    xml: bool = False
    list_gpus: bool = False
    query: str | None = None
    query_apps: str | None = None
    query_retired: str | None = None
    query_remapped: str | None = None
    query_clocks: str | None = None
    output_format: str | None = None
    filename: str | None = None
    watch: bool = False
    interval: float = 2.0
    count: int | None = None

    def lists(self) -> dict[str, str | None]:
        """The list queries asked for, by option."""
        return {
            "--query-compute-apps": self.query_apps,
            "--query-retired-pages": self.query_retired,
            "--query-remapped-rows": self.query_remapped,
            "--query-supported-clocks": self.query_clocks,
        }


def validate(r: Request) -> GpuSelection | None:
    """Options that do not go together, or not without another: usage errors before anything is read.
    The GPUs ``--id`` names, parsed (None: every GPU)."""
    from gpudiag.units import interval as interval_option

    # --json goes with any mode (the document); the other outputs exclude each other.
    modes = [
        ("--query", r.query is not None),
        *((option, spec is not None) for option, spec in r.lists().items()),
        ("--list-gpus", r.list_gpus),
        ("--details", r.details),
    ]
    chosen = [name for name, on in modes if on]
    if len(chosen) > 1:
        raise UsageError(f"choose one of {' and '.join(chosen)}")
    queries = r.query is not None or any(spec is not None for spec in r.lists().values())
    if r.output_format is not None and not queries:
        raise UsageError(
            "--format goes with --query, --query-compute-apps, --query-retired-pages, "
            "--query-remapped-rows or --query-supported-clocks"
        )
    if (r.display is not None or r.xml) and not r.details:
        raise UsageError(f"{'--display' if r.display is not None else '--xml-format'} goes with --details (-q)")
    if r.xml and r.json_output:
        raise UsageError("choose one of --xml-format and --json")
    if r.display is not None and (r.xml or r.json_output):
        raise UsageError("--display filters the -q text: nvidia-smi takes no -d with -x, and --json holds everything")
    if (r.interval != 2.0 or r.count is not None) and not r.watch:
        raise UsageError("--interval and --count go with --watch")
    if r.filename is not None and r.watch:
        raise UsageError("--filename writes one sample: with --watch, redirect the output instead")
    interval_option(r.interval, "--interval")
    if r.count is not None and r.count < 1:
        raise UsageError("--count must be at least 1")
    return parse_selection(r.ids)


class View:
    """What one sample prints and the facts it reads. ``kind``: table (rich), json (the machine),
    details (-q text), xml (-q -x), gpus (-L), csv (--query-gpu), list (a list query); ``as_json``
    turns the last three into JSON documents."""

    def __init__(
        self,
        kind: str,
        facts: frozenset[FactGroup],
        only: frozenset[str] | None = None,
        selection: GpuSelection | None = None,
        **how: Any,
    ) -> None:
        self.kind = kind
        self.facts = facts
        self.only = only  # of the facts' rows, the ones shown (None: all of them)
        self.selection = selection  # the GPUs shown (None: every GPU)
        self.how = how  # the mode's own settings: the query read (query.parse.Parsed), display sections
        self.as_json = bool(how.get("as_json"))
        self.show_processes = bool(how.get("show_processes", True))

    @property
    def plain(self) -> bool:
        return self.kind != "table"

    @property
    def json_lines(self) -> bool:
        """Whether a sample is one JSON document (JSON Lines under --watch)."""
        return self.kind == "json" or self.as_json

    def text(self, machine: Machine, gpus: tuple[Gpu, ...], first: bool, lines: bool = False) -> str:
        """One sample's text; ``first``: the first of a watch (CSV keeps one header); ``lines``: one
        JSON document per line."""
        if self.json_lines:
            import json  # only with --json: ~1.5 ms of start-up otherwise

            data = self._document(machine, gpus)
            return json.dumps(data, separators=(",", ":")) + "\n" if lines else json.dumps(data, indent=2) + "\n"
        if self.kind in ("csv", "list"):
            return self._csv(machine, gpus, first)
        if self.kind == "gpus":
            from gpudiag.render import gpu_list

            return gpu_list.render(machine, gpus)
        if self.kind == "xml":
            from gpudiag.render.details_xml import render as render_xml

            return render_xml(machine, gpus)
        from gpudiag.render.details_view import render

        return render(machine, gpus, self.how.get("display"))

    def _document(self, machine: Machine, gpus: tuple[Gpu, ...]) -> Any:
        if self.kind == "json":
            return to_data(replace(machine, gpus=gpus))
        if self.kind == "gpus":
            from gpudiag.render import gpu_list

            return gpu_list.document(machine, gpus)
        from gpudiag.render import csv_query

        asked = self.how["query"]
        if asked.listed is None:
            headers = [(c.typed, c.field.unit) for c in asked.columns]
            return csv_query.document(asked.option, headers, csv_query.cells(machine, gpus, asked.columns))
        from gpudiag.render import csv_lists

        headers = [(typed, f.unit) for typed, f in asked.columns]
        return csv_query.document(
            asked.option, headers, csv_lists.rows(asked.listed, machine, gpus, asked.columns, False)
        )

    def _csv(self, machine: Machine, gpus: tuple[Gpu, ...], first: bool) -> str:
        asked = self.how["query"]
        fmt = asked.format if first else replace(asked.format, header=False)
        if asked.listed is None:
            from gpudiag.render import csv_query

            return csv_query.render_csv(machine, gpus, asked.columns, fmt)
        from gpudiag.render import csv_lists

        return csv_lists.render_csv(asked.listed, machine, gpus, asked.columns, fmt)

    @property
    def escaped(self) -> bool:
        """Whether the text is safe for a terminal as it is: JSON is ASCII by construction, and the XML
        renderer escapes every value (its tabs must stay tabs)."""
        return self.json_lines or self.kind == "xml"

    def echo(self, text: str) -> None:
        """CSV, -q and -L carry outside text: through the guard; JSON and XML are escaped already."""
        if self.escaped:
            plain.write(text)
        else:
            plain.echo(text, nl=False)

    def renderable(self, machine: Machine, gpus: tuple[Gpu, ...], console: Any) -> Any:
        from gpudiag.render.list_view import render

        return render(machine, gpus, console, show_processes=self.show_processes)

    def show(self, machine: Machine, gpus: tuple[Gpu, ...], s: Any, filename: str | None = None) -> None:
        """One sample to stdout, or whole into ``filename`` (written atomically)."""
        if filename is None:
            if self.plain:
                self.echo(self.text(machine, gpus, first=True))
            else:
                from gpudiag.cli.common import make_console  # the table: rich and typer's edge

                console = make_console(s)
                console.print(self.renderable(machine, gpus, console))
            return
        if self.plain:
            from gpudiag.render.printable import guard

            text = self.text(machine, gpus, first=True)
            document = text if self.escaped else guard(text)
        else:
            from gpudiag.cli.common import make_console

            buffer = io.StringIO()
            console = make_console(s, file=buffer)
            console.print(self.renderable(machine, gpus, console))
            document = buffer.getvalue()
        from pathlib import Path

        from gpudiag.files import write_atomic

        write_atomic(Path(filename), document)  # whole or not at all; a full disk is exit 74


def prepare(r: Request) -> View:
    """The view the options ask for, once every usage error is raised (:func:`validate`)."""
    return view_for(r, validate(r))


def view_for(r: Request, selection: GpuSelection | None = None) -> View:
    """The view the options ask for (they were validated; ``selection``: what ``--id`` names)."""
    queries = {option: spec for option, spec in (("--query-gpu", r.query), *r.lists().items()) if spec is not None}
    if queries:
        from gpudiag.query.parse import parse

        asked = parse(*next(iter(queries.items())), r.output_format or "csv")
        only = asked.rows
        if only is not None and selection is not None:
            only |= selection.reads  # what matching its entries reads
        kind = "csv" if asked.listed is None else "list"
        return View(kind, asked.facts, only, selection, query=asked, as_json=r.json_output)
    if r.list_gpus:
        return View("gpus", frozenset({FactGroup.MIG}), selection=selection, as_json=r.json_output)
    if r.json_output:
        # Every fact; the details (~130 NVML calls per GPU, more with NVLink), GPM's window and the InfoROM's
        # checksum (nvmlDeviceValidateInforom: 70 ms a GPU on the H200, twice the rest of an 8-GPU document)
        # only with --details.
        quick = ALL_GROUPS - {FactGroup.DETAILS, FactGroup.LINKS, FactGroup.PROFILING, FactGroup.INFOROM}
        return View("json", ALL_GROUPS if r.details else quick, selection=selection)
    if r.details:
        shown = ALL_GROUPS - NOT_IN_DETAILS
        if r.xml:
            # nvidia-smi's XML has no InfoROM checksum (only -q's text shows gpudiag's line): not asked
            return View("xml", shown - {FactGroup.INFOROM}, selection=selection)
        display = None
        if r.display is not None:
            from gpudiag.render.details_view import display_sections

            display = display_sections(r.display)
        return View("details", shown, selection=selection, display=display)
    from gpudiag.render.list_view import GROUPS

    facts = GROUPS - {FactGroup.PROCESSES} if r.no_processes else GROUPS
    return View("table", facts, selection=selection, show_processes=not r.no_processes)


def check_nvml(machine: Machine, view: View) -> None:
    """NVML that did not start ends the command (its exit code); a JSON document says why too."""
    if machine.nvml.status is not NvmlStatus.OK and view.kind == "json":
        import json  # only with --json: ~1.5 ms of start-up otherwise

        plain.write(json.dumps(to_data(machine), indent=2) + "\n")
    plain.require_nvml(machine.nvml)


def once(s: plain.Settings, r: Request, read: Callable[..., Machine] | None = None) -> None:
    """One sample of what ``r`` asks, printed; a lost GPU's line and exit code after it. The Typer
    command and the plain front (cli.plain_front) both run it; ``read``: the public API's read."""
    if read is None:
        from gpudiag.api import read_machine

        read = read_machine
    view = prepare(r)
    machine = read(s.replay, facts=view.facts, only=view.only)
    check_nvml(machine, view)
    gpus = selected(machine, view.selection, r.no_processes)
    view.show(machine, gpus, s, r.filename)
    line = plain.lost_line(gpus)
    if line is not None:
        plain.say(line)
        raise SystemExit(int(ExitCode.GPU_LOST))


def selected(machine: Machine, selection: GpuSelection | None, no_processes: bool) -> tuple[Gpu, ...]:
    gpus = select_gpus(machine.gpus, selection)
    if no_processes:
        gpus = tuple(replace(g, processes=Reading.of(())) if g.processes.ok else g for g in gpus)
    return gpus
