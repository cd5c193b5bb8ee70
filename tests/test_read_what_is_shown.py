"""A machine-readable output asks NVML only for what it prints: `--query` for the rows of its fields,
`-q` and `-q -x` for the groups they show; and what each prints is what a read of everything prints."""

from __future__ import annotations

import collections

import pytest

from gpudiag.cli.list_modes import NOT_IN_DETAILS, Request, View, prepare, selected, view_for
from gpudiag.model import ALL_GROUPS, FactGroup
from gpudiag.query import gpu_fields
from gpudiag.readings import group_readings
from gpudiag.replay.fixtures import example_names
from gpudiag.sources import open_source

QUERY_7 = "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu"
RICH = ("h100-driver580-busy", "a100-mig", "gpu-lost")  # every group recorded; MIG; a lost GPU


def _calls(example: str, view: View) -> collections.Counter[str]:
    """The NVML calls one read of ``view``'s facts makes, past discovery."""
    with open_source(example, facts=view.facts, only=view.only) as source:
        source.lib._calls.clear()
        source.read()
        return collections.Counter(source.lib._calls)


def _text(
    example: str,
    view: View,
    only: frozenset[str] | None,
    facts: frozenset[FactGroup] | None = None,
) -> str:
    with open_source(example, facts=view.facts if facts is None else facts, only=only) as source:
        machine = source.read()
    return view.text(machine, selected(machine, view.selection, False), first=True)


def test_a_query_asks_nvml_for_its_fields_only() -> None:
    calls = _calls("h100x8-healthy", view_for(Request(query=QUERY_7)))
    assert set(calls) == {
        "nvmlDeviceGetUUID",  # asked for, and the call that finds a GPU lost since discovery
        "nvmlDeviceGetName",
        "nvmlDeviceGetMemoryInfo",  # the fake counts the _v2 call and the one it forwards to
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetTemperature",  # not the fan or the two thresholds of the thermal group
    }  # nor the bus id and minor number, which it does not print
    assert sum(calls.values()) == 6 * 8


def test_a_query_with_id_reads_what_the_selection_matches() -> None:
    ids = "00000000:2A:00.0,GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2001"  # GPU 1 by bus id, by UUID
    view = prepare(Request(query="index,name", ids=ids))
    assert {"nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo"} <= set(_calls("h100x8-healthy", view))
    text = _text("h100x8-healthy", view, view.only)
    assert text == "index, name\n1, NVIDIA H100 80GB HBM3\n"
    assert text == _text("h100x8-healthy", view, None)


def test_a_query_with_indices_reads_no_more_than_without_them() -> None:
    view = prepare(Request(query="index,name", ids="3,1"))
    assert view.only == prepare(Request(query="index,name")).only  # the index is always read
    assert _calls("h100x8-healthy", view) == _calls("h100x8-healthy", prepare(Request(query="index,name")))
    text = _text("h100x8-healthy", view, view.only)
    assert text == "index, name\n3, NVIDIA H100 80GB HBM3\n1, NVIDIA H100 80GB HBM3\n"
    assert text == _text("h100x8-healthy", view, None)


def test_details_views_ask_for_no_group_they_do_not_show() -> None:
    for request in (Request(details=True), Request(details=True, xml=True)):
        view = view_for(request)
        assert not view.facts & NOT_IN_DETAILS
        calls = _calls("h100-driver580-busy", view)
        assert not any(call.startswith("nvmlGpm") for call in calls)  # no GPM window either


def _every_field_alike(example: str, shared: bool = False) -> None:
    """Each field alone, read for its rows only, prints what a read of its whole groups prints;
    ``shared``: only the fields whose group has other rows (where the reads differ)."""
    own = (gpu_fields.field(name) for name in gpu_fields.own_names())
    for field in (*gpu_fields.fields(), *filter(None, own)):
        if field.answer is None or (shared and (field.group is None or len(group_readings(field.group)) < 2)):
            continue
        view = view_for(Request(query=field.name, output_format="csv,noheader"))
        assert view.only is not None
        assert _text(example, view, view.only) == _text(example, view, None), (example, field.name)


def test_each_field_prints_what_a_read_of_its_whole_group_prints() -> None:
    _every_field_alike("h100-driver580-busy", shared=True)


@pytest.mark.slow
@pytest.mark.parametrize("example", RICH)
def test_each_field_prints_alike_on_mig_and_a_lost_gpu(example: str) -> None:
    _every_field_alike(example)


def _details_alike(example: str) -> None:
    everything = ALL_GROUPS - {FactGroup.PROFILING}
    for request in (Request(details=True), Request(details=True, xml=True)):
        view = view_for(request)
        assert _text(example, view, None) == _text(example, view, None, everything), (example, request)


@pytest.mark.parametrize("example", RICH)
def test_details_views_print_what_a_read_of_every_group_prints(example: str) -> None:
    _details_alike(example)


@pytest.mark.slow
def test_details_views_print_alike_on_every_example() -> None:
    for example in sorted(set(example_names()) - set(RICH)):
        _details_alike(example)
