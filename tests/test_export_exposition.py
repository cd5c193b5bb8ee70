"""RowMetric: the exporter's fast families keep rows, yet look like ordinary families to prometheus-client;
outside text in a label or HELP is written printable by both renderers, and data can leave one family
out of a scrape, never the others."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.samples import Sample

from gpudiag.export.exposition import FamilyErrors, RowMetric, TextRenderer, printable_families


class _Collector:
    def __init__(self, families: list[object]) -> None:
        self.families = families

    def collect(self) -> list[object]:
        return self.families


def test_rows_render_as_prometheus_client_renders_them() -> None:
    fast = RowMetric("x_errors", "Errors, with a \\ and\na newline", "counter", ["gpu", "why"])
    fast.rows.append((("0", 'say "hi"\\\n'), 3))
    fast.add_sample("x_errors_total", {"why": "", "gpu": "1"}, 0.5)
    plain = CounterMetricFamily("x_errors", "Errors, with a \\ and\na newline", labels=["gpu", "why"])
    plain.add_metric(["0", 'say "hi"\\\n'], 3)
    plain.add_metric(["1", ""], 0.5)
    assert fast.samples == plain.samples
    assert fast == plain
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(list(printable_families([fast], FamilyErrors()))))  # type: ignore[arg-type]
    renderer = TextRenderer()
    assert renderer.render([fast]) == generate_latest(registry)
    assert renderer.render([fast]) == generate_latest(registry)  # from the remembered prefixes
    # A line break in outside text is the visible \n on both, as on a terminal: one line per sample.
    assert rb'why="say \"hi\"\\\\n"} 3.0' in renderer.render([fast])


def _families() -> list[RowMetric]:
    good = RowMetric("x_good", "doc", "gauge", ["gpu"])
    good.add_row(("0",), 1.0)
    bad = RowMetric("x_bad", "doc", "gauge", ["gpu"])
    bad.add_row(("0",), None)  # type: ignore[arg-type]  # not a number: what data must never do to a scrape
    also = RowMetric("x_also", "doc", "gauge", ["user"])
    also.add_row(("caf\udce9",), 2.0)  # a byte that is not UTF-8: the old renderer raised UnicodeEncodeError
    return [good, bad, also]


def test_a_family_that_cannot_be_written_is_left_out_counted_and_said_once() -> None:
    said: list[str] = []
    errors = FamilyErrors(said.append)
    renderer = TextRenderer(errors)
    for scrape in (1, 2):
        text = renderer.render(_families()).decode("utf-8")
        assert 'x_good{gpu="0"} 1.0' in text and r'x_also{user="caf\\udce9"} 2.0' in text
        assert "x_bad" not in text
        assert errors.count == scrape
    assert len(said) == 1 and said[0].startswith("gpudiag: metrics x_bad left out: TypeError")
    assert renderer.render([errors.metric()]).decode().endswith("gpudiag_metric_family_errors_total 2.0\n")


def test_prometheus_clients_renderer_leaves_out_the_same_family() -> None:
    said: list[str] = []
    errors = FamilyErrors(said.append)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(list(printable_families(_families(), errors))))  # type: ignore[arg-type]
    text = generate_latest(registry).decode("utf-8")
    assert 'x_good{gpu="0"} 1.0' in text and r'x_also{user="caf\\udce9"} 2.0' in text and "x_bad" not in text
    assert errors.count == 1 and len(said) == 1


def test_samples_can_be_replaced_and_wrong_samples_are_refused() -> None:
    fast = RowMetric("y", "doc", "gauge", ["gpu"])
    fast.samples = [Sample("y", {"gpu": "2"}, 1.0)]
    assert fast.rows == [(("2",), 1.0)]
    with pytest.raises(ValueError, match="takes only y"):
        fast.add_sample("y", {"gpu": "0", "extra": "1"}, 1.0)
    with pytest.raises(ValueError, match="takes only y"):
        fast.add_sample("y_total", {"gpu": "0"}, 1.0)


def test_a_bare_counter_is_typed_under_its_own_name_as_dcgm_exporter_writes_it() -> None:
    from gpudiag.export.exposition import BareMetric

    energy = BareMetric("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy (in mJ).", "counter")
    energy.add_sample("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", {"gpu": "0"}, 5.0)
    assert TextRenderer().render([energy]).decode() == (
        "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy (in mJ).\n"
        "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0"} 5.0\n'
    )
    # What prometheus-client's renderer makes of it: a TYPE line for another name, the samples untyped.
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector([energy]))  # type: ignore[arg-type]
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total counter" in generate_latest(registry).decode()


def test_name_filters_keep_the_families_named_by_family_or_sample_name() -> None:
    errors = RowMetric("x_errors", "doc", "counter", ["gpu"])
    errors.rows.append((("0",), 1.0))
    temp = RowMetric("x_temp", "doc", "gauge", ["gpu"])
    temp.rows.append((("0",), 40.0))
    renderer = TextRenderer()
    assert b"x_temp" not in renderer.render([errors, temp], frozenset({"x_errors_total"}))
    assert b"x_errors" not in renderer.render([errors, temp], frozenset({"x_temp"}))
    assert renderer.render([errors, temp], frozenset({"x_errors"})).count(b"# TYPE") == 1
    assert renderer.render([errors, temp], frozenset()) == b""


def test_a_family_written_again_from_equal_rows_is_the_same_text_and_a_changed_one_is_new() -> None:
    """The renderer keeps each family's last text for rows equal to the last: a value that moved,
    a new series or a sign of zero (-0.0 == 0.0) is written afresh."""

    def family(*rows: tuple[str, float]) -> RowMetric:
        made = RowMetric("x_bytes", "X", "gauge", ["gpu"])
        for gpu, value in rows:
            made.add_row((gpu,), value)
        return made

    renderer = TextRenderer()
    first = renderer.render([family(("0", 1.0), ("1", 2.0))])
    assert renderer.render([family(("0", 1.0), ("1", 2.0))]) == first
    assert renderer.render([family(("0", 1.0), ("1", 3.0))]).endswith(b'x_bytes{gpu="1"} 3.0\n')
    assert renderer.render([family(("0", 1.0))]).endswith(b'# TYPE x_bytes gauge\nx_bytes{gpu="0"} 1.0\n')
    assert renderer.render([family(("0", -0.0))]).endswith(b"-0.0\n")
    assert renderer.render([family(("0", 0.0))]).endswith(b" 0.0\n")
    assert renderer.render([family(("0", float("nan")))]) == renderer.render([family(("0", float("nan")))])
