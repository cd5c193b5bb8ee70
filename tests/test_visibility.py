"""CUDA_VISIBLE_DEVICES resolution against NVIDIA's documented rules, case by case.

Sources of the expected values: CUDA Programming Guide "CUDA Environment Variables" (examples
`2,1`, `0,2,-1,1`, `GPU-8932f937`), the MIG User Guide "CUDA Device Enumeration", and
PyTorch's test/test_cuda_nvml_based_avail.py (its `_parse_visible_devices` cases).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from gpudiag.errors import UsageError
from gpudiag.model import ComputeMode, Machine, Reading
from gpudiag.replay.fixtures import load
from gpudiag.selection import parse_selection
from gpudiag.visibility import (
    Outcome,
    Resolution,
    Target,
    TokenKind,
    code_hints,
    enumeration_order,
    export_line,
    export_lines,
    parse_token,
    probe_failed,
    probe_report,
    resolve,
    select_targets,
)
from tests.conftest import skip_without_torch

H100 = load("h100x8-healthy")[0]
MIG = load("a100-mig")[0]
MIG_EMPTY = load("a100-mig-no-instances")[0]
MIXED = load("mixed-gpus-workstation")[0]
LOST = load("gpu-lost")[0]
ZERO = load("zero-gpus")[0]
BOX = load("tests/machines/a100x2-mig-beside-full-gpu.json")[0]  # GPU 0 MIG (2 instances), GPU 1 whole
UUID3 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003"
MIG_3G = "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"  # GPU 0 MIG 0 (GI 1) on a100-mig and BOX
MIG_2G = "MIG-2e3f4a5b-6c7d-5e8f-9a0b-7c6d5e4f3a2b"  # GPU 0 MIG 1 (GI 5)
A100_PARENT = "GPU-4d5e6f70-8192-a3b4-c5d6-e7f8091a2b3c"


def gpus(machine: Machine, value: str | None, order: str | None = None) -> list[int]:
    return [d.gpu_index for d in resolve(machine, value, order).devices]


def outcomes(r: Resolution) -> list[Outcome]:
    return [e.outcome for e in r.entries]


def three_models() -> Machine:
    """T4 (7.5) at 01:00, A100 (8.0) at 41:00, A30 (8.0) at 81:00: two differ with the same capability."""
    kinds = [("Tesla T4", (7, 5), "00000000:01:00.0"), ("NVIDIA A100-PCIE-40GB", (8, 0), "00000000:41:00.0"),
             ("NVIDIA A30", (8, 0), "00000000:81:00.0")]  # fmt: skip
    new = [
        replace(g, name=Reading.of(name), compute_capability=Reading.of(cc), pci_bus_id=Reading.of(bus))
        for g, (name, cc, bus) in zip(H100.gpus[:3], kinds, strict=True)
    ]
    return replace(H100, gpus=tuple(new))


# --- the documented rules -------------------------------------------------------------


def test_unset_means_every_device_and_empty_means_none() -> None:
    r = resolve(H100, None)
    assert [d.gpu_index for d in r.devices] == list(range(8)) and r.entries == ()
    assert not r.order_is_heuristic and r.warnings == ()
    empty = resolve(H100, "")
    assert empty.devices == () and empty.entries == ()
    assert any("set but empty" in w for w in empty.warnings)


def test_nvidias_examples_order_and_first_invalid_entry() -> None:
    r = resolve(H100, "2,1")  # "device 2 enumerated before device 1", device 0 invisible
    assert [(d.ordinal, d.gpu_index) for d in r.devices] == [(0, 2), (1, 1)]
    r = resolve(H100, "0,2,-1,1")  # "devices 0 and 2 visible, device 1 invisible"
    assert [d.gpu_index for d in r.devices] == [0, 2]
    assert outcomes(r) == [Outcome.USED, Outcome.USED, Outcome.DROPPED, Outcome.IGNORED]
    assert "negative" in r.entries[2].reason and "CUDA stops here" in r.entries[2].reason


def test_nvidias_abbreviated_uuid_rule() -> None:
    assert gpus(H100, f"{UUID3},GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2000") == [3, 0]
    assert gpus(H100, "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2005") == [5]
    assert gpus(MIXED, "GPU-0f,GPU-5a") == [1, 0]  # unique prefixes
    used = resolve(MIXED, "GPU-0f").entries[0]
    assert used.reason == "UUID prefix of GPU 1" and used.documented
    ambiguous = resolve(H100, "GPU-8e1f")  # a prefix of all eight
    assert ambiguous.devices == () and "ambiguous" in ambiguous.entries[0].reason
    other = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2004"
    assert resolve(H100, f"{UUID3},GPU-ffff,{other}").entries[1].reason.startswith("no GPU with this UUID")
    assert gpus(H100, f"{UUID3},GPU-ffff,{other}") == [3]


@pytest.mark.parametrize(
    ("value", "expected", "why"),
    [
        ("7,8,1", [7], "out of range: only 8 device(s)"),
        ("1,x,2", [1], "not a number or a GPU-/MIG- UUID"),
        ("1,,2", [1], "empty entry"),
        ("1,-,2", [1], "'-' without digits"),
        ("5,gpu-8e1f2a6c,2", [5], "'gpu-' is not 'GPU-'"),
        ("one,two,3,4", [], "not a number"),  # PyTorch's test: "random string is used as empty set"
        ("4,3,two,one", [4, 3], "not a number"),  # "random string is used as separator"
    ],
)
def test_invalid_entries_truncate_the_list(value: str, expected: list[int], why: str) -> None:
    r = resolve(H100, value)
    assert [d.gpu_index for d in r.devices] == expected
    dropped = [e for e in r.entries if e.outcome is Outcome.DROPPED]
    assert len(dropped) == 1 and why in dropped[0].reason
    later = r.entries[dropped[0].position + 1 :]
    assert all(e.outcome is Outcome.IGNORED for e in later)


def test_integers_are_read_like_strtoul() -> None:
    assert gpus(H100, "1gpu2,2ampere") == [1, 2]  # PyTorch's test: "rest of the string is ignored"
    r = resolve(H100, " 4 ,5x,+6,\t7")
    assert [d.gpu_index for d in r.devices] == [4, 5, 6, 7]
    assert any("'5x' is read as 5" in w for w in r.warnings)
    assert any("'+6'" in u and "sign" in u for u in r.undocumented)
    minus_zero = resolve(H100, "2,-0")  # strtoul and PyTorch read -0 as 0; NVIDIA is silent
    assert gpus(H100, "2,-0") == [2, 0] and any("'-0'" in u for u in minus_zero.undocumented)


def test_c_reading_is_ascii_only() -> None:
    arabic_three = resolve(H100, "\u0663")  # Python's int() reads it as 3; C's strtoul does not
    assert arabic_three.devices == () and "U+0663" in arabic_three.entries[0].reason
    nbsp = resolve(H100, "\u00a01")  # not a C blank
    assert nbsp.devices == ()
    assert gpus(H100, "\v1") == [1]  # a C blank
    assert gpus(H100, "9" * 5000) == []  # more digits than any integer: out of range, no crash


def test_values_that_look_like_something_else_are_explained() -> None:
    def warned(value: str, text: str) -> Resolution:
        r = resolve(H100, value)
        assert any(text in w for w in r.warnings), (value, r.warnings)
        return r

    assert gpus(H100, "0-3") == [0]
    warned("0-3", "is not a range")
    warned("0 1", "separated by commas, not blanks")
    assert warned("[0,1]", "brackets and quotes").devices == ()
    warned("8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003", "without its 'GPU-' prefix")
    assert gpus(H100, "1c2b-ffff") == [1]  # strtoul reads the leading "1"
    assert warned("-1", "the first entry, '-1', is invalid").devices == ()
    assert any("hide every GPU on purpose" in w for w in resolve(H100, "-1").warnings)


def test_number_base_is_flagged_only_where_it_matters() -> None:
    assert any("base 10" in u and "would be 8" in u for u in resolve(H100, "010").undocumented)
    assert any("base 10" in u for u in resolve(H100, "0x1").undocumented)
    assert resolve(H100, "01").undocumented == ()  # 1 in any base


def test_repeated_device_makes_cuinit_fail_with_101() -> None:
    """Driver 580 on an H100: `0,0` → cuInit 101 CUDA_ERROR_INVALID_DEVICE (torch: 'Error 101')."""
    r = resolve(H100, "1,2,1")
    assert r.devices == () and all(e.outcome is Outcome.DROPPED for e in r.entries)
    assert r.cuinit_error == "CUDA_ERROR_INVALID_DEVICE (101)"
    assert any("listed twice" in w and "Error 101: invalid device ordinal" in w for w in r.warnings)
    assert any("INVALID_DEVICE" in u and "580.159.04" in u for u in r.undocumented)
    assert not any("no CUDA-capable device" in w for w in r.warnings)
    assert resolve(H100, "0,0").cuinit_error == "CUDA_ERROR_INVALID_DEVICE (101)"
    assert resolve(H100, f"{UUID3},{UUID3}").cuinit_error == "CUDA_ERROR_INVALID_DEVICE (101)"
    after_invalid = resolve(H100, "1,99,1")  # the repeat comes after CUDA stopped reading
    assert [d.gpu_index for d in after_invalid.devices] == [1]


def test_blanks_and_case_in_uuids_are_undocumented_assumptions() -> None:
    padded = resolve(H100, f" {UUID3} ")
    assert [d.gpu_index for d in padded.devices] == [3]
    assert any("blanks around a UUID" in u for u in padded.undocumented)
    upper = resolve(H100, "GPU-8E1F2A6C-4B7D-4C1E-9A3F-1D0C5E7B2003")
    assert upper.devices == () and not upper.entries[0].documented
    assert any("ignores case" in u for u in upper.undocumented)


def test_a_mixed_list_ends_at_the_first_entry_of_the_other_form() -> None:
    """Driver 580: `0,GPU-<uuid of GPU 2>` is GPU 0 alone, `GPU-<uuid of GPU 2>,1` is GPU 2 alone,
    and `GPU-<full uuid of GPU 0>,0` is one device (gpudiag used to read a repeat, no device)."""
    assert gpus(H100, f"0,{UUID3}") == [0]
    assert gpus(H100, f"{UUID3},1") == [3]
    uuid0 = H100.gpus[0].uuid.value
    r = resolve(H100, f"{uuid0},0")
    assert [d.gpu_index for d in r.devices] == [0] and r.cuinit_error == ""
    assert outcomes(r) == [Outcome.USED, Outcome.DROPPED]
    assert "CUDA stops here" in r.entries[1].reason and not r.entries[1].documented
    assert any("mixes integer indices and UUIDs" in w for w in r.warnings)
    assert any("other form" in u and "580.159.04" in u for u in r.undocumented)


def test_an_empty_gpu_prefix_names_no_device() -> None:
    """Driver 580: `GPU-` alone → cuInit 100 (gpudiag read it as a prefix of every UUID)."""
    one = replace(H100, gpus=H100.gpus[:1])
    r = resolve(one, "GPU-")
    assert r.devices == () and r.cuinit_error == "CUDA_ERROR_NO_DEVICE (100)"
    assert any("'GPU-' with nothing after it" in u and "580.159.04" in u for u in r.undocumented)


@pytest.mark.parametrize(
    ("value", "count", "error"),
    [  # the table in docs/hardware/h100-80gb-hbm3-driver580/README.md (one GPU, driver 580.159.04)
        ("0", 1, ""),
        ("0,1", 1, ""),
        (" 0", 1, ""),
        ("0abc", 1, ""),
        ("+0", 1, ""),
        ("00", 1, ""),
        ("0,-1", 1, ""),
        ("GPU-9f8b", 1, ""),
        ("GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e", 1, ""),
        ("1", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("1,0", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("1x", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("-1", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("GPU-ffff", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("GPU-", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("MIG-GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e", 0, "CUDA_ERROR_NO_DEVICE (100)"),
        ("0,0", 0, "CUDA_ERROR_INVALID_DEVICE (101)"),
        ("GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e,0", 1, ""),
        ("0,GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e", 1, ""),
    ],
)
def test_what_cuda_did_on_the_real_h100(value: str, count: int, error: str) -> None:
    real = load("h100-driver580-idle")[0]  # the machine the table was captured on
    assert real.gpus[0].uuid.value == "GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e"
    r = resolve(real, value)
    assert (len(r.devices), r.cuinit_error) == (count, error), (value, r.entries)


# --- MIG ------------------------------------------------------------------------------


def test_mig_uuid_forms() -> None:
    r = resolve(MIG, MIG_2G)
    assert [(d.gpu_index, d.mig.index if d.mig else None) for d in r.devices] == [(0, 1)]
    assert r.devices[0].name.endswith("2g.10gb") and r.devices[0].parent_uuid == A100_PARENT
    legacy = resolve(MIG, f"MIG-{A100_PARENT}/13/0")  # MIG-<GPU-UUID>/<GI>/<CI>
    assert legacy.devices[0].name.endswith("1g.5gb") and legacy.entries[0].documented
    wrong = resolve(MIG, f"MIG-{A100_PARENT}/9/0")
    assert wrong.devices == () and "no MIG instance GI 9 / CI 0" in wrong.entries[0].reason
    short_parent = resolve(MIG, "MIG-GPU-4d5e6f70/1/0")
    assert short_parent.devices == () and not short_parent.entries[0].documented
    abbreviated = resolve(MIG, "MIG-2e3f")
    assert abbreviated.devices[0].mig is not None and not abbreviated.entries[0].documented


def test_one_mig_instance_per_process() -> None:
    r = resolve(MIG, f"{MIG_2G},{MIG_3G}")
    assert len(r.devices) == 1 and r.devices[0].mig is not None and r.devices[0].mig.index == 1
    assert r.entries[1].outcome is Outcome.DROPPED and "only one MIG instance" in r.entries[1].reason
    assert any("one MIG instance" in w for w in r.warnings)
    assert any("R450" in u and "535.129.03" in u for u in r.undocumented)


def test_no_non_mig_gpu_once_a_mig_instance_is_enumerated() -> None:
    unset = resolve(BOX, None)  # MIG User Guide: the first instance, and GPU 1 hidden
    assert [(d.gpu_index, d.mig.index if d.mig else None) for d in unset.devices] == [(0, 0)]
    assert any("hides the non-MIG GPU 1" in w for w in unset.warnings)
    r = resolve(BOX, "1,0")
    assert [d.gpu_index for d in r.devices] == [0]
    assert next(e for e in r.entries if e.gpu_index == 1).outcome is Outcome.DROPPED
    # an index and a MIG UUID are of different forms: the list ends at the second
    assert [(d.gpu_index, d.mig is not None) for d in resolve(BOX, f"1,{MIG_2G}").devices] == [(1, False)]
    assert [(d.gpu_index, d.mig is not None) for d in resolve(BOX, f"{MIG_2G},1").devices] == [(0, True)]
    assert gpus(BOX, "1") == [1]  # no MIG instance named: the whole GPU is there


def test_a_mig_gpu_named_as_a_whole_gives_one_instance_and_says_it_is_a_guess() -> None:
    r = resolve(MIG, "0")
    assert len(r.devices) == 1 and r.devices[0].mig is not None and r.devices[0].mig.index == 0
    assert not r.entries[0].documented and "MIG on" in r.entries[0].reason
    assert any("'the first one available'" in u for u in r.undocumented)
    assert resolve(MIG, A100_PARENT).devices[0].mig is not None


def test_mig_without_instances_gives_nothing_to_run_on() -> None:
    r = resolve(MIG_EMPTY, "0")
    assert r.devices == () and r.entries[0].outcome is Outcome.DROPPED
    assert any("no instances" in w for w in r.warnings)
    assert resolve(MIG_EMPTY, None).devices == ()


# --- order ------------------------------------------------------------------------------


def test_fastest_first_among_different_gpus_is_a_flagged_heuristic() -> None:
    r = resolve(MIXED, "0")
    assert r.order_is_heuristic and r.order == "FASTEST_FIRST"
    assert [d.gpu_index for d in r.devices] == [1]  # the A6000 (sm_86) ahead of the RTX 4000 (sm_75)
    assert any("nvidia-smi's GPU 1" in w for w in r.warnings)
    assert not r.entries[0].documented
    exact = resolve(MIXED, "0", "PCI_BUS_ID")
    assert not exact.order_is_heuristic and [d.gpu_index for d in exact.devices] == [0]
    assert exact.entries[0].documented and exact.warnings == ()
    assert [g.index for g in enumeration_order(H100, "FASTEST_FIRST")[0]] == list(range(8))


def test_models_with_the_same_capability_are_a_guess_within_the_guess() -> None:
    machine = three_models()
    r = resolve(machine, None)
    assert [d.gpu_index for d in r.devices] == [1, 2, 0]
    assert any("GPUs 1, 2 differ but have the same compute capability" in u for u in r.undocumented)


def test_order_values_other_than_the_documented_two() -> None:
    misspelled = resolve(MIXED, "0", "pci_bus_id")
    assert misspelled.order == "FASTEST_FIRST" and misspelled.order_value == "pci_bus_id"
    assert any("write PCI_BUS_ID" in w for w in misspelled.warnings)
    assert any("other case or blanks" in u for u in misspelled.undocumented)
    unknown = resolve(H100, "0", "SLOWEST")
    assert unknown.order == "FASTEST_FIRST" and any("not a value CUDA knows" in w for w in unknown.warnings)
    assert resolve(H100, "0", "").order == "FASTEST_FIRST"


# --- the machine around it ------------------------------------------------------------


def test_lost_gpus_are_left_out_and_that_is_an_assumption() -> None:
    r = resolve(LOST, None)
    assert [d.gpu_index for d in r.devices] == [0, 1, 3]
    assert gpus(LOST, "2") == [3]  # the third enumerated device is NVML's GPU 3
    assert any("lost" in u for u in r.undocumented)


def test_zero_gpus() -> None:
    r = resolve(ZERO, "0")
    assert r.devices == () and "no device can be enumerated" in r.entries[0].reason
    assert any("NVML sees no GPU" in w for w in resolve(ZERO, None).warnings)


def test_narrowing_variables_and_global_ids() -> None:
    pod = load("container-pids")[0]
    r = resolve(pod, None)
    assert r.narrowing[0][0] == "NVIDIA_VISIBLE_DEVICES" and "from 0" in r.narrowing[0][2]
    slurm = replace(H100, gpus=H100.gpus[:2], env=(("SLURM_JOB_GPUS", "4,5"), ("CUDA_MPS_PIPE_DIRECTORY", "/tmp/m")))
    job = resolve(slurm, "4,5")
    assert [n for n, _, _ in job.narrowing] == ["SLURM_JOB_GPUS", "CUDA_MPS_PIPE_DIRECTORY"]
    assert job.devices == () and any("global (host) ids do not apply" in w for w in job.warnings)


def test_compute_modes_that_block_work_are_flagged() -> None:
    node = load("misconfigured-node")[0]  # GPU 1 Prohibited
    assert any("Prohibited" in w and "GPU 1" in w for w in resolve(node, None).warnings)
    assert not any("Prohibited" in w for w in resolve(node, "0").warnings)
    exclusive = replace(H100, gpus=(replace(H100.gpus[0], compute_mode=Reading.of(ComputeMode.EXCLUSIVE_PROCESS)),))
    assert any("Exclusive_Process" in w for w in resolve(exclusive, None).warnings)


# --- PyTorch's own reading ------------------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "value", "count", "divergent"),
    [
        (H100, "2,3", 2, False),
        (H100, "+", None, True),  # torch's _strtoul: int('+') raises ValueError
        (H100, "\u0663", 1, True),  # isdigit()/int() read it as 3: one device for PyTorch, none for CUDA
        (H100, f" {UUID3}", 0, True),  # not startswith('GPU-'): read as a number, fails
        (H100, "1,99,1", 0, True),  # repeat checked before the range
        (BOX, None, 2, True),  # NVML count, not CUDA's one MIG instance
        (MIG, MIG_3G, 1, True),  # MIG-: the count comes from CUDA, but torch.cuda.utilization() & co. raise
        (LOST, None, 4, True),
    ],
)
def test_pytorch_view(machine: Machine, value: str | None, count: int | None, divergent: bool) -> None:
    view = resolve(machine, value).pytorch
    assert view is not None
    assert view.count_before_init == count
    assert bool(view.divergences) is divergent, view.divergences


def test_pytorch_nvml_queries_ignore_the_order() -> None:
    view = resolve(MIXED, None).pytorch
    assert view is not None
    assert [(i.ordinal, i.nvml_index) for i in view.nvml_indices] == [(0, 0), (1, 1)]  # CUDA: GPU 1, GPU 0
    assert any("utilization" in d for d in view.divergences)
    exact = resolve(MIXED, None, "PCI_BUS_ID").pytorch
    assert exact is not None and exact.divergences == ()


TORCH_ORACLE = r"""
import json, os, sys
from unittest import mock
import torch.cuda as tc
cases, uuids, count = json.loads(sys.stdin.read())
out = []
for value in cases:
    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    with mock.patch.dict(os.environ, env, clear=True), \
         mock.patch.object(tc, "_raw_device_count_nvml", return_value=count), \
         mock.patch.object(tc, "_raw_device_uuid_nvml", return_value=uuids):
        try:
            out.append(tc._device_count_nvml())
        except Exception as exc:
            out.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


