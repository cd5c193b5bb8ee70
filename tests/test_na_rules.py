"""nvidia-smi's N/A rules from raw NVML answers, held against what nvidia-smi printed on both boards.

The H200's capture recorded the raw answers of nvmlDeviceGetPlatformInfo, nvmlDeviceGetGpuFabricInfoV
and the PCIe atomic-caps field values (``nvml-getters-idle.json``) beside nvidia-smi's ``-q``, ``-q -x``
and ``--query-gpu``. Those answers are decoded here as the probe decodes them (pynvml's own structs)
and rendered by gpudiag's views; every line they feed must read as nvidia-smi printed it on the H200,
and on the H100, whose nvidia-smi printed the same lines (its capture predates the recording of these
calls). The rules live in render.format (Q_NA_RULES, QUERY_NA_RULES, PEER_TYPES, the GUID's width).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import msgspec
import pynvml
import pytest

from gpudiag.details.identity import FABRIC, PLATFORM
from gpudiag.model import Gpu, Machine, Reading
from gpudiag.query import gpu_fields
from gpudiag.readings import FI_PCIE_ATOMICS_INBOUND, FI_PCIE_ATOMICS_OUTBOUND
from gpudiag.render import csv_query, details_view, details_xml
from gpudiag.sources import collect

HARDWARE = Path(__file__).resolve().parent.parent / "docs" / "hardware"
RAW = HARDWARE / "h200-driver580" / "nvml-getters-idle.json"  # the one capture of these calls
BOARDS = ("h200-driver580", "h100-80gb-hbm3-driver580")
# The lines these answers feed (Module Id comes from nvmlDeviceGetModuleId, not the platform struct).
Q_PREFIXES = ("Platform Info/", "Fabric/", "PCI/Atomic Caps")
Q_SKIPPED = {"Platform Info/Module Id"}
XML_PATHS = ("platformInfo/*", "fabric//*", "pci/atomic_caps_outbound", "pci/atomic_caps_inbound")
QUERY_PREFIXES = ("platform.", "fabric.")
QUERY_SKIPPED = {"platform.module_id"}


def _raw() -> dict[str, Any]:
    device: dict[str, Any] = json.loads(RAW.read_text())["device0"]
    return device


def _platform(raw: dict[str, Any]) -> Any:
    """The H200's answer in the struct nvidia-ml-py 13 passes (its c_char members read back as str)."""
    struct = pynvml.c_nvmlPlatformInfo_v2_t()
    for name, value in raw.items():
        if isinstance(value, dict):
            setattr(struct, name, bytes.fromhex(value["hex"]))
        elif isinstance(value, str):
            setattr(struct, name, value.encode("latin-1"))
        else:
            setattr(struct, name, value)
    return struct


def _fabric(raw: dict[str, Any]) -> Any:
    struct = pynvml.c_nvmlGpuFabricInfo_v3_t()
    for name, value in raw.items():
        if name == "clusterUuid":
            for i, byte in enumerate(value):
                struct.clusterUuid[i] = byte
        else:
            setattr(struct, name, value)
    return struct


def _field(raw: dict[str, Any], fid: int) -> int:
    for name, answer in raw.items():
        if name.startswith("nvmlDeviceGetFieldValues"):
            for value in answer.get("ok", []):
                if value["fieldId"] == fid and value["scopeId"] == 0:
                    assert value["nvmlReturn"] == 0
                    return int(value["value"]["uiVal"])
    raise AssertionError(f"field {fid} not captured")


def machine_with_h200_answers() -> tuple[Machine, Gpu]:
    """The captured H100's example with the H200's platform, fabric and atomic-caps answers decoded in."""
    raw = _raw()
    machine = collect("h100-driver580-idle")
    gpu = machine.gpus[0]
    details = gpu.details.value
    assert details is not None
    identity = msgspec.structs.replace(
        details.identity,
        platform=Reading.of(PLATFORM.decode(_platform(raw["nvmlDeviceGetPlatformInfo"]["ok"]))),
        fabric=Reading.of(FABRIC.decode(_fabric(raw["nvmlDeviceGetGpuFabricInfoV"]["ok"]))),
    )
    pcie = msgspec.structs.replace(
        details.pcie,
        atomic_caps_outbound=Reading.of(_field(raw, FI_PCIE_ATOMICS_OUTBOUND)),
        atomic_caps_inbound=Reading.of(_field(raw, FI_PCIE_ATOMICS_INBOUND)),
    )
    details = msgspec.structs.replace(details, identity=identity, pcie=pcie)
    gpu = msgspec.structs.replace(gpu, details=Reading.of(details))
    return msgspec.structs.replace(machine, gpus=(gpu,)), gpu


def q_lines(text: str) -> dict[str, str]:
    """`-q` text as {"Heading/Label": value} for the lines under the first GPU."""
    out: dict[str, str] = {}
    stack: list[str] = []
    for line in text.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        level = (len(line) - len(line.lstrip())) // 4 - 1
        label, colon, value = line.strip().partition(" :")
        del stack[level:]
        if colon:
            out.setdefault("/".join([*stack, label.strip()]), value.strip())
        else:
            stack.append(label.strip())
    return out


