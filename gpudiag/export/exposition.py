"""Prometheus text format 0.0.4 for the exporter's scrapes, with each series' name and labels
formatted once and reused while the series lives.

prometheus-client's ``generate_latest`` validates and escapes every label of every sample on
every scrape: for a busy 8-GPU node that is most of the scrape's CPU. The families are the same
prometheus-client objects either way; OpenMetrics requests for the native family still go to
prometheus-client.

A counter's samples are named ``<name>_total``, except a :class:`BareMetric`'s: dcgm-exporter
types some fields as counters under names without the suffix, and the text format 0.0.4 allows
that (``# TYPE X counter`` over samples named ``X``), whereas OpenMetrics and prometheus-client's
own renderer do not (they would type ``X_total``, leaving the ``X`` samples untyped). Such
families are only ever rendered here.

Label values and HELP texts carry text from outside (process names and users, GPU names, a check's
finding): each is written as :func:`gpudiag.render.printable.printable` shows it, every control,
bidi override and undecodable byte (a lone surrogate) as its escape (``\\x1b``, ``\\udcff``), whose
backslash the format's own escaping then doubles, so a scrape is always printable UTF-8 and
Prometheus reads the value back as that visible text. Here for this renderer (once per series: the
prefix cache), in :func:`printable_families` for prometheus-client's (``memory --prometheus``,
``--textfile``, OpenMetrics). Data can leave a family out, never the scrape: a family that cannot
be built or written is dropped, counted (:class:`FamilyErrors`, ``gpudiag_metric_family_errors_total``)
and said on stderr.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from gpudiag.render.printable import printable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}
_MAX_CACHED = 20_000  # series; beyond this (PID churn) the cache starts afresh


def _escape_value(value: str) -> str:
    # printable() leaves no line break: the format's escapes left are the backslash and the quote.
    return printable(value).replace("\\", r"\\").replace('"', r"\"")


def _escape_help(text: str) -> str:
    return printable(text).replace("\\", r"\\")


def _number(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


class RowMetric(Metric):
    """A family whose label names are fixed and whose samples are kept as rows of (label values,
    value): a scrape adds hundreds, and neither a Sample nor a labels dict is made for the text
    format. prometheus-client (OpenMetrics, name filters, tests) sees ordinary Samples."""

    def __init__(self, name: str, documentation: str, typ: str, labels: list[str], bare: bool = False) -> None:
        self.rows: list[tuple[tuple[str, ...], float]] = []
        super().__init__(name, documentation, typ)
        self.label_names = tuple(labels)
        # ``bare``: a counter's samples carry its own name, as BareMetric's (dcgm-exporter's convention).
        self.sample_name = name + "_total" if typ == "counter" and not bare else name

    def add_row(self, values: tuple[str, ...], value: float) -> None:
        """A sample by its label values, in ``label_names``' order (the caller made them)."""
        self.rows.append((values, value))

    @property  # a view of the rows; Metric.__init__ assigns [] to it (the setter)
    def samples(self) -> list[Sample]:
        names = self.label_names
        return [Sample(self.sample_name, dict(zip(names, values, strict=True)), v) for values, v in self.rows]

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self.rows = [(tuple(s.labels[n] for n in self.label_names), s.value) for s in samples]

    def add_sample(self, name: str, labels: dict[str, str], value: float, *args: Any, **kwargs: Any) -> None:
        if name != self.sample_name or set(labels) != set(self.label_names) or args or kwargs:
            raise ValueError(f"{self.name} takes only {self.sample_name}{{{', '.join(self.label_names)}}} samples")
        self.rows.append((tuple(labels[n] for n in self.label_names), value))


class BareMetric(Metric):
    """A family whose samples carry its own name, a counter's too (dcgm-exporter's convention)."""

    @property
    def sample_name(self) -> str:
        return str(self.name)


def exposed_name(family: Any) -> str:
    """The name a family's ``# TYPE`` line carries in the text format 0.0.4: its samples' name."""
    if isinstance(family, (RowMetric, BareMetric)):
        return str(family.sample_name)
    return str(family.name + "_total" if family.type == "counter" else family.name)


ERRORS_NAME = "gpudiag_metric_family_errors"
ERRORS_HELP = "Metric families left out of a scrape because they could not be built or written (stderr says why)"


_WHY_CHARS = 300  # of an error's message on stderr: one line, whatever the data held


def _say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class FamilyErrors:
    """Families left out because building or writing them failed: counted for
    ``gpudiag_metric_family_errors_total`` and said on stderr, once per family and kind of error
    (a family that fails on every scrape would otherwise flood the log)."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.count = 0
        self._say = say or _say_on_stderr
        self._said: set[tuple[str, str]] = set()

    def add(self, what: str, error: Exception) -> None:
        self.count += 1
        key = (what, type(error).__name__)
        if key not in self._said:
            self._said.add(key)
            why = str(error)[:_WHY_CHARS]
            self._say(printable(f"gpudiag: metrics {what} left out: {type(error).__name__}: {why}"))

    def built(self, what: str, build: Callable[[], list[Any]]) -> list[Any]:
        """``build()``'s families, or none (counted and said) when it raises."""
        try:
            return build()
        except Exception as error:  # data must not take the other families down
            self.add(what, error)
            return []

    def metric(self) -> RowMetric:
        family = RowMetric(ERRORS_NAME, ERRORS_HELP, "counter", [])
        family.add_row((), float(self.count))
        return family


