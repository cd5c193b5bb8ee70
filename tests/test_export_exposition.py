"""RowMetric: the exporter's fast families keep rows, yet look like ordinary families to prometheus-client."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.samples import Sample

from gpudiag.export.exposition import RowMetric, TextRenderer


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
    registry.register(_Collector([fast]))  # type: ignore[arg-type]
    renderer = TextRenderer()
    assert renderer.render([fast]) == generate_latest(registry)
    assert renderer.render([fast]) == generate_latest(registry)  # from the remembered prefixes


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