@pytest.mark.slow
def test_pytorch_view_matches_the_installed_torch() -> None:
    """Our model of PyTorch's reading against torch's own code, on tricky and random values."""
    skip_without_torch()
    rng = random.Random(4)
    alphabet = ["0", "1", "2", "3", "7", "9", "-", "+", " ", ",", "x", "\u0663", "\u00b2", "GPU-8e1f", "MIG-", "\t"]
    cases: list[str | None] = [None, "", "+", "-", "-0", "0,+", "\u00b2", " GPU-8e1f", f"{UUID3},0", "1,99,1"]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    uuids = [g.uuid.value for g in H100.gpus]
    child = subprocess.run(
        [sys.executable, "-c", TORCH_ORACLE],
        input=json.dumps([cases, uuids, len(H100.gpus)]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    for value, theirs in zip(cases, json.loads(child.stdout), strict=True):
        ours = resolve(H100, value).pytorch
        assert ours is not None
        if ours.asks_cuda:
            assert theirs == -1, value  # torch falls back to the CUDA runtime
        elif ours.count_before_init is None:
            assert isinstance(theirs, str) and theirs == ours.error, value
        else:
            assert theirs == ours.count_before_init, value


# --- choosing GPUs ------------------------------------------------------------------------


def test_export_lines_select_by_pci_index_or_uuid() -> None:
    by_index, by_uuid = export_line(MIXED, (1,))
    assert by_index == "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1"
    assert by_uuid == "export CUDA_VISIBLE_DEVICES=GPU-0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"
    lost = export_lines(LOST, (Target(LOST.gpu(3)), Target(LOST.gpu(0))))
    assert lost[0].endswith("CUDA_VISIBLE_DEVICES=2,0")  # GPU 3 is the third usable in PCI order


def _targets(machine: Machine, text: str) -> tuple[Target, ...]:
    """``--select text`` as the request parses it, resolved against ``machine``."""
    selection = parse_selection(text, "--select", instances=True)
    assert selection is not None
    return select_targets(machine, selection)


def test_select_targets() -> None:
    assert [t.gpu.index for t in _targets(H100, f"5,{UUID3},00000000:18:00.0")] == [5, 3, 0]
    (mig,) = _targets(MIG, "MIG-2e3f")
    assert mig.mig is not None and export_lines(MIG, (mig,)) == (f"export CUDA_VISIBLE_DEVICES={MIG_2G}",)
    for machine, ids, message in [
        (MIG, "0", "select one of its MIG instances"),
        (MIG_EMPTY, "0", "none: create some first"),
        (LOST, "2", "lost"),
        (MIG, f"{MIG_2G},{MIG_3G}", "only one MIG instance"),
        (BOX, "1,MIG-2e3f", "only one MIG instance"),
        (MIG, "MIG-ffff", "matches 0 MIG instances"),
        (H100, "1,,2", "empty entry"),
        (H100, "12", "no GPU with index 12"),
    ]:
        with pytest.raises(UsageError, match=message):
            _targets(machine, ids)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([H100, MIXED, LOST, BOX]), st.data())
def test_export_lines_resolve_back_to_the_selection(machine: Machine, data: st.DataObject) -> None:
    usable = [g.index for g in machine.gpus if g.state.value == "ok" and g.mig_mode_current.value is not True]
    chosen = data.draw(st.lists(st.sampled_from(usable), min_size=1, unique=True))
    targets = _targets(machine, ",".join(map(str, chosen)))
    by_index, by_uuid = export_lines(machine, targets)
    index_value = by_index.split("CUDA_VISIBLE_DEVICES=")[1]
    assert gpus(machine, index_value, "PCI_BUS_ID") == chosen
    assert gpus(machine, by_uuid.split("=", 1)[1], data.draw(st.sampled_from([None, "PCI_BUS_ID"]))) == chosen


# --- hints ------------------------------------------------------------------------------


def test_code_hints_translate_physical_to_logical_ids() -> None:
    hints = " | ".join(code_hints(resolve(H100, "2,3")))
    assert "cuda:0 = GPU 2, cuda:1 = GPU 3" in hints
    assert "device_ids=[0, 1], not [2, 3]" in hints
    assert "output_device defaults to device_ids[0] (here GPU 2)" in hints
    assert "rank 0 → GPU 2, rank 1 → GPU 3" in hints
    assert "read once per process" in hints
    assert (
        f"`gpudiag visible --select 2,3` prints the line): export CUDA_VISIBLE_DEVICES={H100.gpu(2).uuid.value},{UUID3}"
        in hints
    )
    assert "not [" not in " ".join(code_hints(resolve(H100, "0,1")))
    mig = " ".join(code_hints(resolve(MIG, MIG_3G)))
    assert "cannot span MIG instances" in mig and "device_ids" not in mig
    assert "no device is visible" in code_hints(resolve(H100, ""))[0]


# --- probe comparison ---------------------------------------------------------------------


def _devices(*uuids: str, bus: tuple[str, ...] = ()) -> list[dict[str, object]]:
    return [{"name": "x", "uuid": u, "pci_bus_id": bus[i] if bus else ""} for i, u in enumerate(uuids)]


def test_probe_report_agreement_and_every_kind_of_disagreement() -> None:
    r = resolve(H100, "2,3")
    two, three = "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2002", "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2003"
    agree = probe_report(r, {"driver": {"label": "driver", "devices": _devices(two, "GPU-" + three)}})
    assert agree.status == "agrees" and agree.ok and agree.disagreements == ()
    swapped = probe_report(r, {"driver": {"label": "driver", "devices": _devices(three, two)}})
    assert swapped.status == "disagrees" and len(swapped.disagreements) == 2
    short = probe_report(r, {"torch": {"label": "torch", "devices": _devices(two)}})
    assert "torch sees 1 device(s), gpudiag computed 2" in short.disagreements
    by_bus = probe_report(r, {"driver": {"devices": _devices("", "", bus=("0000:3A:00.0", "0000:5D:00.0"))}})
    assert by_bus.status == "agrees"
    failed = {"driver": {"label": "driver", "error": "no driver"}, "torch": {"label": "t", "error": "CPU-only"}}
    none = probe_report(r, failed)
    assert none.status == "could_not_run" and [s.detail for s in none.sources] == ["no driver", "CPU-only"]
    assert probe_failed("crashed with SIGSEGV").status == "could_not_run"


def test_probe_report_checks_the_pytorch_prediction_and_mig_parent_uuids() -> None:
    r = resolve(H100, "1,99,1")  # CUDA: GPU 1; PyTorch before init: 0
    right = {
        "torch": {"label": "t", "count_before_init": 0, "devices": _devices("8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2001")}
    }
    assert probe_report(r, right).status == "agrees"
    wrong = {
        "torch": {"label": "t", "count_before_init": 2, "devices": _devices("8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2001")}
    }
    assert any("gpudiag predicted 0" in d for d in probe_report(r, wrong).disagreements)
    raises = resolve(H100, "+")
    said = {"torch": {"label": "t", "count_before_init": 0, "devices": []}}
    assert any("predicted that it raises" in d for d in probe_report(raises, said).disagreements)
    mig = probe_report(resolve(MIG, MIG_2G), {"driver": {"label": "d", "devices": _devices(A100_PARENT)}})
    assert mig.status == "agrees" and any("parent GPU's UUID" in n for n in mig.notes)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["driver", "torch", "env", "x"]), json_values, max_size=4),
    st.sampled_from([None, "2,3", "", "1,99,1"]),
)
def test_probe_report_accepts_any_child_output(data: dict[str, object], value: str | None) -> None:
    report = probe_report(resolve(H100, value), data)
    assert report.status in ("agrees", "disagrees", "could_not_run")
    assert probe_report(None, data).status in ("could_not_run", "not_compared")


