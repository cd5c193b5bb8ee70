"""`--id` (and `visible --select`) is parsed once, in its command's request module, into a
GpuSelection; what lies below takes that value and never the option's text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiag.errors import UsageError
from gpudiag.model import Gpu
from gpudiag.parsing import parse_count, shorten
from gpudiag.replay.fixtures import load
from gpudiag.selection import (
    ByBusId,
    ByIndex,
    ByInstance,
    ByUuid,
    GpuSelection,
    existing,
    normalize_bus_id,
    parse_selection,
    select_gpus,
)

ROOT = Path(__file__).resolve().parent.parent
H100 = load("h100x8-healthy")[0]
UUID1 = "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2001"
# The modules that turn a command's options into what they mean (docs/design.md, "Adding an option").
REQUEST_MODULES = {
    "gpudiag/cli/list_modes.py",
    "gpudiag/memory/request.py",
    "gpudiag/cli/smi_requests.py",
    "gpudiag/visibility/request.py",
}


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("3", (ByIndex("3", 3),)),
        ("007", (ByIndex("007", 7),)),
        ("1234567890", (ByIndex("1234567890", None),)),  # more digits than an index has: matches nothing
        (" 1 , 0", (ByIndex("1", 1), ByIndex("0", 0))),
        ("gpu-8E1F", (ByUuid("gpu-8E1F", "gpu-8e1f"),)),
        ("MIG-ab", (ByUuid("MIG-ab", "mig-ab"),)),  # --id takes GPUs: a MIG UUID names none
        ("18:00.0", (ByBusId("18:00.0", "00000000:18:00.0"),)),
        ("0000:2A:00.0", (ByBusId("0000:2A:00.0", "00000000:2a:00.0"),)),
        ("٣", (ByBusId("٣", "٣"),)),  # not an ASCII digit: not an index
    ],
)
def test_an_id_is_parsed_by_kind(text: str, entries: tuple[object, ...]) -> None:
    assert parse_selection(text) == GpuSelection(entries)


def test_select_takes_mig_instances() -> None:
    parsed = parse_selection("1,MIG-2e3F", "--select", instances=True)
    assert parsed == GpuSelection((ByIndex("1", 1), ByInstance("MIG-2e3F", "mig-2e3f")))


@pytest.mark.parametrize("text", ["", " ", "0,,1", "0,", ",0", "0, ,1"])
def test_an_empty_entry_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_selection(text)
    assert raised.value.message == f"empty entry in --id {shorten(text)!r}"
    with pytest.raises(UsageError, match="empty entry in --select"):
        parse_selection(text, "--select", instances=True)


def test_no_option_is_no_selection() -> None:
    assert parse_selection(None) is None
    assert select_gpus(H100.gpus, None) == H100.gpus


def test_a_selection_reads_what_its_entries_match() -> None:
    assert parse_selection("0,3") == GpuSelection((ByIndex("0", 0), ByIndex("3", 3)))
    assert parse_selection("0,3").reads == frozenset()  # type: ignore[union-attr]  # the index is always read
    assert parse_selection(f"2,{UUID1}").reads == {"uuid"}  # type: ignore[union-attr]
    assert parse_selection("18:00.0,GPU-8e").reads == {"uuid", "pci_bus_id"}  # type: ignore[union-attr]


def test_select_gpus_takes_the_parsed_selection_not_the_text() -> None:
    with pytest.raises(TypeError, match="GpuSelection"):
        select_gpus(H100.gpus, "0,1")  # type: ignore[arg-type]
    chosen = parse_selection(f"00000000:2A:00.0,{UUID1},3")
    assert [g.index for g in select_gpus(H100.gpus, chosen)] == [1, 3]  # in the order given, each once


def _calls_and_reads(text: str) -> tuple[set[str], set[str]]:
    """The names ``text`` calls, and the attributes it reads."""
    tree = ast.parse(text)
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    calls |= {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return calls, attributes


def test_only_the_request_modules_read_the_option_text() -> None:
    """No module below a request reads ``--id``'s text (a Request's ``ids``) or parses a selection:
    the request modules hand the GpuSelection down."""
    parsers, readers = set(), set()
    for path in sorted((ROOT / "gpudiag").rglob("*.py")):
        name, text = str(path.relative_to(ROOT)), path.read_text()
        if "ids" not in text and "parse_selection" not in text:
            continue  # neither can be in its tree: not worth parsing
        calls, attributes = _calls_and_reads(text)
        if "parse_selection" in calls:
            parsers.add(name)
        if "ids" in attributes:
            readers.add(name)
    assert parsers == REQUEST_MODULES
    assert readers <= REQUEST_MODULES, readers - REQUEST_MODULES


# What `--id` did before it was parsed at the edge: the text split and matched below the request.
# The parsed selection must select the same GPUs and raise the same messages.
def _reference(gpus: tuple[Gpu, ...], ids: str) -> tuple[Gpu, ...]:
    tokens = tuple(t.strip() for t in ids.split(","))
    if not all(tokens):
        raise UsageError(f"empty entry in --id {shorten(ids)!r}")
    chosen: list[Gpu] = []
    for token in tokens:
        gpu = _reference_match(gpus, token)
        if gpu not in chosen:
            chosen.append(gpu)
    return tuple(chosen)


def _reference_match(gpus: tuple[Gpu, ...], token: str) -> Gpu:
    if token.isascii() and token.isdigit():
        index = parse_count(token)
        for gpu in gpus:
            if gpu.index == index:
                return gpu
        raise UsageError(f"no GPU with index {shorten(token)}; {existing(gpus)}")
    lowered = token.lower()
    if lowered.startswith(("gpu-", "mig-")):
        hits = [g for g in gpus if g.uuid.value is not None and g.uuid.value.lower().startswith(lowered)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UsageError(f"UUID prefix {shorten(token)!r} matches {len(hits)} GPUs; give more characters")
        raise UsageError(f"no GPU with UUID {shorten(token)!r}; {existing(gpus)}")
    wanted = normalize_bus_id(token)
    for gpu in gpus:
        if gpu.pci_bus_id.value is not None and normalize_bus_id(gpu.pci_bus_id.value) == wanted:
            return gpu
    raise UsageError(f"{shorten(token)!r} is not a GPU index, UUID (GPU-…) or PCI bus id; {existing(gpus)}")


def _spellings(gpu: Gpu) -> st.SearchStrategy[str]:
    uuid, bus = gpu.uuid.value or "", gpu.pci_bus_id.value or ""
    return st.one_of(
        st.sampled_from([str(gpu.index), f"00{gpu.index}", f" {gpu.index} "]),
        st.integers(4, len(uuid)).map(lambda n: uuid[:n]),
        st.integers(4, len(uuid)).map(lambda n: uuid[:n].lower()),
        st.sampled_from([bus, bus.lower(), bus[4:], bus[9:], f"  {bus[9:]}"]),
    )


ENTRIES = st.one_of(
    st.sampled_from(H100.gpus).flatmap(_spellings),
    st.sampled_from(["", " ", "8", "99", "1234567890", "GPU-", "MIG-8e1f", "gpu-ffff", "zz:00.0", "٣", "-1"]),
    st.text(alphabet="0123456789abcdefGPU-:. ", max_size=12),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ENTRIES, min_size=1, max_size=4).map(",".join))
def test_the_parsed_selection_selects_as_the_text_did(ids: str) -> None:
    try:
        expected: tuple[Gpu, ...] | str = _reference(H100.gpus, ids)
    except UsageError as error:
        expected = error.message
    try:
        got: tuple[Gpu, ...] | str = select_gpus(H100.gpus, parse_selection(ids))
    except UsageError as error:
        got = error.message
    assert got == expected


@pytest.mark.parametrize("machine", ["no-driver", "h100x8-healthy"])
def test_an_empty_select_entry_is_a_usage_error_before_the_machine_is_read(machine: str) -> None:
    """As `--id`'s: not NVML's exit code (no driver), nor an earlier entry's error (12 names no GPU)."""
    from tests.conftest import Cli

    message = "gpudiag: empty entry in --select '12,,1'\n"
    assert Cli().replay(machine, "visible", "--select", "12,,1") == (2, "", message)