def xml_values(text: str) -> dict[str, str]:
    gpu = ET.fromstring(_strip_doctype(text)).find("gpu")
    assert gpu is not None
    out = {}
    for path in XML_PATHS:
        for element in gpu.iterfind(path):
            if len(element) == 0:
                out[f"{path.split('/')[0]}/{element.tag}"] = (element.text or "").strip()
    return out


def _strip_doctype(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(("<?xml", "<!DOCTYPE")))


def query_values(board: str) -> dict[str, str]:
    rows = (HARDWARE / board / "nvidia-smi-query-gpu-each-field.tsv").read_text().splitlines()
    return {name: value for name, _, value in (row.partition("\t") for row in rows)}


@pytest.mark.parametrize("board", BOARDS)
def test_q_prints_na_where_nvidia_smi_did(board: str) -> None:
    machine, gpu = machine_with_h200_answers()
    want = {k: v for k, v in q_lines((HARDWARE / board / "nvidia-smi-q.txt").read_text()).items()}
    got = q_lines(details_view.render(machine, (gpu,)))
    keys = [k for k in want if k.startswith(Q_PREFIXES) and k not in Q_SKIPPED]
    assert len(keys) == 19  # 6 platform lines, 2 atomic caps, 11 fabric lines
    for key in keys:
        assert got[key].split(" (")[0] == want[key], key  # gpudiag adds why after N/A


@pytest.mark.parametrize("board", BOARDS)
def test_q_x_prints_na_where_nvidia_smi_did(board: str) -> None:
    machine, gpu = machine_with_h200_answers()
    want = xml_values((HARDWARE / board / "nvidia-smi-q.xml").read_text())
    got = xml_values(details_xml.render(machine, (gpu,)))
    want.pop("platformInfo/module_id")
    assert len(want) == 19
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("board", BOARDS)
def test_query_gpu_prints_what_nvidia_smi_did(board: str) -> None:
    machine, gpu = machine_with_h200_answers()
    want = {k: v for k, v in query_values(board).items() if k.startswith(QUERY_PREFIXES) and k not in QUERY_SKIPPED}
    assert len(want) == 17
    field = gpu_fields.field
    got = {name: csv_query.value(machine, gpu, field(name)) for name in want}  # type: ignore[arg-type]
    assert got == want
    assert got["platform.peer_type"] == "Direct Connected"
    assert got["platform.gpu_fabric_guid"] == "0x0000000000000000"  # 16 hex digits, as nvidia-smi prints


def test_the_h200s_raw_answers_are_what_the_rules_read() -> None:
    """The raw values the rules were derived from: fabric NOT_SUPPORTED with status 0, atomic caps 0
    answered SUCCESS, a platform struct with no chassis serial and a zero GUID."""
    raw = _raw()
    fabric = raw["nvmlDeviceGetGpuFabricInfoV"]["ok"]
    assert (fabric["state"], fabric["status"], fabric["cliqueId"]) == (0, 0, 0)
    assert (_field(raw, FI_PCIE_ATOMICS_OUTBOUND), _field(raw, FI_PCIE_ATOMICS_INBOUND)) == (0, 0)
    platform = PLATFORM.decode(_platform(raw["nvmlDeviceGetPlatformInfo"]["ok"]))
    assert (platform.chassis_serial_number, platform.fabric_guid) == ("", "0x" + "0" * 32)
    assert (platform.slot_number, platform.tray_index, platform.host_id, platform.peer_type) == (0, 0, 1, 0)


def test_a_gpu_in_a_fabric_shows_its_fabric_and_a_placed_gpu_its_platform() -> None:
    """The rules hide only what nvidia-smi hides: a registered fabric and a platform that reports a
    chassis serial print their values in -q."""
    machine, gpu = machine_with_h200_answers()
    details = gpu.details.value
    assert details is not None
    platform = msgspec.structs.replace(
        details.identity.platform.value, chassis_serial_number="1821X0001", fabric_guid="0x" + "ab" * 8 + "00" * 8
    )
    fabric = msgspec.structs.replace(details.identity.fabric.value, state=3, clique_id=7)
    identity = msgspec.structs.replace(details.identity, platform=Reading.of(platform), fabric=Reading.of(fabric))
    pcie = msgspec.structs.replace(details.pcie, atomic_caps_outbound=Reading.of(0x3))
    gpu = msgspec.structs.replace(
        gpu, details=Reading.of(msgspec.structs.replace(details, identity=identity, pcie=pcie))
    )
    got = q_lines(details_view.render(machine, (gpu,)))
    assert got["Platform Info/Chassis Serial Number"] == "1821X0001"
    assert got["Platform Info/Peer Type"] == "Direct Connected"
    assert got["Platform Info/GPU Fabric GUID"] == "0xabababababababab"
    assert got["Fabric/State"] == "Completed"
    assert got["Fabric/CliqueId"] == "7"
    assert got["PCI/Atomic Caps Outbound"] == "0x3"
    assert got["PCI/Atomic Caps Inbound"] == "N/A (no PCIe atomic operations reported)"
