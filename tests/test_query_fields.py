"""`list --query` / `--query-compute-apps`: every nvidia-smi field name, printed as the real H100 printed it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudiag.model import ALL_GROUPS
from gpudiag.query import gpu_fields
from gpudiag.render import csv_query
from gpudiag.sources import collect
from tests.test_list_cli import run

CAPTURE = Path(__file__).resolve().parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
IDLE = "h100-driver580-idle"
BUSY = "h100-driver580-busy"

# Readings that change from one moment to the next: compared by format, not value.
VOLATILE = {
    "timestamp": r"\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}",
    "power.draw": r"\d+\.\d{2} W",
    "power.draw.average": r"\d+\.\d{2} W",
    "power.draw.instant": r"\d+\.\d{2} W",
    "temperature.gpu": r"\d+",
    "temperature.gpu.tlimit": r"\d+",
    "temperature.memory": r"\d+",
    "clocks.current.graphics": r"\d+ MHz",
    "clocks.current.sm": r"\d+ MHz",
    "clocks.current.video": r"\d+ MHz",
}
# The example is the idle snapshot's H100; the field capture was taken on another H100 of the same kind
# (same SKU, driver, VBIOS): what tells two boards apart is compared by format.
PER_BOARD = {
    "uuid": r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "serial": r"\d{13}",
    "platform.module_id": r"\d+",
}
# Names nvidia-smi printed a value for on that H100 that the example does not record (they print [N/A]):
# gpudiag reads them (nvmlDeviceGetPlatformInfo), but no capture holds that call's answer; nvidia-smi -q
# printed N/A for the same lines on the snapshot's board. tests/hardware/tools/nvml_getters.py records it
# on the next GPU machine (python -m tests.acceptance).
NOT_READ_YET = {
    "platform.chassis_serial_number",
    "platform.slot_number",
    "platform.tray_index",
    "platform.host_id",
    "platform.peer_type",
    "platform.gpu_fabric_guid",
}


def _capture() -> list[tuple[str, str]]:
    rows = (CAPTURE / "nvidia-smi-query-gpu-each-field.tsv").read_text().splitlines()
    return [(name, value) for name, _, value in (row.partition("\t") for row in rows)]


def test_the_table_has_every_name_and_alias_of_driver_580_in_order() -> None:
    listed = [line.split(" or ") for line in (CAPTURE / "query-gpu-fields.txt").read_text().splitlines()]
    assert len(listed) == len(_capture())  # the capture asked nvidia-smi for each of them, one by one
    table = [[f.name, *f.aliases] for f in gpu_fields.fields()]
    assert [dict.fromkeys(names) for names in table] == [dict.fromkeys(names) for names in listed]


def test_every_field_prints_what_nvidia_smi_printed_on_the_h100() -> None:
    machine = collect(IDLE, facts=ALL_GROUPS)
    gpu = machine.gpus[0]
    differ = set()
    for (name, want), field in zip(_capture(), gpu_fields.fields(), strict=True):
        assert field.name == name
        got = csv_query.value(machine, gpu, field)
        pattern = VOLATILE.get(name) or PER_BOARD.get(name)
        if pattern:
            assert re.fullmatch(pattern, got), (name, got)
            assert re.fullmatch(pattern, want), (name, want)
        elif got != want:
            differ.add(name)
            assert got == "[N/A]", (name, got, want)
    assert differ == NOT_READ_YET
    # What gpudiag leaves unanswered, nvidia-smi could not answer on this H100 either (or NOT_READ_YET).
    unanswered = {f.name for f in gpu_fields.fields() if not f.answered}
    assert unanswered - NOT_READ_YET <= {name for name, want in _capture() if want in ("[N/A]", "N/A")}


def test_the_list_page_says_how_many_fields_there_are_and_how_many_are_answered() -> None:
    readme = " ".join((Path(__file__).resolve().parent.parent / "docs" / "commands" / "list.md").read_text().split())
    read = sum(1 for f in gpu_fields.fields() if f.answered)
    assert f"({len(gpu_fields.fields())} names," in readme
    assert f"{read} of the {len(gpu_fields.fields())} are answered on the captured H100" in readme


def test_an_alias_keeps_its_name_in_the_header_and_units_stay_under_nounits() -> None:
    code, out, _ = run(
        "--replay", IDLE, "list", "--query", "gpu_name,clocks.sm,gpu.power.draw.average", "--format", "csv,nounits"
    )
    assert code == 0
    header, row = out.splitlines()
    assert header == "gpu_name, clocks.sm [MHz], gpu.power.draw.average [W]"
    assert row == "NVIDIA H100 80GB HBM3, 345, 71.92"


def test_power_limit_is_the_requested_limit_and_enforced_the_enforced_one() -> None:
    machine = collect(IDLE, facts=ALL_GROUPS)
    d = machine.gpus[0].details.value
    assert d is not None
    # Not equal on every GPU (an administrator's cap, a thermal or board limit): read from two calls.
    limit, enforced = gpu_fields.field("power.limit"), gpu_fields.field("enforced.power.limit")
    assert limit is not None and enforced is not None and limit.answer is not None and enforced.answer is not None
    assert limit.answer.key != enforced.answer.key
    _, out, _ = run("--replay", IDLE, "list", "--query", "power.limit,enforced.power.limit", "--format", "csv")
    assert out.splitlines()[1] == "700.00 W, 700.00 W"


def test_a_field_nvml_cannot_answer_is_accepted_and_prints_na() -> None:
    code, out, _ = run("--replay", IDLE, "list", "--query", "driver_model.current,fabric.state", "--format", "csv")
    assert code == 0
    assert out.splitlines()[1] == "[N/A], N/A"


def test_old_snapshots_print_na_for_detail_fields() -> None:
    code, out, _ = run("--replay", "h100x8-healthy", "list", "--query", "index,clocks.sm,serial", "--id", "0")
    assert code == 0
    assert out.splitlines()[1] == "0, [N/A], [N/A]"


@pytest.mark.parametrize(("typed", "suggestion"), [("clocks.smm", "clocks.sm"), ("memory.usd", "memory.used")])
def test_an_unknown_field_is_a_usage_error_naming_the_closest(typed: str, suggestion: str) -> None:
    code, _, err = run("--replay", IDLE, "list", "--query", f"name,{typed}")
    assert code == 2
    assert f"unknown field {typed!r}; did you mean {suggestion!r}?" in err


def test_query_compute_apps_matches_nvidia_smi_on_the_busy_h100() -> None:
    want = (CAPTURE / "nvidia-smi-query-compute-apps-busy.csv").read_text().splitlines()
    fields = want[0].replace(" [MiB]", "").replace(", ", ",")
    code, out, _ = run("--replay", BUSY, "list", "--query-compute-apps", fields, "--format", "csv")
    assert code == 0
    got = out.splitlines()
    assert got[0] == want[0]
    # Another moment on another H100 (the busy snapshot's): the same kind of row, the same process name.
    formats = [
        VOLATILE["timestamp"],
        "NVIDIA H100 80GB HBM3",
        "00000000:00:06.0",
        PER_BOARD["serial"],
        PER_BOARD["uuid"],
        r"\d+",
        "python3",
        r"\d+ MiB",
    ]
    for text in (got[1], want[1]):
        cells = text.split(", ")
        assert len(cells) == len(formats) and all(re.fullmatch(f, c) for f, c in zip(formats, cells, strict=True)), text
    _, aliases, _ = run(
        "--replay", BUSY, "list", "--query-compute-apps", "pid,name,used_memory", "--format", "csv,noheader,nounits"
    )
    assert aliases == "485, python3, 12806\n"


def test_query_compute_apps_with_no_process_prints_only_the_header() -> None:
    code, out, _ = run("--replay", IDLE, "list", "--query-compute-apps", "pid,used_memory", "--format", "csv")
    assert (code, out) == (0, "pid, used_memory [MiB]\n")


def test_a_suggestion_keeps_nvidia_smis_spelling() -> None:
    _, _, err = run("--replay", IDLE, "list", "--query", "encoder.stats.sessioncnt")
    assert "did you mean 'encoder.stats.sessionCount'?" in err
