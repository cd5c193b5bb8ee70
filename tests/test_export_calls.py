"""What one exporter scrape asks NVML: on a real driver each C call costs ~0.3 ms of CPU
(gpudiag.replay.call_costs), so the count per scrape is held here and must not grow back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from gpudiag.export.exporter import Exporter
from gpudiag.model import Reading, Reason
from gpudiag.probe.collect import MachineSource
from gpudiag.replay.fixtures import load
from gpudiag.sources import open_source

EXAMPLE = "h100x8-training-64procs"  # 8 GPUs, 64 processes
# The fake's count of a steady scrape (the fixed facts, GPM's support and the Xid event set asked,
# the slow rows kept): 21 calls a GPU natively (20 C calls: the fake counts nvmlDeviceGetMemoryInfo_v2
# and the v1 name it answers through), 13 for dcgm-exporter's fields, and the session's count and
# Xid poll. Before the ECC totals came as field values and the UUID once: 26 and 21.
BUDGET = {"native": 8 * 21 + 2, "dcgm": 8 * 13 + 2}


@pytest.fixture
def source() -> Iterator[MachineSource]:
    with open_source(EXAMPLE) as opened:
        yield opened


def _steady_scrape(exporter: Exporter) -> Counter[str]:
    for _ in range(5):  # the first asks what cannot change; GPM fills its pool of samples
        exporter.render_text()
    lib = exporter.source.lib
    before = len(lib.calls)
    exporter.render_text()
    return Counter(lib.calls[before:])


@pytest.mark.parametrize("compat", ["native", "dcgm"])
def test_a_steady_scrape_stays_within_its_nvml_call_budget(source: MachineSource, compat: str) -> None:
    calls = _steady_scrape(Exporter(source, compat=compat, hostname="node-a"))
    assert sum(calls.values()) <= BUDGET[compat], calls


def test_the_uuid_is_asked_once_per_nvml_session(source: MachineSource) -> None:
    """A GPU's UUID never changes; a GPU lost since the last scrape fails the scrape's next call."""
    exporter = Exporter(source, hostname="node-a")
    assert _steady_scrape(exporter)["nvmlDeviceGetUUID"] == 0
    source.session.reopen()  # NVML restarted under the exporter: new handles, the UUIDs asked again
    before = len(source.lib.calls)
    text = exporter.render_text()
    assert source.lib.calls[before:].count("nvmlDeviceGetUUID") == 8
    assert text.count(b"gpudiag_gpu_lost{") == 8 and b'uuid="GPU-' in text


def test_dcgm_fields_ask_nothing_they_do_not_export(source: MachineSource) -> None:
    calls = _steady_scrape(Exporter(source, compat="dcgm", hostname="node-a"))
    assert not {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetEnforcedPowerLimit"} & set(calls)
    assert calls["nvmlDeviceGetClockInfo"] == 2 * 8  # SM and memory: DCGM exports no graphics clock


@pytest.mark.parametrize("compat", ["native", "dcgm"])
def test_ecc_totals_come_with_the_other_field_values(source: MachineSource, compat: str) -> None:
    """Fields 3-6 (NVML_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL) in the one field-value call a GPU's scrape
    makes anyway, not four nvmlDeviceGetTotalEccErrors calls; the text is what the calls gave."""
    exporter = Exporter(source, compat=compat, hostname="node-a")
    with open_source(EXAMPLE) as other:
        by_call = Exporter(other, compat=compat, hostname="node-a")
        other.session.as_fields = ()  # after the exporter set it: each total by its own call
        assert by_call.render_text() == exporter.render_text()  # each one's first scrape
        assert other.lib.calls.count("nvmlDeviceGetTotalEccErrors") == 4 * 8
    calls = _steady_scrape(exporter)
    assert "nvmlDeviceGetTotalEccErrors" not in calls and calls["nvmlDeviceGetFieldValues"] == 8


def test_an_ecc_field_one_board_does_not_answer_is_that_reading_alone(source: MachineSource) -> None:
    """Each field value has its own nvmlReturn: GPU 2 not answering the uncorrected volatile total
    leaves that one series out, never its other totals, the other field values or the other GPUs."""
    base = load(EXAMPLE)[0]
    gpus = list(base.gpus)
    errors = msgspec.structs.replace(gpus[2].ecc_errors, volatile_uncorrected=Reading.missing(Reason.NOT_SUPPORTED))
    gpus[2] = msgspec.structs.replace(gpus[2], ecc_errors=errors)
    source.lib.set_machine(msgspec.structs.replace(base, gpus=tuple(gpus)))
    text = Exporter(source, hostname="node-a").render_text().decode()
    ecc = [line for line in text.splitlines() if line.startswith("gpudiag_gpu_ecc_errors_total{")]
    assert len(ecc) == 4 * 8 - 1
    assert not [line for line in ecc if 'gpu="2"' in line and 'error="uncorrected",counter="volatile"' in line]
    assert len([line for line in ecc if 'gpu="2"' in line]) == 3
    assert text.count('gpudiag_gpu_energy_joules_total{gpu="2"') == 1


def _processes(exporter: Exporter) -> list[Any]:
    machine, _view = exporter.sample()
    return [p for g in machine.gpus for p in g.processes.get(())]


def test_a_steady_scrape_builds_no_process_it_built_before(source: MachineSource) -> None:
    """A process NVML describes as at the last read, with the same host view, is the same object (the
    memory view and attribution then find it unchanged); one whose memory moved is built anew."""
    exporter = Exporter(source, hostname="node-a")
    first, second = _processes(exporter), _processes(exporter)
    assert len(first) == 64 and all(a is b for a, b in zip(first, second, strict=True))
    base = load(EXAMPLE)[0]
    gpus = list(base.gpus)
    procs = list(gpus[1].processes.get(()))
    procs[0] = msgspec.structs.replace(procs[0], used_memory_bytes=Reading.of(123 << 20))
    gpus[1] = msgspec.structs.replace(gpus[1], processes=Reading.of(tuple(procs)))
    source.lib.set_machine(msgspec.structs.replace(base, gpus=tuple(gpus)))
    third = _processes(exporter)
    changed = [i for i, (a, b) in enumerate(zip(second, third, strict=True)) if a is not b]
    assert len(changed) == 1 and third[changed[0]].used_memory_bytes.value == 123 << 20


def test_the_checks_a_scrape_judges_are_chosen_once(source: MachineSource, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which checks the exporter judges does not change between scrapes: matching every check's id
    against the patterns (a tenth of a millisecond) is done once, not per scrape."""
    from gpudiag.checks import rules

    exporter = Exporter(source, hostname="node-a")
    _steady_scrape(exporter)
    first = exporter.render_text()
    matched: list[str] = []
    real = rules.selected
    monkeypatch.setattr(rules, "selected", lambda check_id, *rest: matched.append(check_id) or real(check_id, *rest))
    assert exporter.render_text() == first and matched == []
