"""The example machines captured on real hardware (driver 580), held against nvidia-smi.

``h100-driver580-idle`` / ``-busy`` (an H100, docs/hardware/h100-80gb-hbm3-driver580/) and
``h200-driver580-idle`` / ``-busy`` (an H200, docs/hardware/h200-driver580/) are gpudiag snapshots
taken on those machines, their details read by gpudiag's probe from the same capture's NVML getters.
gpudiag's reading of them, through the fake NVML and the probe, must say what nvidia-smi said of the
same GPU at the same minute, field by field; a difference is a bug in the fake, the model or the
renderer. Each read-only command's output on them is kept as a golden file. (`python -m
tests.acceptance --offline` compares every -q line, -q -x element and --query-gpu field besides.)
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gpudiag.model import ComputeMode, Gpu, Machine, Reason
from gpudiag.probe.collect import collect
from tests import golden
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
HARDWARE = ROOT / "docs" / "hardware"
CAPTURE = HARDWARE / "h100-80gb-hbm3-driver580"
H100, H200 = "h100-80gb-hbm3-driver580", "h200-driver580"
GOLDEN = golden.GOLDEN / "captured"
MiB = 1 << 20

# Each example and nvidia-smi -q -x of the same GPU (its path under docs/hardware), seconds apart.
PAIRS = [
    ("h100-driver580-idle", f"{H100}/nvidia-smi-q.xml"),
    ("h100-driver580-busy", f"{H100}/nvidia-smi-q-busy.xml"),
    ("h200-driver580-idle", f"{H200}/nvidia-smi-q.xml"),
    ("h200-driver580-busy", f"{H200}/nvidia-smi-q-busy.xml"),
]
# Pairs read at one moment: the H200's idle snapshot was taken 15 s after its -q -x (capture.sh
# records nvidia-smi's views first, then the getters and the snapshot), so its load, power and
# temperature moved in between (118.36 W there, 80.87 W in the snapshot).
SAME_MOMENT = [pair for pair in PAIRS if pair[0] != "h200-driver580-idle"]


def capture_of(name: str) -> Path:
    """The capture folder an example machine was built from."""
    return HARDWARE / (H200 if name.startswith("h200-") else H100)


COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["memory"],
    ["memory", "--json"],
    ["visible"],
    ["visible", "--json"],
    ["check", "--quick"],
    ["check", "--quick", "--json"],
]


def smi_mib(nbytes: int) -> int:
    """MiB as nvidia-smi prints them: rounded up (13 437 304 832 B is 12815 MiB, and the busy
    free 71 580 188 672 B, 68264.19 MiB, is 68265 MiB; so its four figures may add to total + 1)."""
    return -(-nbytes // MiB)


def reading(name: str) -> tuple[Machine, Gpu]:
    machine = collect(replay=name)
    assert len(machine.gpus) == 1
    return machine, machine.gpus[0]


def xml_gpu(file: str) -> tuple[ET.Element, ET.Element]:
    root = ET.parse(HARDWARE / file).getroot()
    gpu = root.find("gpu")
    assert gpu is not None
    return root, gpu


def text(element: ET.Element, path: str) -> str:
    found = element.findtext(path)
    assert found is not None, path
    return found.strip()


def number(element: ET.Element, path: str) -> float:
    """``81559 MiB``, ``700.00 W``, ``35 C``, ``16x``, ``0 %`` → the number."""
    match = re.match(r"-?[\d.]+", text(element, path))
    assert match, (path, text(element, path))
    return float(match.group())


def enabled(element: ET.Element, path: str) -> bool:
    value = text(element, path)
    assert value in ("Enabled", "Disabled"), (path, value)
    return value == "Enabled"


# --- golden outputs ----------------------------------------------------------------------


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("name", [name for name, _ in PAIRS])
def test_every_read_only_command_renders_like_its_golden_file(cli: Cli, name: str, args: list[str]) -> None:
    code, out, err = cli.replay(name, *args, width=120)
    path = GOLDEN / name / f"{'-'.join(a.lstrip('-') for a in args)}.txt"
    golden.assert_matches_golden(path, golden.command_output(code, out, err))
    # A healthy machine; busy, `check` fails only because a process already holds the GPU.
    assert code == (1 if name.endswith("busy") and args[0] == "check" else 0)


# --- the model against nvidia-smi -q -x ---------------------------------------------------


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_identity_and_modes_match_nvidia_smi(name: str, file: str) -> None:
    machine, gpu = reading(name)
    root, smi = xml_gpu(file)
    assert machine.nvml.driver_version.value == text(root, "driver_version")
    assert machine.nvml.cuda_driver_version_text.value == text(root, "cuda_version")
    assert gpu.name.value == text(smi, "product_name")
    assert gpu.uuid.value == text(smi, "uuid")
    assert gpu.pci_bus_id.value == text(smi, "pci/pci_bus_id") == smi.get("id")
    assert gpu.minor_number.value == int(number(smi, "minor_number"))
    assert gpu.persistence_mode.value is enabled(smi, "persistence_mode")
    assert gpu.compute_mode.value is ComputeMode(text(smi, "compute_mode"))
    assert gpu.mig_mode_current.value is enabled(smi, "mig_mode/current_mig")
    assert gpu.mig_mode_pending.value is enabled(smi, "mig_mode/pending_mig")
    assert gpu.mig_devices == () and text(smi, "mig_devices") == "None"
    assert f"P{gpu.pstate.value}" == text(smi, "performance_state")
    assert text(smi, "fan_speed") == "N/A" and gpu.fan_percent.reason is Reason.NOT_SUPPORTED
    assert text(smi, "gpu_recovery_action") == "None" and gpu.recovery_action.value == 0


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_product_architecture_matches_nvidia_smi_and_nvml(name: str, file: str) -> None:
    """nvmlDeviceGetArchitecture answered 9 on the H100 and the H200 (nvml-getters-*.json); nvidia-smi -q
    says Hopper."""
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    details = gpu.details.value
    assert details is not None
    assert details.identity.architecture.value == text(smi, "product_architecture") == "Hopper"
    moment = "busy" if name.endswith("busy") else "idle"
    getters = json.loads((capture_of(name) / f"nvml-getters-{moment}.json").read_text())["device0"]
    assert getters["nvmlDeviceGetArchitecture"] == {"ok": 9}


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_memory_matches_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    memory = gpu.memory.value
    assert memory is not None
    assert smi_mib(memory.total_bytes) == number(smi, "fb_memory_usage/total")
    assert smi_mib(memory.reserved_bytes.get(-1)) == number(smi, "fb_memory_usage/reserved")
    assert smi_mib(memory.used_bytes) == number(smi, "fb_memory_usage/used")
    assert smi_mib(memory.free_bytes) == number(smi, "fb_memory_usage/free")


@pytest.mark.parametrize(("name", "file"), SAME_MOMENT)
def test_load_temperature_and_power_match_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    utilization = gpu.utilization.value
    assert utilization is not None
    assert utilization.gpu_percent == number(smi, "utilization/gpu_util")
    assert utilization.memory_percent == number(smi, "utilization/memory_util")
    assert gpu.temperature_c.value == number(smi, "temperature/gpu_temp")
    assert gpu.power_limit_w.value == number(smi, "gpu_power_readings/current_power_limit")
    assert gpu.power_limit_w.value == number(smi, "gpu_power_readings/default_power_limit")
    # why a tolerance: gpudiag's snapshot and nvidia-smi sampled the 1 s power average a few
    # seconds apart (idle 71.94 W vs 71.92 W; busy 118.49 W vs 118.69 W).
    assert gpu.power_draw_w.value == pytest.approx(number(smi, "gpu_power_readings/average_power_draw"), abs=1.0)


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_pcie_link_matches_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    link = "pci/pci_gpu_link_info"
    assert gpu.pcie.gen_current.value == number(smi, f"{link}/pcie_gen/current_link_gen")
    assert gpu.pcie.gen_max.value == number(smi, f"{link}/pcie_gen/max_link_gen")
    assert gpu.pcie.gen_gpu_max.value == number(smi, f"{link}/pcie_gen/max_device_link_gen")
    assert gpu.pcie.width_current.value == number(smi, f"{link}/link_widths/current_link_width")
    assert gpu.pcie.width_max.value == number(smi, f"{link}/link_widths/max_link_width")


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_ecc_retired_pages_and_remapped_rows_match_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    assert gpu.ecc_mode_current.value is enabled(smi, "ecc_mode/current_ecc")
    assert gpu.ecc_mode_pending.value is enabled(smi, "ecc_mode/pending_ecc")
    for scope in ("volatile", "aggregate"):
        # NVML's total counts every memory location nvidia-smi lists separately.
        corrected = number(smi, f"ecc_errors/{scope}/sram_correctable") + number(
            smi, f"ecc_errors/{scope}/dram_correctable"
        )
        uncorrected = sum(
            number(smi, f"ecc_errors/{scope}/{part}")
            for part in ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable")
        )
        assert getattr(gpu.ecc_errors, f"{scope}_corrected").value == corrected
        assert getattr(gpu.ecc_errors, f"{scope}_uncorrected").value == uncorrected
    assert text(smi, "retired_pages/multiple_single_bit_retirement/retired_count") == "N/A"
    assert gpu.retired_pages.reason is Reason.NOT_SUPPORTED
    rows = gpu.remapped_rows.value
    assert rows is not None
    assert rows.correctable == number(smi, "remapped_rows/remapped_row_corr")
    assert rows.uncorrectable == number(smi, "remapped_rows/remapped_row_unc")
    assert rows.pending is (text(smi, "remapped_rows/remapped_row_pending") == "Yes")
    assert rows.failure is (text(smi, "remapped_rows/remapped_row_failure") == "Yes")


_CLOCK_EVENTS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_clock_event_reasons_match_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    shown = {
        bit
        for tag, bit in _CLOCK_EVENTS.items()
        if text(smi, f"clocks_event_reasons/clocks_event_reason_{tag}") == "Active"
    }
    assert gpu.clock_event_reasons.value == sum(shown)


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_processes_match_nvidia_smi(name: str, file: str) -> None:
    _, gpu = reading(name)
    _, smi = xml_gpu(file)
    listed = [
        (
            int(number(p, "pid")),
            text(p, "type"),
            text(p, "gpu_instance_id"),
            text(p, "compute_instance_id"),
            number(p, "used_memory"),
        )
        for p in smi.iterfind("processes/process_info")
    ]
    mine = [
        (
            p.pid,
            p.kind.value,
            "N/A" if p.gpu_instance_id is None else str(p.gpu_instance_id),
            "N/A" if p.compute_instance_id is None else str(p.compute_instance_id),
            smi_mib(p.used_memory_bytes.get(-1)),
        )
        for p in gpu.processes.get(())
    ]
    assert mine == listed
    assert bool(listed) is name.endswith("busy")


@pytest.mark.parametrize("name", [name for name, _ in PAIRS])
def test_temperature_thresholds_match_the_nvml_capture(name: str) -> None:
    """nvidia-smi 580 prints thresholds relative to T.Limit, so the absolute ones come from NVML
    itself, read on a GPU of the same model and driver (nvml-getters-idle.json)."""
    getters = json.loads((capture_of(name) / "nvml-getters-idle.json").read_text())["device0"]
    _, gpu = reading(name)
    assert gpu.temperature_shutdown_c.value == getters["nvmlDeviceGetTemperatureThreshold(0,)"]["ok"]
    assert gpu.temperature_slowdown_c.value == getters["nvmlDeviceGetTemperatureThreshold(1,)"]["ok"]
    assert gpu.numa_node.reason is Reason.NOT_SUPPORTED
    assert getters["nvmlDeviceGetNumaNodeId"] == {"error": "NVMLError_NotSupported"}


# --- the query CSV and the text nvidia-smi printed ------------------------------------------


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("h100-driver580-idle", f"{H100}/nvidia-smi-query-gpu.csv"),
        ("h200-driver580-idle", f"{H200}/nvidia-smi-query-gpu-all.csv"),  # every field, seconds before the snapshot
    ],
)
def test_the_idle_machine_matches_nvidia_smi_query_gpu(name: str, file: str) -> None:
    machine, gpu = reading(name)
    with (HARDWARE / file).open() as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    row = dict(zip(rows[0], rows[1], strict=True))
    memory = gpu.memory.value
    assert memory is not None
    assert row["uuid"] == gpu.uuid.value and row["pci.bus_id"] == gpu.pci_bus_id.value
    assert row["driver_version"] == machine.nvml.driver_version.value
    assert row["memory.total [MiB]"] == f"{smi_mib(memory.total_bytes)} MiB"
    assert row["memory.used [MiB]"] == f"{smi_mib(memory.used_bytes)} MiB"
    assert row["memory.free [MiB]"] == f"{smi_mib(memory.free_bytes)} MiB"
    assert row["memory.reserved [MiB]"] == f"{smi_mib(memory.reserved_bytes.get(-1))} MiB"
    assert row["power.limit [W]"] == f"{gpu.power_limit_w.value:.2f} W"
    assert row["temperature.gpu"] == str(gpu.temperature_c.value)
    assert row["pstate"] == f"P{gpu.pstate.value}"
    assert row["compute_mode"] == "Default" and gpu.compute_mode.value is ComputeMode.DEFAULT
    assert row["mig.mode.current"] == "Disabled" and gpu.mig_mode_current.value is False
    assert row["persistence_mode"] == "Enabled" and gpu.persistence_mode.value is True
    assert row["ecc.mode.current"] == "Enabled" and gpu.ecc_mode_current.value is True
    assert (row["pcie.link.gen.current"], row["pcie.link.gen.max"]) == ("5", "5")
    assert (row["pcie.link.width.current"], row["pcie.link.width.max"]) == ("16", "16")
    assert row["fan.speed [%]"] == "[N/A]" and gpu.fan_percent.value is None
    # why a tolerance: a separate sample, seconds apart (H100: 71.89 W there, 71.94 W in the snapshot;
    # H200: 80.98 W and 80.87 W).
    assert float(row["power.draw [W]"].split()[0]) == pytest.approx(gpu.power_draw_w.value, abs=1.0)


_SMI_ROW = re.compile(
    r"\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persistence>On|Off)\s+\|\s+(?P<bus>\S+)\s+(?P<disp>\S+)\s+\|\s+"
    r"(?P<ecc>\S+)\s+\|\n\|\s+(?P<fan>\S+)\s+(?P<temp>\d+)C\s+(?P<perf>P\d+)\s+(?P<power>\d+)W\s+/\s+(?P<cap>\d+)W\s+\|"
    r"\s+(?P<used>\d+)MiB\s+/\s+(?P<total>\d+)MiB\s+\|\s+(?P<util>\d+)%\s+(?P<compute>\S+)\s+\|\n"
    r"\|\s+\|\s+\|\s+(?P<mig>\S+)\s+\|"
)


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("h100-driver580-idle", "nvidia-smi.txt"),
        # why another GPU: nvidia-smi-busy.txt is the same workload on a second H100 of the kind
        # (PID 739, a minute later). Its memory figures are the busy snapshot's to the MiB;
        # its temperature, power and PID are its own, so they are not compared.
        ("h100-driver580-busy", "nvidia-smi-busy.txt"),
        # The H200's table was printed first in its capture, 17 s before the idle snapshot (35C, 124W
        # idle): its memory and identity are compared, its temperature not.
        ("h200-driver580-idle", "nvidia-smi.txt"),
        ("h200-driver580-busy", "nvidia-smi-busy.txt"),
    ],
)
def test_the_nvidia_smi_table_says_what_gpudiag_read(name: str, file: str) -> None:
    _, gpu = reading(name)
    shown = (capture_of(name) / file).read_text()
    match = _SMI_ROW.search(shown)
    assert match, shown
    row: dict[str, Any] = match.groupdict()
    memory = gpu.memory.value
    assert memory is not None
    assert row["name"] == gpu.name.value and row["bus"] == gpu.pci_bus_id.value
    assert row["persistence"] == "On" and gpu.persistence_mode.value is True
    assert int(row["ecc"]) == gpu.ecc_errors.volatile_uncorrected.value
    assert row["fan"] == "N/A" and row["perf"] == f"P{gpu.pstate.value}"
    assert int(row["cap"]) == gpu.power_limit_w.value
    assert (int(row["used"]), int(row["total"])) == (smi_mib(memory.used_bytes), smi_mib(memory.total_bytes))
    assert row["compute"] == "Default" and row["mig"] == "Disabled"
    processes = re.findall(r"\|\s+0\s+N/A\s+N/A\s+\d+\s+C\s+\S+\s+(\d+)MiB \|", shown)
    assert [int(p) for p in processes] == [smi_mib(p.used_memory_bytes.get(-1)) for p in gpu.processes.get(())]
    if name == "h100-driver580-idle":
        assert int(row["temp"]) == gpu.temperature_c.value


@pytest.mark.parametrize(("name", "file"), PAIRS)
def test_gpudiag_shows_memory_in_mib_as_nvidia_smi_does(cli: Cli, name: str, file: str) -> None:
    _, smi = xml_gpu(file)
    used, total, free, reserved = (
        int(number(smi, f"fb_memory_usage/{part}")) for part in ("used", "total", "free", "reserved")
    )
    _, listed, _ = cli.replay(name, "list", width=160)
    assert f"{used}MiB / {total}MiB" in listed
    _, memory, _ = cli.replay(name, "memory", width=160)
    assert f"{used}MiB / {total}MiB" in memory and f"{free}MiB" in memory and f"{reserved}MiB" in memory
