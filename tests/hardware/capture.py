"""Example machines built from a real-hardware capture, by running gpudiag's own probe on it.

A developer tool, kept with the acceptance tooling (not in the installed package):
``docs/hardware/<gpu>/nvml-getters-*.json`` holds what every simple NVML getter returned on
one GPU (a value, or the NVMLError class it raised; ``tests/hardware/tools/nvml_getters.py``
records it). :class:`CaptureNvml` answers the same calls from that file, so
:class:`~gpudiag.probe.nvml.NvmlSession` reads the captured GPU exactly as it read the real one.
The calls that take arguments or structs the capture did not try (InfoROM objects, affinity
masks, some field values, structs passed by reference) are answered from nvidia-smi's own output
of the same GPU (``nvidia-smi-query-gpu-each-field.tsv``, ``nvidia-smi-q.txt``, ``-q.xml``,
``nvidia-smi-topo-m.txt``), listed in :data:`FROM_NVIDIA_SMI` with where each comes from; the
few nothing recorded (:data:`NOT_CAPTURED`) answer "not recorded".

    python -m tests.hardware.capture idle > machine.json
    python -m tests.hardware.capture --into gpudiag/machines/h100-driver580-idle.json idle
    python -m tests.hardware.capture --into gpudiag/machines/h200-driver580-idle.json idle docs/hardware/h200-driver580

NVML's GPM (profiling metrics) is recorded apart, on the GPU machine, as ``nvml-gpm-<moment>.json``
(``python -m tests.hardware.capture --record-gpm [SECONDS]``); the capture tool answers GPM's calls
from it, and "not recorded" without it (the H100 capture of 2026-11-22 has none).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from gpudiag.model import ALL_GROUPS, MACHINE_SCHEMA, HostProcess, HostState, Machine, Reading, Reason
from gpudiag.probe.nvml import NvmlSession
from gpudiag.readings import GPU_READINGS, TEXT, Spec, field_key
from gpudiag.replay import fixtures
from gpudiag.replay.c_boundary import CFake, unversioned
from gpudiag.replay.fake_answers import FakeHandle, NotRecordedError

CAPTURE_DIR = Path(__file__).resolve().parent.parent.parent / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
MIB = 1 << 20

_ERROR_CODES = {
    type(pynvml.NVMLError(getattr(pynvml, name))).__name__: getattr(pynvml, name)
    for name in dir(pynvml)
    if name.startswith("NVML_ERROR_") and isinstance(getattr(pynvml, name), int)
}

# Calls the getter capture did not make with these arguments, answered from nvidia-smi's
# output of the same GPU at the same time: key -> value, or an NVMLError class name.
FROM_NVIDIA_SMI: dict[str, Any] = {
    "nvmlDeviceGetInforomVersion(0,)": "2.1",  # inforom.oem
    "nvmlDeviceGetInforomVersion(1,)": "7.16",  # inforom.ecc
    "nvmlDeviceGetInforomVersion(2,)": "NVMLError_NotSupported",  # inforom.pwr [N/A]
    "nvmlDeviceValidateInforom": None,  # inforom.checksum_validation valid
    "nvmlDeviceGetCpuAffinity(1,)": [0xFFFF],  # topo -m: CPU Affinity 0-15
    "nvmlDeviceGetMemoryAffinity(1, 0)": [0x1],  # topo -m: NUMA Affinity 0
    "nvmlDeviceGetMemoryErrorCounter(0, 0, 5)": "NVMLError_NotSupported",  # texture_shm: not listed
    "nvmlDeviceGetMemoryErrorCounter(0, 1, 5)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(1, 0, 5)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(1, 1, 5)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(0, 0, 6)": "NVMLError_NotSupported",  # cbu [N/A]
    "nvmlDeviceGetMemoryErrorCounter(0, 1, 6)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(1, 0, 6)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(1, 1, 6)": "NVMLError_NotSupported",
    "nvmlDeviceGetMemoryErrorCounter(0, 0, 7)": 0,  # sram 0
    "nvmlDeviceGetMemoryErrorCounter(0, 1, 7)": 0,
    "nvmlDeviceGetMemoryErrorCounter(1, 0, 7)": 0,
    "nvmlDeviceGetMemoryErrorCounter(1, 1, 7)": 0,
    "nvmlDeviceGetRetiredPages(0,)": "NVMLError_NotSupported",  # retired_pages.single_bit_ecc.count [N/A]
    # -q -x's supported_clocks: each memory clock's graphics clocks, 1980 down to 345 MHz by 15.
    "nvmlDeviceGetSupportedGraphicsClocks(2619,)": list(range(1980, 344, -15)),
    "nvmlDeviceGetSupportedGraphicsClocks(1593,)": list(range(1980, 344, -15)),
    # Structs passed by reference, which the getter capture could not call:
    "nvmlDeviceGetCapabilities": {"capMask": 0},  # -q: Capabilities / EGM : disabled
    "nvmlDeviceGetGpuFabricInfoV": "NVMLError_NotSupported",  # -q: every Fabric line N/A (fabric.* N/A)
    "nvmlDeviceWorkloadPowerProfileGetCurrentProfiles": "NVMLError_NotSupported",  # Workload Power Profiles N/A
}
# Calls nothing of the capture answers: "not recorded" in the examples, until a capture records them
# (tests/hardware/tools/nvml_getters.py now calls them). nvmlDeviceGetPlatformInfo: -q printed N/A for
# the platform lines while --query-gpu printed placeholder values on another board of the kind, so
# neither can stand for the call's answer.
NOT_CAPTURED = frozenset({"nvmlDeviceGetPlatformInfo"})
# Field values by id (a scoped one by (id, scope)): power.draw.average / .instant (mW), the clock-event
# counters (ns); from -q: Replay Number Rollovers 0, the T.Limit thresholds (-8, -2, 0, 0 C), the memory's
# average power (mW); what -q printed N/A for: NVML's NOT_SUPPORTED.
_NOT_SUPPORTED = "NVMLError_NotSupported"
_FROM_Q: dict[Any, Any] = {
    95: 0,
    193: -8,
    194: -2,
    195: 0,
    196: 0,
    228: _NOT_SUPPORTED,  # Atomic Caps Outbound N/A
    229: _NOT_SUPPORTED,  # Atomic Caps Inbound N/A
    251: _NOT_SUPPORTED,  # Power Smoothing N/A
    (186, 2): _NOT_SUPPORTED,  # GPU Memory Power Readings / Instantaneous Power Draw N/A
    **{(field, 1): _NOT_SUPPORTED for field in (185, 186, 187, 188, 189, 190, 192)},  # Module Power Readings N/A
}
FIELDS_FROM_NVIDIA_SMI: dict[str, dict[Any, Any]] = {
    "idle": {
        185: 71290,
        186: 71890,
        74: 0,
        76: 0,
        269: 0,
        270: 0,
        271: 0,
        230: 0,
        301: 0,
        302: 0,
        (185, 2): 37640,  # nvidia-smi-q.txt: GPU Memory Power Readings / Average Power Draw 37.64 W
        **_FROM_Q,
    },
    "busy": {
        185: 118690,
        186: 119570,
        74: 0,
        76: 0,
        269: 0,
        270: 0,
        271: 0,
        230: 0,
        301: 0,
        302: 0,
        (185, 2): 36070,  # nvidia-smi-q-busy.xml: gpu_memory_power_readings/average_power_draw
        **_FROM_Q,
    },  # from nvidia-smi-q-busy.xml
}
# The busy capture's process as nvidia-smi --query-compute-apps showed it (pid 1128, python3).
BUSY_PROCESS_NAME = "python3"
# Field values the probe reads that neither the getter capture nor nvidia-smi's output holds: answered
# "not recorded", as a replay answers what its snapshot lacks.
FIELDS_NOT_CAPTURED = {
    75: "the thermal policy's clock-holding time: nvidia-smi shows no counter for it",
    77: "the board limit policy's: idem",
    78: "the low utilization policy's: idem",
    79: "the reliability policy's: idem",
    138: "NVLink data sent: not asked in the getter capture (this H100 has no NVLink peers)",
    139: "NVLink data received: idem",
    197: "PCIe bytes sent: not asked in the getter capture",
    198: "PCIe bytes received: idem",
}
# What nvidia-smi's output supplies for each capture (by its folder in docs/hardware): calls, and field
# values by moment. A capture not listed is answered from its getters alone.
SUPPLEMENTS: dict[str, tuple[dict[str, Any], dict[str, dict[Any, Any]]]] = {
    "h100-80gb-hbm3-driver580": (FROM_NVIDIA_SMI, FIELDS_FROM_NVIDIA_SMI),
    "h200-driver580": (
        {
            "nvmlDeviceValidateInforom": None,  # inforom.checksum_validation valid
            "nvmlDeviceGetCpuAffinity(1,)": [0xFFFF],  # topo -m: CPU Affinity 0-15
            "nvmlDeviceGetMemoryAffinity(1, 0)": [0x1],  # topo -m: NUMA Affinity 0
        },
        {},
    ),
}
# NVML GPM (profiling metrics), recorded by `python -m tests.hardware.capture --record-gpm` into this file
# beside the getter capture; without it, GPM's calls answer "not recorded".
GPM_CAPTURE = "nvml-gpm-{moment}.json"


def _namespace(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"hex"}:  # a byte array of a struct (nvml_getters.py)
        return bytes.fromhex(value["hex"])
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def _answer(value: Any) -> Any:
    if isinstance(value, str) and value in _ERROR_CODES:
        raise pynvml.NVMLError(_ERROR_CODES[value])
    return _namespace(value)


class CaptureNvml(CFake):
    """A ``pynvml`` whose library answers for the one captured GPU: each C function writes what the
    capture shows pynvml's wrapper returned (through the replay's own answer shaping), so the probe
    reads it through pynvml's wrappers, as it read the real GPU."""

    RAW = frozenset({"nvmlDeviceGetSramEccErrorStatus", "nvmlGpmMetricsGet"})

    def __init__(
        self,
        getters: dict[str, Any],
        fields: dict[Any, Any],
        gpm: dict[str, Any] | None = None,
        from_nvidia_smi: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(__doc__)
        self._from_nvidia_smi = FROM_NVIDIA_SMI if from_nvidia_smi is None else from_nvidia_smi
        self._system = getters["system"]
        self._device = getters["device0"]
        self._gpm = gpm
        self._fields: dict[Any, Any] = dict(fields)
        for key, entry in self._device.items():
            if key.startswith("nvmlDeviceGetFieldValues(") and "ok" in entry:
                for item in entry["ok"]:
                    scope = item.get("scopeId", 0)
                    self._fields[(item["fieldId"], scope) if scope else item["fieldId"]] = item
        self._names = {key.split("(")[0] for key in (*self._system, *self._device, *self._from_nvidia_smi)}
        self.unanswered: list[str] = []  # calls neither the capture nor nvidia-smi's output answer

    def _answerer(self, symbol: str) -> tuple[str, Any]:
        for name in (symbol, unversioned(symbol)):
            method = getattr(type(self), name, None)
            if method is not None and name.startswith("nvml"):
                return name, method.__get__(self)
        name = symbol if symbol in self._names else unversioned(symbol)
        return name, lambda *args: self._call(name, args)

    def _c_special(self, symbol: str) -> Any:
        if symbol == "nvmlDeviceGetFieldValues":
            return self._c_field_values
        if symbol == "nvmlDeviceGetMemoryInfo_v2":  # captured as the wrapper's call with the struct's version
            return lambda device, ref: self._c_answer(
                lambda: self._call("nvmlDeviceGetMemoryInfo", (device, ref._obj.version)), ref._obj
            )
        return super()._c_special(symbol)

    def _c_answer(self, answer: Any, target: Any) -> int:
        try:
            value = answer()
        except pynvml.NVMLError as exc:
            if getattr(exc, "gpudiag_reason", None) is not None:
                raise
            return int(exc.value)
        return self._shaper.store(target, value)

    def nvmlInitWithFlags(self, flags: int) -> None:
        return None

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if index != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(0)

    def nvmlDeviceGetPciInfoExt(self, handle: Any) -> Any:
        """As the getter capture recorded it; where it did not (it takes a struct), nvidia-smi's
        pci.baseClass 0x3, pci.subClass 0x2, the rest as nvmlDeviceGetPciInfo answered (the bus id as
        text, or as the bytes a newer capture keeps)."""
        if self._recorded("nvmlDeviceGetPciInfoExt"):
            return self._call("nvmlDeviceGetPciInfoExt", (handle,))  # type: ignore[no-any-return]
        pci = _namespace(self._device["nvmlDeviceGetPciInfo"]["ok"])
        names = ("domain", "bus", "device", "pciDeviceId", "pciSubSystemId", "busId")
        return {**{name: getattr(pci, name) for name in names}, "baseClass": 0x3, "subClass": 0x2}

    def _recorded(self, name: str) -> bool:
        """Whether the getter capture holds the GPU's answer to ``name`` (newer captures call the
        struct-filling calls too)."""
        return bool({"ok", "error"} & set(self._device.get(name, {})))

    def nvmlDeviceGetSramEccErrorStatus(self, handle: Any, ref: Any) -> Any:
        """Where the getter capture lacks it (it takes a struct): nvidia-smi printed 0 for every SRAM count
        and "No" for the threshold (ecc.errors.*.sram.* in the field capture, the SRAM lines of -q)."""
        if self._recorded("nvmlDeviceGetSramEccErrorStatus"):
            return self._c_answer(lambda: self._call("nvmlDeviceGetSramEccErrorStatus", (handle,)), ref._obj)
        status = ref._obj
        for name, _ in status._fields_:
            if name != "version":
                setattr(status, name, 0)

    def _c_field_values(self, device: Any, count: Any, ref: Any) -> int:
        values = ref._obj
        for i in range(int(count.value if isinstance(count, ctypes.c_int32) else count)):
            slot = values[i]
            number, scope = int(slot.fieldId), int(slot.scopeId)
            self._shaper.fill(slot, self._field(number, scope))
        return int(pynvml.NVML_SUCCESS)

    def _field(self, number: int, scope: int) -> Any:
        key = (number, scope) if scope else number
        if number in FIELDS_NOT_CAPTURED:
            return {"nvmlReturn": pynvml.NVML_ERROR_UNKNOWN}
        if key not in self._fields:
            self.unanswered.append(f"nvmlDeviceGetFieldValues([{key}])")
            return {"nvmlReturn": pynvml.NVML_ERROR_NOT_SUPPORTED}
        item = self._fields[key]
        if isinstance(item, dict):
            return {k: v for k, v in item.items() if k not in ("fieldId", "scopeId")}
        if isinstance(item, str):  # an NVMLError class name
            return {"nvmlReturn": _ERROR_CODES[item]}
        value_type = _field_value_types().get(key, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT)
        member = {3: "ullVal", 5: "siVal"}.get(value_type, "uiVal")
        return {"nvmlReturn": pynvml.NVML_SUCCESS, "valueType": value_type, "value": {member: item}}

    def field_not_recorded(self, slot: Any) -> bool:
        """Whether a field value answered with an error is one this capture does not hold (see the fake
        NVML's method of the same name)."""
        return int(slot.nvmlReturn) == pynvml.NVML_ERROR_UNKNOWN and int(slot.fieldId) in FIELDS_NOT_CAPTURED

    # GPM, from its recording (GPM_CAPTURE): the metrics of one window, whatever two samples are asked.

    def _gpm_record(self) -> dict[str, Any]:
        if self._gpm is None:
            raise NotRecordedError()
        return self._gpm

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        entry = self._gpm_record()["nvmlGpmQueryDeviceSupport"]
        return _answer(entry["error"]) if "error" in entry else _namespace(entry["ok"])

    def nvmlGpmSampleAlloc(self) -> int:
        self._gpm_record()
        return self.new_address()

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> None:
        self._gpm_record()

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        return None

    def nvmlGpmMetricsGet(self, ref: Any) -> None:
        query = ref._obj
        recorded = self._gpm_record()["nvmlGpmMetricsGet"]
        for slot in list(query.metrics)[: int(query.numMetrics)]:
            entry = recorded.get(str(int(slot.metricId)))
            if entry is None or "error" in entry:
                name = "NVMLError_NotSupported" if entry is None else entry["error"]
                slot.nvmlReturn = _ERROR_CODES.get(name, pynvml.NVML_ERROR_UNKNOWN)
            else:
                slot.nvmlReturn, slot.value = pynvml.NVML_SUCCESS, float(entry["ok"])

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        table = self._system if name.startswith("nvmlSystem") else self._device
        rest = args[1:] if name.startswith("nvmlDevice") else args
        key = f"{name}{rest!r}" if rest else name
        entry = table.get(key)
        if entry is not None and ("ok" in entry or "error" in entry):  # what the GPU answered
            if "error" in entry:
                return _answer(entry["error"])
            return _namespace(entry["ok"])
        if key in self._from_nvidia_smi:  # what nvidia-smi printed of it
            return _answer(self._from_nvidia_smi[key])
        if name not in NOT_CAPTURED:
            self.unanswered.append(key)
        raise NotRecordedError()


def _detail_rows() -> tuple[Spec, ...]:
    from gpudiag.details import DETAIL_READINGS

    return DETAIL_READINGS


def _field_value_types() -> dict[Any, int]:
    return {field_key(row): row.value_type for row in (*GPU_READINGS, *_detail_rows()) if row.field}


def _host(pid: int) -> HostProcess:
    unknown: Reading[str] = Reading.missing(Reason.UNAVAILABLE, "not in the capture")
    return HostProcess(HostState.FOUND, unknown, Reading.of(BUSY_PROCESS_NAME), unknown)


def _no_stats(pid: int) -> tuple[Reading[float], Reading[int], Reading[float]]:
    missing: Reading[Any] = Reading.missing(Reason.UNAVAILABLE, "not in the capture")
    return missing, missing, missing


def build(moment: str, capture_dir: Path = CAPTURE_DIR) -> tuple[Machine, list[str]]:
    """The captured H100 at ``moment`` ("idle" or "busy"), and the calls left unanswered."""
    getters = json.loads((capture_dir / f"nvml-getters-{moment}.json").read_text())
    snapshot, _ = fixtures.load(str(capture_dir / f"gpudiag-snapshot-{moment}.json"))
    gpm_file = capture_dir / GPM_CAPTURE.format(moment=moment)
    gpm = json.loads(gpm_file.read_text()) if gpm_file.is_file() else None
    from_calls, from_fields = SUPPLEMENTS.get(capture_dir.name, ({}, {}))
    lib = CaptureNvml(getters, from_fields.get(moment, {}), gpm, from_calls)
    session = NvmlSession(lib, _host)
    session.cpu_count = 16  # the capture VM's vCPUs
    session.process_stats = _no_stats
    session.open(snapshot.nvml.kernel_module_version)
    gpus = session.read_gpus(ALL_GROUPS)
    machine = Machine(
        schema=MACHINE_SCHEMA,
        source="fixture",
        collected_at=snapshot.collected_at,  # when the snapshot of this moment was taken
        nvml=session.info,
        gpus=gpus,
        host=snapshot.host,
        env=snapshot.env,
        torch_build=snapshot.torch_build,
        torch_runtime=snapshot.torch_runtime,
    )
    return machine, sorted(set(lib.unanswered))


# The gpudiag snapshots of the capture were taken on other H100s (same SKU, driver and VBIOS) than the
# getter capture; each snapshot's `nvidia-smi -q -x` of the same GPU and moment gives what differs.
SNAPSHOT_XML = {"idle": "nvidia-smi-q.xml", "busy": "nvidia-smi-q-busy.xml"}


# The details that differ between boards or moments, by their row's key, with their element in
# `nvidia-smi -q -x`: a snapshot's GPU takes its own value from there.
OWN_ELEMENTS = {
    "details.temperatures.memory_c": "temperature/memory_temp",
    "details.power.average_w": "gpu_power_readings/average_power_draw",
    "details.power.instant_w": "gpu_power_readings/instant_power_draw",
    "details.clocks.current.graphics": "clocks/graphics_clock",
    "details.clocks.current.sm": "clocks/sm_clock",
    "details.clocks.current.memory": "clocks/mem_clock",
    "details.clocks.current.video": "clocks/video_clock",
    "details.temperatures.margin_c": "temperature/gpu_temp_tlimit",
    "details.identity.serial": "serial",
    "details.identity.board_part_number": "board_part_number",
    "details.identity.module_id": "platformInfo/module_id",
    "details.pcie.tx_kbps": "pci/tx_util",
    "details.pcie.rx_kbps": "pci/rx_util",
    "details.pcie.replay_counter": "pci/replay_counter",
    "details.identity.pdi": "pdi",
    "details.pcie.replay_rollovers": "pci/replay_rollover_counter",
    "details.power.memory_average_w": "gpu_memory_power_readings/average_power_draw",
}


def details_for_snapshot(moment: str, capture_dir: Path = CAPTURE_DIR) -> dict[str, Any]:
    """Details (as data) for the GPU of ``gpudiag-snapshot-<moment>.json``: read by the probe from the
    getter capture, with that GPU's own identity and readings of the moment (OWN_ELEMENTS: serial,
    module id, current clocks, power draw, temperatures, PCIe throughput and replays, and BAR1) from
    the snapshot's own details where it holds them (a capture of one board: the readings of the
    snapshot's moment, as its other readings are), else from its `nvidia-smi -q -x` (the H100's
    snapshots predate details). The per-process load stays NVML's "no sample" unless the getter
    capture saw the same process."""
    import xml.etree.ElementTree as ET

    from gpudiag.serialize import to_data

    machine, _ = build(moment, capture_dir)
    details = to_data(machine.gpus[0].details)
    raw = json.loads((capture_dir / f"gpudiag-snapshot-{moment}.json").read_text())["gpus"][0].get("details")
    own: dict[str, Any] | None = raw if isinstance(raw, dict) and "identity" in raw else None
    gpu = ET.parse(capture_dir / SNAPSHOT_XML[moment]).getroot().find("gpu")
    assert gpu is not None

    def number(path: str) -> int | float:
        text = gpu.findtext(path, "").split()[0]
        if text.startswith("0x"):  # the PDI
            return int(text, 16)
        return float(text) if "." in text else int(text)

    codecs = {row.key: row.codec for row in _detail_rows()}
    for key, element in OWN_ELEMENTS.items():  # differs between boards or moments: this GPU's own, of the moment
        *path, name = key.split(".")[1:]
        node, mine = details, own
        for part in path:
            node = node[part]
            mine = mine[part] if mine is not None else None
        if mine is not None:
            node[name] = mine[name]
        else:
            node[name] = gpu.findtext(element) if codecs[key] is TEXT else number(element)
    if own is not None:
        details["bar1"] = own["bar1"]
    else:  # BAR1 of this GPU, as -q -x shows it (whole MiB: nvidia-smi rounds up, and these add to the total)
        details["bar1"] = {
            part: int(number(f"bar1_memory_usage/{name}")) * MIB
            for part, name in (("total_bytes", "total"), ("used_bytes", "used"), ("free_bytes", "free"))
        }
    snapshot, _ = fixtures.load(str(capture_dir / f"gpudiag-snapshot-{moment}.json"))
    pids = {p.pid for p in snapshot.gpus[0].processes.get(())}
    loads = details["process_load"]
    if isinstance(loads, list) and not {load["pid"] for load in loads} <= pids:
        # No sample of this process was captured: recorded as NVML's own "no sample" answer.
        details["process_load"] = {
            "unavailable": Reason.NOT_FOUND.value,
            "detail": "no process ran on the GPU since the last sample",
        }
    return dict(details)


def add_details(path: Path, moment: str, capture_dir: Path = CAPTURE_DIR) -> None:
    """Write :func:`details_for_snapshot` into an example machine made from that snapshot."""
    data = json.loads(path.read_text())
    gpu = data["gpus"][0]
    gpu["details"] = details_for_snapshot(moment, capture_dir)
    energy = gpu["details"]["power"].get("energy_mj")
    if isinstance(energy, int):  # one counter, one answer: the replay reads both from the details
        gpu["energy_mj"] = energy
    path.write_text(json.dumps(data, indent=2) + "\n")


def record_gpm(lib: Any = pynvml, window_s: float = 1.0) -> dict[str, Any]:
    """On a GPU machine: what NVML's GPM answers on GPU 0 over one window, as :data:`GPM_CAPTURE`
    holds it (the support query, then each metric of ``readings.GPM_METRICS``: its value in GPM's
    unit, or the NVMLError class it gave)."""
    import time

    from gpudiag.readings import GPM_METRICS

    def error(exc: Exception) -> dict[str, str]:
        return {"error": type(exc).__name__}

    lib.nvmlInit()
    try:
        h = lib.nvmlDeviceGetHandleByIndex(0)
        out: dict[str, Any] = {"window_s": window_s, "nvmlGpmMetricsGet": {}}
        try:
            supported = bool(lib.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
            out["nvmlGpmQueryDeviceSupport"] = {"ok": {"isSupportedDevice": int(supported)}}
        except lib.NVMLError as exc:
            out["nvmlGpmQueryDeviceSupport"] = error(exc)
            return out
        if not supported:
            return out
        first, second = lib.nvmlGpmSampleAlloc(), lib.nvmlGpmSampleAlloc()
        try:
            lib.nvmlGpmSampleGet(h, first)
            time.sleep(window_s)
            lib.nvmlGpmSampleGet(h, second)
            query = lib.c_nvmlGpmMetricsGet_t()
            query.version, query.numMetrics = lib.NVML_GPM_METRICS_GET_VERSION, len(GPM_METRICS)
            query.sample1, query.sample2 = first, second
            for slot, (_, metric, _) in zip(query.metrics, GPM_METRICS, strict=False):
                slot.metricId = metric
            lib.nvmlGpmMetricsGet(query)
            for slot, (_, metric, _) in zip(query.metrics, GPM_METRICS, strict=False):
                code = int(slot.nvmlReturn)
                out["nvmlGpmMetricsGet"][str(metric)] = (
                    {"ok": float(slot.value)} if code == lib.NVML_SUCCESS else error(lib.NVMLError(code))
                )
        finally:
            lib.nvmlGpmSampleFree(first)
            lib.nvmlGpmSampleFree(second)
        return out
    finally:
        lib.nvmlShutdown()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.hardware.capture",
        description="An example machine read by gpudiag's probe from a hardware capture (JSON on stdout).",
    )
    parser.add_argument("moment", nargs="?", default="idle", help="the capture's moment: idle or busy")
    parser.add_argument("capture_dir", nargs="?", type=Path, default=CAPTURE_DIR, help="with --into: the capture")
    parser.add_argument("--into", type=Path, metavar="MACHINE.json", help="add each GPU's details to this machine")
    parser.add_argument(
        "--record-gpm", type=float, nargs="?", const=1.0, metavar="SECONDS", help="on the GPU machine: record GPM"
    )
    options = parser.parse_args(argv)
    if options.record_gpm is not None:  # > nvml-gpm-MOMENT.json
        sys.stdout.write(json.dumps(record_gpm(window_s=options.record_gpm), indent=2) + "\n")
        return 0
    if not (options.capture_dir / f"nvml-getters-{options.moment}.json").is_file():
        parser.error(f"no capture of moment {options.moment!r} in {options.capture_dir}")
    if options.into is not None:
        add_details(options.into, options.moment, options.capture_dir)
        return 0
    if options.capture_dir != CAPTURE_DIR:
        parser.error("a capture directory is read only with --into")
    machine, _ = build(options.moment)
    description = (
        f"H100 80GB HBM3, driver 580.159.04, {options.moment}: read by gpudiag's probe from "
        f"docs/hardware/h100-80gb-hbm3-driver580/nvml-getters-{options.moment}.json"
    )
    sys.stdout.write(fixtures.dump(machine, description))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