# --- fuzzing the parser -------------------------------------------------------------------

machines: list[Machine] = [H100, MIG, MIG_EMPTY, MIXED, LOST, ZERO, BOX, three_models()]
tokens = st.one_of(
    st.text(max_size=12),
    st.integers(-3, 12).map(str),
    st.sampled_from(["GPU-", "MIG-", UUID3, "MIG-8b5c", MIG_2G, f"MIG-{A100_PARENT}/1/0", "GPU-0f", " ", "", "-0"]),
)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.none(), st.text(), st.lists(tokens, max_size=6).map(",".join)),
    st.sampled_from(machines),
    st.one_of(st.none(), st.sampled_from(["PCI_BUS_ID", "FASTEST_FIRST", "pci_bus_id", "x", ""]), st.text()),
)
def test_any_value_gives_a_consistent_result(value: str | None, machine: Machine, order: str | None) -> None:
    from gpudiag.render.visible_view import to_json

    r = resolve(machine, value, order)
    assert [d.ordinal for d in r.devices] == list(range(len(r.devices)))
    assert len({(d.gpu_index, d.mig.index if d.mig else None) for d in r.devices}) == len(r.devices)
    assert all(machine.gpu(d.gpu_index).state.value == "ok" for d in r.devices)
    migs = [d for d in r.devices if d.mig is not None]
    assert not migs or len(r.devices) == 1  # one MIG instance, and nothing beside it
    if value is None or value == "":
        assert r.entries == ()
    else:
        assert [e.position for e in r.entries] == list(range(len(value.split(","))))
        assert len(r.devices) == sum(e.outcome is Outcome.USED for e in r.entries)
        stopped = [e.position for e in r.entries if e.outcome is Outcome.DROPPED and "CUDA stops here" in e.reason]
        if stopped:
            assert all(e.outcome is Outcome.IGNORED for e in r.entries[stopped[0] + 1 :])
    assert r.pytorch is not None and len(r.pytorch.nvml_indices) == len(r.devices)
    code_hints(r)
    json.dumps(to_json(r, "--value", code_hints(r), None))