def _printable_family(family: Any) -> Any:
    """``family`` with its label values and HELP as the exposition writes them (see the module);
    the same object when they are printable already. Raises on a family that cannot be written."""
    doc = printable(family.documentation)
    if isinstance(family, RowMetric):
        rows = [(tuple(printable(v) for v in values), float(value)) for values, value in family.rows]
        if doc == family.documentation and rows == family.rows:
            return family
        copy = RowMetric(family.name, doc, family.type, list(family.label_names))
        copy.sample_name, copy.rows = family.sample_name, rows
        return copy
    samples = [
        s._replace(labels={k: printable(v) for k, v in s.labels.items()}, value=float(s.value)) for s in family.samples
    ]
    if doc == family.documentation and samples == family.samples:
        return family
    kind = BareMetric if isinstance(family, BareMetric) else Metric
    plain = kind(family.name, doc, family.type)
    plain.samples = samples
    return plain


def printable_families(families: Iterable[Any], errors: FamilyErrors) -> Iterator[Any]:
    """Families for prometheus-client's renderers, written as this module's renderer writes them:
    each one that cannot be written (a value that is not a number, a label that is not text) left
    out and counted in ``errors``, not the whole output."""
    for family in families:
        try:
            yield _printable_family(family)
        except Exception as error:
            errors.add(str(getattr(family, "name", "?")), error)


class TextRenderer:
    """Renders metric families; remembers each series' ``name{labels}`` prefix."""

    def __init__(self, errors: FamilyErrors | None = None) -> None:
        self.errors = errors or FamilyErrors()
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        # RowMetric series: by (sample name, label names), then by label values.
        self._row_prefixes: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], str]] = {}
        self._row_count = 0
        # Each RowMetric family's last text, by (name, type, HELP), with the rows it was written from:
        # most of a scrape's families (sizes, limits, identity, counters that did not move) are
        # written again from equal rows, and then their text is the same bytes.
        self._written: dict[tuple[str, str, str], tuple[list[tuple[tuple[str, ...], float]], bytes]] = {}

    def _row_lines(self, family: RowMetric, out: list[str]) -> None:
        isfinite = math.isfinite
        key = (family.sample_name, family.label_names)
        prefixes = self._row_prefixes.get(key)
        if prefixes is None:
            prefixes = self._row_prefixes[key] = {}
        for values, value in family.rows:
            prefix = prefixes.get(values)
            if prefix is None:
                if self._row_count >= _MAX_CACHED:
                    self._row_prefixes.clear()
                    self._row_count = 0
                    prefixes = self._row_prefixes[key] = {}
                labels = zip(family.label_names, values, strict=True)
                prefix = prefixes[values] = self._prefix_text(family.sample_name, labels)
                self._row_count += 1
            out.append(f"{prefix}{repr(float(value)) if isfinite(value) else _number(value)}\n")

    @staticmethod
    def _prefix_text(name: str, labels: Iterable[tuple[str, str]]) -> str:
        inner = ",".join(f'{k}="{_escape_value(v)}"' for k, v in labels)
        return f"{name}{{{inner}}} " if inner else f"{name} "

    def _prefix(self, name: str, labels: dict[str, str]) -> str:
        key = (name, tuple(labels.items()))
        prefix = self._prefixes.get(key)
        if prefix is None:
            if len(self._prefixes) >= _MAX_CACHED:
                self._prefixes.clear()
            prefix = self._prefixes[key] = self._prefix_text(name, labels.items())
        return prefix

    def render(self, families: Iterable[Any], names: frozenset[str] | None = None) -> bytes:
        """The families as text; with ``names`` (a scrape's ``name[]`` parameters), only the
        families whose name, or whose samples' name, is one of them."""
        written: list[bytes] = []
        for family in families:
            name = exposed_name(family)
            if names is not None and name not in names and family.name not in names:
                continue
            try:
                written.append(self._family(name, family))
            except Exception as error:  # this family's data: the others are still served
                self.errors.add(name, error)
        return b"".join(written)

    def _family(self, name: str, family: Any) -> bytes:
        if isinstance(family, RowMetric):
            key = (name, family.type, family.documentation)
            last = self._written.get(key)
            if last is not None and last[0] == family.rows:
                return last[1]
            text = self._written_family(name, family)
            if not any(v == 0 and math.copysign(1.0, v) < 0 for _, v in family.rows):  # -0.0 == 0.0
                self._written[key] = (family.rows, text)
            return text
        return self._written_family(name, family)

    def _written_family(self, name: str, family: Any) -> bytes:
        out = [f"# HELP {name} {_escape_help(family.documentation)}\n"]
        out.append(f"# TYPE {name} {_TYPES.get(family.type, 'untyped')}\n")
        if isinstance(family, RowMetric):
            self._row_lines(family, out)
        else:
            for sample in family.samples:
                out.append(self._prefix(sample.name, sample.labels) + _number(sample.value) + "\n")
        return "".join(out).encode()
