"""CUDA_VISIBLE_DEVICES resolution against NVIDIA's documented rules, case by case."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiag.model import Machine
from gpudiag.testing.fixtures import load
from gpudiag.visibility import Outcome, compare, export_line, resolve

H100 = load("h100x8-healthy")[0]
MIG = load("a100-mig")[0]
MIXED = load("mixed-gpus-workstation")[0]
LOST = load("gpu-lost")[0]
UUID3 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003"


def gpus(machine: Machine, value: str | None, order: str | None = None) -> list[int]:
    return [d.gpu_index for d in resolve(machine, value, order).devices]


def test_unset_means_every_device_and_empty_means_none() -> None:
    assert gpus(H100, None) == list(range(8))
    r = resolve(H100, "")
    assert r.devices == ()
    assert any("empty" in w for w in r.warnings)


def test_list_order_is_kept_and_positions_become_ordinals() -> None:
    r = resolve(H100, "2,3")
    assert [(d.ordinal, d.gpu_index) for d in r.devices] == [(0, 2), (1, 3)]
    assert gpus(H100, "5,1,0") == [5, 1, 0]


def test_nvidias_example_stops_at_the_first_invalid_entry() -> None:
    r = resolve(H100, "0,2,-1,1")
    assert [d.gpu_index for d in r.devices] == [0, 2]
    assert [e.outcome for e in r.entries] == [Outcome.USED, Outcome.USED, Outcome.DROPPED, Outcome.IGNORED]
    assert "negative" in r.entries[2].reason


@pytest.mark.parametrize(
    ("value", "expected", "why"),
    [
        ("7,8,1", [7], "out of range"),
        ("1,x,2", [1], "not a number or UUID"),
        ("1,,2", [1], "not a number or UUID"),
    ],
)
def test_invalid_entries_truncate_the_list(value: str, expected: list[int], why: str) -> None:
    r = resolve(H100, value)
    assert [d.gpu_index for d in r.devices] == expected
    assert why in next(e.reason for e in r.entries if e.outcome is Outcome.DROPPED)


def test_integers_are_read_like_strtoul() -> None:
    r = resolve(H100, " 4 ,5x,+6")
    assert [d.gpu_index for d in r.devices] == [4, 5, 6]
    assert any("'5x' is read as 5" in w for w in r.warnings)


def test_uuid_without_prefix_is_read_by_its_leading_digits() -> None:
    r = resolve(H100, "1c2b-ffff")  # hex UUID-ish text: strtoul reads the leading "1"
    assert [d.gpu_index for d in r.devices] == [1]
    r = resolve(H100, "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003")
    assert r.devices == ()
    assert any("without its 'GPU-' prefix" in w for w in r.warnings)


def test_repeated_device_empties_the_whole_list() -> None:
    r = resolve(H100, "1,2,1")
    assert r.devices == ()
    assert all(e.outcome is Outcome.DROPPED for e in r.entries)
    assert any("listed twice" in w for w in r.warnings)


def test_full_and_abbreviated_uuids() -> None:
    assert gpus(H100, f"{UUID3},0") == [3, 0]
    assert gpus(H100, "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2005") == [5]
    r = resolve(H100, "GPU-8e1f")  # matches all eight
    assert r.devices == () and "ambiguous" in r.entries[0].reason
    assert resolve(H100, "GPU-ffff").entries[0].reason.startswith("no GPU with this UUID")
    upper = resolve(H100, UUID3.upper().replace("GPU-", "GPU-"))
    assert upper.devices == () and "case" in upper.entries[0].reason


def test_mig_uuid_forms_and_one_instance_per_process() -> None:
    assert [d.mig.gpu_instance_id.value for d in resolve(MIG, "MIG-8b5c2a1e").devices if d.mig] == [1]
    legacy = resolve(MIG, "MIG-GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c/13/0")
    assert legacy.devices[0].name.endswith("1g.5gb")
    two = resolve(MIG, "MIG-8b5c,MIG-2e3f")
    assert len(two.devices) == 1
    assert two.entries[1].reason == "a process can use only one MIG instance"
    assert resolve(MIG, "MIG-GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c/9/0").devices == ()


def test_whole_mig_gpu_is_flagged() -> None:
    r = resolve(MIG, None)
    assert any("MIG enabled" in w for w in r.warnings)
    empty = load("a100-mig-no-instances")[0]
    r = resolve(empty, "0")
    assert r.devices == ()
    assert any("no instances" in w for w in r.warnings)


def test_fastest_first_among_different_gpus_is_a_flagged_heuristic() -> None:
    r = resolve(MIXED, "0")
    assert r.order_is_heuristic
    assert [d.gpu_index for d in r.devices] == [1]  # the A6000 (sm_86) ahead of the RTX 4000 (sm_75)
    assert any("nvidia-smi's GPU 1" in w for w in r.warnings)
    exact = resolve(MIXED, "0", "PCI_BUS_ID")
    assert not exact.order_is_heuristic and [d.gpu_index for d in exact.devices] == [0]
    assert not resolve(H100, None).order_is_heuristic  # identical GPUs: PCI order


def test_unknown_order_value_falls_back_with_a_warning() -> None:
    r = resolve(H100, "0", "pci")
    assert r.order == "FASTEST_FIRST"
    assert any("not a value CUDA knows" in w for w in r.warnings)


def test_lost_gpus_are_not_enumerated() -> None:
    assert gpus(LOST, None) == [0, 1, 3]
    assert gpus(LOST, "2") == [3]  # the third enumerated device is NVML's GPU 3


def test_narrowing_variables_are_reported() -> None:
    pod = load("container-pids")[0]
    r = resolve(pod, None)
    assert r.narrowing[0][0] == "NVIDIA_VISIBLE_DEVICES"


def test_export_lines_select_by_pci_index_or_uuid() -> None:
    by_index, by_uuid = export_line(MIXED, (1,))
    assert by_index == "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1"
    assert by_uuid.endswith("GPU-0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e")


def test_compare_reports_every_disagreement() -> None:
    r = resolve(H100, "2,3")
    same = [{"uuid": "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2002"}, {"uuid": "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003"}]
    assert compare(r, same) == ()
    swapped = list(reversed(same))
    assert len(compare(r, swapped)) == 2
    assert "CUDA sees 1 device(s)" in compare(r, same[:1])[0]


machines: list[Machine] = [H100, MIG, MIXED, LOST]
tokens = st.one_of(
    st.text(max_size=12),
    st.integers(-3, 12).map(str),
    st.sampled_from(["GPU-", "MIG-", UUID3, "MIG-8b5c", "MIG-GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c/1/0", " ", ""]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(tokens, max_size=6).map(",".join), st.sampled_from(machines), st.sampled_from([None, "PCI_BUS_ID", "x"])
)
def test_any_value_gives_a_consistent_result(value: str, machine: Machine, order: str | None) -> None:
    r = resolve(machine, value, order)
    assert [d.ordinal for d in r.devices] == list(range(len(r.devices)))
    assert len({(d.gpu_index, d.mig.index if d.mig else None) for d in r.devices}) == len(r.devices)
    assert len(r.entries) == (len(value.split(",")) if value != "" else 0)
    used = sum(e.outcome is Outcome.USED for e in r.entries)
    assert len(r.devices) <= used


def _mk(name: str) -> Callable[[], Machine]:
    return lambda: load(name)[0]