def _libc_strtoul() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    fn = ctypes.CDLL(name).strtoul
    fn.restype = ctypes.c_ulong
    fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
    return fn


LIBC_STRTOUL = _libc_strtoul()


@pytest.mark.slow
@pytest.mark.skipif(LIBC_STRTOUL is None, reason="no C library to compare with")
@settings(max_examples=1000, deadline=None)
@given(
    st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=127), max_size=10)
    | st.from_regex(r"\s*[+-]?[0-9]{1,25}.{0,3}", fullmatch=True)
)
def test_integer_entries_read_exactly_like_c_strtoul(text: str) -> None:
    """The parser against the C library's own strtoul, on ASCII (the only place they can differ)."""
    if "\0" in text or not text.isascii() or text.strip(" \t\n\v\f\r").startswith(("GPU-", "MIG-")):
        return
    raw = text.encode()
    buffer = ctypes.create_string_buffer(raw)
    end = ctypes.c_char_p()
    assert LIBC_STRTOUL is not None
    value = LIBC_STRTOUL(buffer, ctypes.byref(end), 10)
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(buffer)  # type: ignore[operator]
    token = parse_token(text)
    if consumed == 0:
        assert token.kind is TokenKind.INVALID and token.problem != "", text
    elif token.kind is TokenKind.INVALID:
        assert "negative" in token.problem and value > 0, text  # '-N' wraps to 2**64 - N, or saturates
    else:
        assert token.kind is TokenKind.INDEX
        assert token.ignored == text[consumed:], text
        assert token.number == value or (token.number is not None and token.number >= 2**64 - 1), text


@given(st.text())
def test_parse_token_never_raises(text: str) -> None:
    token = parse_token(text)
    assert (token.kind is TokenKind.INVALID) == bool(token.problem)
