"""What one exporter scrape asks NVML: on a real driver each C call costs ~0.3 ms of CPU
(gpudiag.replay.call_costs), so the count per scrape is held here and must not grow back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from gpudiag.export.exporter import Exporter
from gpudiag.probe.collect import MachineSource
from gpudiag.sources import open_source

EXAMPLE = "h100x8-training-64procs"  # 8 GPUs, 64 processes
# The fake's count of a steady scrape (the fixed facts, GPM's support and the Xid event set asked,
# the slow rows kept): 25 calls a GPU natively (24 C calls: the fake counts nvmlDeviceGetMemoryInfo_v2
# and the v1 name it answers through), 17 for dcgm-exporter's fields, and the session's count and
# Xid poll.
BUDGET = {"native": 8 * 25 + 2, "dcgm": 8 * 17 + 2}


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
