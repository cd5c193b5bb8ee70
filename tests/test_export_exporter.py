"""`gpudiag exporter`: both metric families on replayed machines, the cardinality cap, N/A as no
sample, and surviving a lost GPU, NVML restarting under it and vanished PIDs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.export.attribution import Owner
from gpudiag.export.exporter import GROUPS, REOPEN_EVERY_S, Exporter, Printable, Server
from gpudiag.model import GpuState, Machine, Reading, Reason
from gpudiag.probe.collect import MachineSource, open_source
from gpudiag.replay.fixtures import load
from tests.conftest import Cli

MiB = 1024 * 1024
EXAMPLE = "h100x8-training-64procs"

# dcgm-exporter's etc/default-counters.csv (NVIDIA/dcgm-exporter, 2026): the fields it exports by default.
DCGM_DEFAULT_COUNTERS = {
    "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
}  # fmt: skip
# The fields the same CSV lists commented out (a user may turn them on), and DCGM fields it does not
# list that gpudiag exports beside them: the clock event reasons (dcgm_fields.h) and the NVLink traffic
# of DCGM's profiling fields, which GPM gives with the PCIe traffic.
DCGM_CSV_OPTIONAL = {
    *(f"DCGM_FI_DEV_{p}_VIOLATION"
      for p in ("POWER", "THERMAL", "SYNC_BOOST", "BOARD_LIMIT", "LOW_UTIL", "RELIABILITY")),
    *(f"DCGM_FI_DEV_ECC_{e}_TOTAL" for e in ("SBE_VOL", "DBE_VOL", "SBE_AGG", "DBE_AGG")),
    "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_PENDING",
    "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",  # commented out in older CSVs
}  # fmt: skip
DCGM_OTHER_FIELDS = {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}
# The metrics NVIDIA's Grafana dashboard for dcgm-exporter (grafana/dcgm-exporter-dashboard.json)
# queries, each filtered by {instance=~"$instance", gpu=~"$gpu"}; its variables come from
# label_values(DCGM_FI_DEV_GPU_TEMP, ...). The tensor panel's field comes from GPM on Hopper and newer.
DASHBOARD = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_UTIL",
             "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")  # fmt: skip

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

QUICK_SHUTDOWN = 0.01  # seconds a test server takes to stop (socketserver polls every 0.5 s by default)


def parse(text: str) -> Samples:
    """The samples of a scrape's text, under the names the text gives them (prometheus-client's
    parser renames a bare counter's samples ``X`` to ``X_total``; Prometheus does not)."""
    from prometheus_client.parser import text_string_to_metric_families

    written = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name = s.name if s.name in written else s.name.removesuffix("_total")
            samples[(name, frozenset(s.labels.items()))] = s.value
    return samples


def types_of(text: str) -> dict[str, str]:
    """Each family's ``# TYPE`` as the text says it."""
    return {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")}


def scrape(exporter: Exporter) -> Samples:
    """One scrape as /metrics serves it to Prometheus."""
    return parse(exporter.render_text().decode())


def pick(samples: Samples, metric: str, **labels: str) -> list[float]:
    want = set(labels.items())
    return [v for (n, ls), v in samples.items() if n == metric and want <= ls]


def labels_of(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(ls) for (n, ls) in samples if n == name]


@pytest.fixture
def source() -> Iterator[MachineSource]:
    with open_source(EXAMPLE) as s:
        yield s


def test_native_family_on_the_busy_h100_node(source: MachineSource) -> None:
    samples = scrape(Exporter(source, hostname="node-a"))
    assert pick(samples, "gpudiag_nvml_up") == [1]
    assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 8
    gpu0 = {"gpu": "0", "uuid": "GPU-8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b3000"}
    mem = source.read().gpus[0].memory.value
    assert mem is not None
    assert pick(samples, "gpudiag_gpu_memory_used_bytes", **gpu0) == [mem.used_bytes]
    assert pick(samples, "gpudiag_gpu_utilization_ratio", **gpu0) == [0.9]
    assert pick(samples, "gpudiag_gpu_power_watts", **gpu0) == [612.5]
    assert pick(samples, "gpudiag_gpu_clock_hertz", clock="sm", **gpu0) == [1.98e9]
    assert pick(samples, "gpudiag_gpu_energy_joules_total", **gpu0) == [48211930.512]
    assert pick(samples, "gpudiag_gpu_pcie_link_width", **gpu0) == [16]
    assert pick(samples, "gpudiag_gpu_info", name="NVIDIA H100 80GB HBM3", **gpu0) == [1]
    processes = labels_of(samples, "gpudiag_process_gpu_memory_bytes")
    assert len(processes) == 64
    assert {p["process"] for p in processes} == {"python"} and {p["user"] for p in processes} == {"train"}
    assert pick(samples, "gpudiag_process_gpu_memory_bytes", pid="50000") == [9437184000]
    # Health from the NVML-only checks, passing: one series per check and GPU, no reason.
    assert pick(samples, "gpudiag_check_status", check="health.ecc", **gpu0) == [0]
    assert {frozenset(ls) for ls in labels_of(samples, "gpudiag_check_status")} == {frozenset({"check", "gpu", "uuid"})}
    assert labels_of(samples, "gpudiag_check_reason_info") == []
    checks = {labels["check"] for labels in labels_of(samples, "gpudiag_check_status")}
    assert "compat.torch" not in checks and "health.processes" not in checks


def test_check_status_stays_one_series_while_its_finding_changes() -> None:
    base = load("a100-ecc-errors")[0]
    with open_source("a100-ecc-errors") as s:
        exporter = Exporter(s)
        first = scrape(exporter)
        gpu0 = base.gpus[0]
        counts = gpu0.ecc_errors
        worse = msgspec.structs.replace(counts, volatile_uncorrected=counts.volatile_uncorrected.map(lambda n: n + 5))
        s.lib.set_machine(
            msgspec.structs.replace(base, gpus=(msgspec.structs.replace(gpu0, ecc_errors=worse), *base.gpus[1:]))
        )
        second = scrape(exporter)
    status = [ls for ls in labels_of(first, "gpudiag_check_status") if ls["check"] == "health.ecc"]
    assert status == [ls for ls in labels_of(second, "gpudiag_check_status") if ls["check"] == "health.ecc"]
    assert pick(first, "gpudiag_check_status", check="health.ecc") == [2]
    assert pick(second, "gpudiag_check_status", check="health.ecc") == [2]
    (before,) = [ls["reason"] for ls in labels_of(first, "gpudiag_check_reason_info") if ls["check"] == "health.ecc"]
    (after,) = [ls["reason"] for ls in labels_of(second, "gpudiag_check_reason_info") if ls["check"] == "health.ecc"]
    assert "uncorrected ECC error" in before and before != after  # the text moved; the status series did not


def test_check_changes_are_said_once_in_the_log() -> None:
    said: list[str] = []
    with open_source("a100-ecc-errors") as s:
        exporter = Exporter(s, log=said.append)
        scrape(exporter)
        first = list(said)
        scrape(exporter)
    # An A100 has no GPM: said once, then the checks' findings.
    assert first[0] == (
        "gpudiag: GPU 0 (NVIDIA A100-SXM4-80GB): no profiling metrics (DCGM_FI_PROF_*): "
        "NVML's GPU performance monitoring (GPM) needs a Hopper or newer data-centre GPU"
    )
    assert first[1:] and all(line.startswith("gpudiag: check ") for line in first[1:])
    assert any("health.ecc GPU 0: FAIL: " in line and "uncorrected ECC" in line for line in first)
    assert said == first  # nothing changed: nothing more said


def test_na_readings_yield_no_sample_never_a_number() -> None:
    with open_source("geforce-no-ecc-power") as s:
        machine = s.read()
        samples = scrape(Exporter(s))
    for gpu in machine.gpus:
        labels = {"gpu": str(gpu.index)}
        if not gpu.power_draw_w.ok:
            assert pick(samples, "gpudiag_gpu_power_watts", **labels) == []
        if not gpu.ecc_errors.volatile_uncorrected.ok:
            assert pick(samples, "gpudiag_gpu_ecc_errors_total", **labels) == []
    # A snapshot that predates clocks: no clock samples at all, rather than zeros.
    with open_source("v100x4-tutorial") as s:
        samples = scrape(Exporter(s))
    assert pick(samples, "gpudiag_gpu_clock_hertz") == []
    assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 4


def test_cardinality_cap_keeps_the_biggest_processes(source: MachineSource) -> None:
    samples = scrape(Exporter(source, max_process_series=10))
    kept = pick(samples, "gpudiag_process_gpu_memory_bytes")
    assert len(kept) == 10
    assert pick(samples, "gpudiag_process_series_dropped") == [54]
    everyone = [p.used_memory_bytes.get(0) for g in source.read().gpus for p in g.processes.get(())]
    assert sorted(kept) == sorted(everyone)[-10:]


def lose(machine: Machine, index: int) -> Machine:
    lost: Reading[Any] = Reading.missing(Reason.GPU_LOST, "GPU is lost")
    gpus = list(machine.gpus)
    gpus[index] = msgspec.structs.replace(gpus[index], state=GpuState.LOST, memory=lost, processes=lost)
    return msgspec.structs.replace(machine, gpus=tuple(gpus))


def test_survives_a_lost_gpu_and_sees_it_come_back(source: MachineSource) -> None:
    now = [0.0]
    exporter = Exporter(source, clock=lambda: now[0])
    base = load(EXAMPLE)[0]
    source.lib.set_machine(lose(base, 3))
    samples = scrape(exporter)
    assert pick(samples, "gpudiag_gpu_lost", gpu="3") == [1]
    assert pick(samples, "gpudiag_gpu_memory_used_bytes", gpu="3") == []  # gone, not stuck at its last value
    assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 7
    assert pick(samples, "gpudiag_check_status", check="nvml.gpu_lost", gpu="3") == [2]
    source.lib.set_machine(base)  # the GPU was reset
    now[0] += REOPEN_EVERY_S
    samples = scrape(exporter)
    assert pick(samples, "gpudiag_gpu_lost", gpu="3") == [0]
    assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 8


@pytest.mark.parametrize(("compat", "uuid_label", "series"), [("native", "uuid", "gpudiag_gpu_memory_used_bytes"),
                                                            ("dcgm", "UUID", "DCGM_FI_DEV_FB_USED")])  # fmt: skip
def test_a_gpu_lost_mid_run_is_said_lost_under_the_identity_it_had(
    source: MachineSource, compat: str, uuid_label: str, series: str
) -> None:
    exporter = Exporter(source, compat=compat, hostname="node-a")
    before = scrape(exporter)
    base = load(EXAMPLE)[0]
    source.lib.set_machine(lose(base, 3))  # NVML now answers "GPU is lost" to everything about GPU 3
    after = scrape(exporter)
    (was,) = [ls for ls in labels_of(before, "gpudiag_gpu_lost") if ls["gpu"] == "3"]
    (now,) = [ls for ls in labels_of(after, "gpudiag_gpu_lost") if ls["gpu"] == "3"]
    assert now == was and now[uuid_label] == base.gpus[3].uuid.value  # the same series, which GPU it was
    assert pick(before, "gpudiag_gpu_lost", gpu="3") == [0] and pick(after, "gpudiag_gpu_lost", gpu="3") == [1]
    assert pick(after, series, gpu="3") == [] and len(pick(after, series)) == 7
    assert len(pick(after, "gpudiag_gpu_lost")) == 8


def test_survives_nvml_restarting_under_it(source: MachineSource) -> None:
    exporter = Exporter(source)
    scrape(exporter)
    inits = source.lib.calls.count("nvmlInit")
    source.lib.nvmlShutdown()  # NVML shut down under the exporter (as by a driver reload)
    samples = scrape(exporter)
    assert source.lib.calls.count("nvmlInit") == inits + 1
    assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 8
    assert pick(samples, "gpudiag_nvml_up") == [1]


def test_starts_without_a_driver_and_picks_it_up_later() -> None:
    now = [0.0]
    with open_source("no-driver") as s:
        exporter = Exporter(s, clock=lambda: now[0])
        samples = scrape(exporter)
        assert pick(samples, "gpudiag_nvml_up", status="driver_not_loaded") == [0]
        assert exporter.health()[0] is False
        s.lib.set_machine(load("h100x8-healthy")[0])  # the driver got loaded
        now[0] += REOPEN_EVERY_S
        samples = scrape(exporter)
        assert pick(samples, "gpudiag_nvml_up", status="ok") == [1]
        assert len(pick(samples, "gpudiag_gpu_memory_used_bytes")) == 8
        assert exporter.health() == (True, "ok")


def test_a_vanished_pid_is_a_process_without_details(source: MachineSource) -> None:
    base = load(EXAMPLE)[0]
    procs = base.gpus[0].processes.get(())
    ghost = msgspec.structs.replace(procs[0], pid=4_000_000)  # the recorded host does not know it: exited
    gpus = list(base.gpus)
    gpus[0] = msgspec.structs.replace(gpus[0], processes=Reading.of((*procs, ghost)))
    source.lib.set_machine(msgspec.structs.replace(base, gpus=tuple(gpus)))
    samples = scrape(Exporter(source))
    (ghost_labels,) = [p for p in labels_of(samples, "gpudiag_process_gpu_memory_bytes") if p["pid"] == "4000000"]
    assert ghost_labels["process"] == "" and ghost_labels["user"] == ""


def test_dcgm_family_names_units_and_labels(source: MachineSource) -> None:
    machine = source.read()
    exporter = Exporter(source, compat="dcgm", hostname="node-a")
    scrape(exporter)  # GPM's figures and the NVLink bandwidth are measured since an earlier scrape
    samples = scrape(exporter)
    names = {n for n, _ in samples} - {"gpudiag_nvml_up", "gpudiag_gpu_lost", "gpudiag_metric_family_errors_total"}
    assert names <= DCGM_DEFAULT_COUNTERS | DCGM_CSV_OPTIONAL | DCGM_OTHER_FIELDS
    assert names >= DCGM_DEFAULT_COUNTERS  # every default field, on this H100 node
    assert set(DASHBOARD) <= names
    (labels,) = [ls for ls in labels_of(samples, "DCGM_FI_DEV_FB_USED") if ls["gpu"] == "0"]
    gpu = machine.gpus[0]
    assert labels == {
        "gpu": "0",
        "UUID": gpu.uuid.value,
        "pci_bus_id": "00000000:18:00.0",
        "device": "nvidia0",  # dcgm-exporter's "nvidia" + GPU id, not the minor number
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-a",
        "hostname": "node-a",
        "DCGM_FI_DRIVER_VERSION": machine.nvml.driver_version.value,
    }
    mem = gpu.memory.value
    assert mem is not None
    assert pick(samples, "DCGM_FI_DEV_FB_USED", gpu="0") == [mem.used_bytes // MiB]  # MiB, as DCGM
    assert pick(samples, "DCGM_FI_DEV_POWER_USAGE", gpu="0") == [612.5]  # W
    assert pick(samples, "DCGM_FI_DEV_SM_CLOCK", gpu="0") == [1980]  # MHz
    assert pick(samples, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == [90]  # percent
    assert pick(samples, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0") == [48211930512]  # mJ
    assert pick(samples, "DCGM_FI_DEV_MEMORY_TEMP", gpu="0") == [46]  # C
    assert pick(samples, "DCGM_FI_DEV_ENC_UTIL", gpu="0") == [0]  # percent
    assert pick(samples, "DCGM_FI_DEV_POWER_VIOLATION", gpu="1") == [1.25e9]  # ns
    assert pick(samples, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu="0") == [pytest.approx(0.475)]  # a ratio, not %
    assert pick(samples, "DCGM_FI_PROF_SM_ACTIVE", gpu="0") == [pytest.approx(0.88)]
    assert pick(samples, "DCGM_FI_PROF_PCIE_TX_BYTES", gpu="0") == [1150 * MiB]  # bytes per second
    assert pick(samples, "DCGM_FI_PROF_NVLINK_RX_BYTES", gpu="0") == [45500 * MiB]
    assert pick(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="0", err_code="0", err_msg="No Error") == [0]  # none yet
    assert pick(samples, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", gpu="0") == [0]  # bare metal
    # Every DCGM-named series carries dcgm-exporter's identity labels (XID_ERRORS also its error's).
    for (name, ls), _ in samples.items():
        if name.startswith("DCGM_FI_"):
            extra = {"err_code", "err_msg"} if name == "DCGM_FI_DEV_XID_ERRORS" else set()
            assert {k for k, _ in ls} == set(labels) | extra, name


def test_dcgm_xid_errors_from_nvml_events_with_dcgm_exporters_labels(source: MachineSource) -> None:
    said: list[str] = []
    exporter = Exporter(source, compat="dcgm", hostname="node-a", log=said.append)
    scrape(exporter)  # the event set is made with the first scrape
    source.lib.inject_xid(2, 48)
    source.lib.inject_xid(2, 31)
    samples = scrape(exporter)
    (xid,) = [(dict(ls), v) for (n, ls), v in samples.items() if n == "DCGM_FI_DEV_XID_ERRORS" and ("gpu", "2") in ls]
    assert xid[1] == 31 and (xid[0]["err_code"], xid[0]["err_msg"]) == ("31", "GPU memory page fault")
    assert said[-2:] == [
        "gpudiag: GPU 2: Xid 48 (Double Bit ECC Error)",
        "gpudiag: GPU 2: Xid 31 (GPU memory page fault)",
    ]
    assert pick(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="3") == [0]  # another GPU: none
    native = Exporter(source, hostname="node-a")
    scrape(native)
    source.lib.inject_xid(5, 79)
    source.lib.inject_xid(5, 79)
    samples = scrape(native)
    assert pick(samples, "gpudiag_gpu_xid_errors_total", gpu="5", xid="79") == [2]
    assert pick(samples, "gpudiag_gpu_last_xid", gpu="5") == [79]
    assert pick(samples, "gpudiag_gpu_last_xid", gpu="4") == [0]


def test_xid_errors_of_a_gpu_nvml_cannot_watch_have_no_series(source: MachineSource) -> None:
    """GeForce boards and old drivers cannot report Xid events: no series, never a 0 saying none came."""
    import pynvml

    lib = source.lib
    register = lib.nvmlDeviceRegisterEvents

    def geforce_at_1(handle: Any, types: int, event_set: Any) -> None:
        if lib.nvmlDeviceGetIndex(handle) == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        register(handle, types, event_set)

    lib.__dict__["nvmlDeviceRegisterEvents"] = geforce_at_1
    said: list[str] = []
    samples = scrape(Exporter(source, compat="dcgm", log=said.append))
    assert pick(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="1") == []
    assert pick(samples, "DCGM_FI_DEV_XID_ERRORS", gpu="0") == [0]
    assert "gpudiag: Xid errors not watched on GPU 1 (Not Supported)" in said


def test_profiling_metrics_are_measured_between_scrapes_and_absent_where_gpm_is_not() -> None:
    """GPM: the first scrape takes a sample (no figures yet, never zeros); the next has the window's.
    An A100 has no GPM: no DCGM_FI_PROF_* series at all."""
    clock = [1000.0]
    with open_source(EXAMPLE) as s:
        exporter = Exporter(s, compat="dcgm", clock=lambda: clock[0])
        assert pick(scrape(exporter), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") == []
        clock[0] += 15
        assert len(pick(scrape(exporter), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")) == 8
        native = Exporter(s, clock=lambda: clock[0])
        scrape(native)
        clock[0] += 15
        samples = scrape(native)
    assert pick(samples, "gpudiag_gpu_pipe_active_ratio", gpu="0", pipe="tensor") == [pytest.approx(0.475)]
    assert pick(samples, "gpudiag_gpu_sm_occupancy_ratio", gpu="0") == [pytest.approx(0.415)]
    assert pick(samples, "gpudiag_gpu_link_throughput_bytes_per_second", gpu="0", link="nvlink", direction="tx") == [
        46_000 * MiB
    ]
    with open_source("a100-ecc-errors") as s:
        exporter = Exporter(s, compat="dcgm")
        scrape(exporter)
        samples = scrape(exporter)
    assert not {n for n, _ in samples if n.startswith("DCGM_FI_PROF_")}
    assert pick(samples, "DCGM_FI_DEV_GPU_TEMP")  # the rest is there


def test_dcgm_nvlink_bandwidth_is_dcgms_rate_between_two_scrapes() -> None:
    """DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: the NVLink data (KiB, rx + tx, all links) since the last
    scrape, per second, / 1000, as DCGM computes it; none on the first scrape."""
    clock = [50.0]
    base = load(EXAMPLE)[0]
    with open_source(EXAMPLE) as s:
        exporter = Exporter(s, compat="dcgm", clock=lambda: clock[0])
        assert pick(scrape(exporter), "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL") == []
        gpu = base.gpus[0]
        moved = msgspec.structs.replace(
            gpu,
            nvlink_data_rx_kib=gpu.nvlink_data_rx_kib.map(lambda k: k + 30_000_000),
            nvlink_data_tx_kib=gpu.nvlink_data_tx_kib.map(lambda k: k + 15_000_000),
        )
        s.lib.set_machine(msgspec.structs.replace(base, gpus=(moved, *base.gpus[1:])))
        clock[0] += 10
        samples = scrape(exporter)
    assert pick(samples, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", gpu="0") == [4500]  # 45e6 KiB / 10 s / 1000
    assert pick(samples, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", gpu="1") == [0]


def test_dcgm_pcie_throughput_is_kb_per_second_from_nvmls_byte_counters() -> None:
    """DCGM_FI_DEV_PCIE_TX/RX_THROUGHPUT: NVML's PCIe byte counters since the last scrape, per
    second, in KB (1024 bytes), nvmlDeviceGetPcieThroughput's unit, without its 20 ms wait; none on
    the first scrape, nor when a counter went back (NVML says it may wrap), nor where NVML does not
    answer the counters."""
    clock = [50.0]
    base = load(EXAMPLE)[0]

    def moved(tx: int, rx: int) -> Any:
        gpu = base.gpus[0]
        gpu = msgspec.structs.replace(
            gpu,
            pcie_data_tx_bytes=gpu.pcie_data_tx_bytes.map(lambda b: b + tx),
            pcie_data_rx_bytes=gpu.pcie_data_rx_bytes.map(lambda b: b + rx),
        )
        return msgspec.structs.replace(base, gpus=(gpu, *base.gpus[1:]))

    with open_source(EXAMPLE) as s:
        exporter = Exporter(s, compat="dcgm", clock=lambda: clock[0])
        assert pick(scrape(exporter), "DCGM_FI_DEV_PCIE_TX_THROUGHPUT") == []
        s.lib.set_machine(moved(20 * 1024 * 1_000_000, 5 * 1024 * 1_000_000))
        clock[0] += 4
        samples = scrape(exporter)
        assert pick(samples, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", gpu="0") == [5_000_000]  # 20e6 KB / 4 s
        assert pick(samples, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", gpu="0") == [1_250_000]
        assert pick(samples, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", gpu="1") == [0]
        native = Exporter(s)
        assert pick(scrape(native), "gpudiag_gpu_pcie_data_bytes_total", gpu="0", direction="tx") == [
            base.gpus[0].pcie_data_tx_bytes.get(0) + 20 * 1024 * 1_000_000
        ]
        s.lib.set_machine(moved(0, 0))  # the counters went back: wrapped, or the driver reloaded
        clock[0] += 4
        samples = scrape(exporter)
        assert pick(samples, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", gpu="0") == []
        assert pick(samples, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", gpu="1") == [0]
        clock[0] += 4
        assert pick(scrape(exporter), "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", gpu="0") == [0]  # from the new count on
    with open_source("a100-ecc-errors") as s:  # no PCIe byte counters recorded: NVML gives no answer
        exporter = Exporter(s, compat="dcgm")
        scrape(exporter)
        samples = scrape(exporter)
    assert not [n for n, _ in samples if "THROUGHPUT" in n] and pick(samples, "DCGM_FI_DEV_GPU_TEMP")


# The Prometheus types dcgm-exporter's etc/default-counters.csv gives the fields gpudiag exports.
DCGM_COUNTERS = {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                 "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                 "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
                 "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
                 *(n for n in DCGM_CSV_OPTIONAL if n.endswith(("_VIOLATION", "_TOTAL")) or "RETIRED" in n)}  # fmt: skip
NATIVE_COUNTERS = {"gpudiag_gpu_energy_joules_total", "gpudiag_gpu_ecc_errors_total", "gpudiag_gpu_remapped_rows_total",
                   "gpudiag_gpu_pcie_replays_total", "gpudiag_process_torch_ooms_total",
                   "gpudiag_process_torch_alloc_retries_total", "gpudiag_gpu_clocks_held_seconds_total",
                   "gpudiag_gpu_nvlink_data_bytes_total", "gpudiag_gpu_pcie_data_bytes_total",
                   "gpudiag_gpu_xid_errors_total"}  # fmt: skip


@pytest.mark.parametrize(("compat", "counters"), [("native", NATIVE_COUNTERS), ("dcgm", DCGM_COUNTERS)])
def test_counters_are_typed_counters_on_the_served_text(source: MachineSource, compat: str, counters: set[str]) -> None:
    """On the text itself: ``rate()`` takes untyped series too, so a working query proves nothing."""
    text = Exporter(source, compat=compat).render_text().decode()
    types = types_of(text)
    counted = {name for name, typ in types.items() if typ == "counter"}
    assert counted == counters | {"gpudiag_metric_family_errors_total"}
    assert set(types.values()) <= {"counter", "gauge"}
    sample_names = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")}
    assert sample_names <= set(types)  # every sample sits under its own # TYPE line: nothing untyped
    assert {"gpudiag_gpu_energy_joules_total", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"} & sample_names


def test_dcgm_family_mig_instances_and_pod_labels() -> None:
    with open_source("a100-mig") as s:
        exporter = Exporter(s, compat="dcgm")
        samples = scrape(exporter)
        instances = [ls for ls in labels_of(samples, "DCGM_FI_DEV_FB_USED") if "GPU_I_ID" in ls]
        assert {(ls["GPU_I_PROFILE"], ls["GPU_I_ID"]) for ls in instances} == {
            ("3g.20gb", "1"),
            ("2g.10gb", "5"),
            ("1g.5gb", "13"),
        }
        assert all("pod" not in ls for ls in labels_of(samples, "DCGM_FI_DEV_FB_USED"))  # no kubelet, no pod labels

        class OneAllocation:
            def allocations(self) -> list[Any]:
                from gpudiag.export.attribution import Allocation

                mig = "MIG-8b5c2a1e-3f4d-5e6f-9a0b-1c2d3e4f5a6b"
                return [Allocation("vision", "resnet", "train", "nvidia.com/mig-3g.20gb", (mig,))]

        exporter.attributor.kubelet = OneAllocation()
        samples = scrape(exporter)
    owned = [ls for ls in labels_of(samples, "DCGM_FI_DEV_FB_USED") if ls.get("GPU_I_ID") == "1"]
    assert [(ls["pod"], ls["namespace"], ls["container"]) for ls in owned] == [("resnet", "vision", "train")]
    whole = [ls for ls in labels_of(samples, "DCGM_FI_DEV_FB_USED") if "GPU_I_ID" not in ls]
    assert [(ls["pod"], ls["namespace"], ls["container"]) for ls in whole] == [("", "", "")]


def test_native_process_series_carry_the_owner(source: MachineSource) -> None:
    exporter = Exporter(source)

    class Fixed:
        kubelet = None

        def owners(self, view: Any) -> dict[tuple[int, int], Owner]:
            return {(r.gpu_index, r.process.pid): Owner("llm", "ml", "trainer", "") for r in view.processes}

    exporter.attributor = Fixed()  # type: ignore[assignment]
    samples = scrape(exporter)
    owners = {
        (p["pod"], p["namespace"], p["container"]) for p in labels_of(samples, "gpudiag_process_gpu_memory_bytes")
    }
    assert owners == {("llm", "ml", "trainer")}


def test_exporter_runs_on_every_example_machine(cli: Cli) -> None:
    from gpudiag.replay.fixtures import example_names

    for name in example_names():
        for compat in ("native", "dcgm"):
            code, out, err = cli.replay(name, "exporter", "--once", "--compat", compat)
            assert code == 0, (name, compat, err)
            assert "gpudiag_nvml_up" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_http_server_serves_metrics_healthz_and_404(source: MachineSource) -> None:
    server = Server(Exporter(source), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
    try:
        base = f"http://127.0.0.1:{server.port}"
        status, body = get(f"{base}/metrics")
        assert status == 200 and "gpudiag_gpu_memory_used_bytes{" in body
        assert get(f"{base}/healthz") == (200, "ok\n")
        assert get(f"{base}/nope")[0] == 404
    finally:
        server.shutdown()
    with open_source("no-driver") as s:
        server = Server(Exporter(s), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
        try:
            status, body = get(f"http://127.0.0.1:{server.port}/healthz")
            assert status == 503 and "driver not loaded" in body
        finally:
            server.shutdown()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--compat", "prom"], "--compat 'prom': use native or dcgm"),
        (["--port", "70000"], "--port 70000: not a TCP port"),
        (["--max-process-series", "-1"], "--max-process-series must be 0 or more"),
        (["--no-kubelet", "--kubelet-socket", "/x.sock"], "contradict"),
    ],
)
def test_usage_errors_are_one_line(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli.replay(EXAMPLE, "exporter", *args)
    assert code == ExitCode.USAGE
    assert message in err and len(err.strip().splitlines()) == 1


def test_port_in_use_is_explained(cli: Cli) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code, _, err = cli.replay(EXAMPLE, "exporter", "--port", str(s.getsockname()[1]))
    assert code == ExitCode.USAGE
    assert "cannot serve metrics on 127.0.0.1:" in err


@pytest.mark.slow
def test_exporter_process_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "--replay", EXAMPLE, "exporter", "--port", str(port), "--no-kubelet"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = get(f"http://127.0.0.1:{port}/metrics")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "exporter did not start"
                time.sleep(0.1)
        assert status == 200 and "gpudiag_process_gpu_memory_bytes" in body
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143  # 128 + SIGTERM, as every command ends on a signal
    assert f"serving http://127.0.0.1:{port}/metrics" in err and "Traceback" not in err


@pytest.mark.slow
def test_exporter_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from gpudiag.cli.app import main\n"
        f"sys.argv = ['gpudiag', '--replay', '{EXAMPLE}', 'exporter', '--once']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "gpudiag_gpu_info" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("compat", ["native"])  # DCGM's bare counters: prometheus-client cannot say them
def test_fast_text_exposition_says_what_prometheus_client_says(compat: str) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gpudiag.replay.fixtures import example_names

    def parsed(text: str) -> list[tuple[str, str, str, list[Any]]]:
        return [
            (f.name, f.documentation, f.type, sorted((s.name, sorted(s.labels.items()), s.value) for s in f.samples))
            for f in text_string_to_metric_families(text)
        ]

    for name in example_names():
        with open_source(name) as s:
            exporter = Exporter(s, compat=compat, hostname='host "with" \\ quotes')
            exporter.render_text()  # GPM's figures come with the scrapes after the first
            registry = CollectorRegistry(auto_describe=False)
            registry.register(Printable(exporter))  # as the OpenMetrics path serves it: outside text printable
            assert parsed(exporter.render_text().decode()) == parsed(generate_latest(registry).decode()), name


def test_openmetrics_scrapes_go_to_prometheus_client(source: MachineSource) -> None:
    server = Server(Exporter(source), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
    try:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics", headers={"Accept": "application/openmetrics-text"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            assert response.read().decode().endswith("# EOF\n")
    finally:
        server.shutdown()


# What Prometheus 2.x sends by default (scrape_protocols unset): OpenMetrics preferred, text accepted.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def fetch(url: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
        return dict(response.headers), response.read()


@pytest.mark.parametrize("compat", ["native", "dcgm"])
def test_prometheus_gets_the_text_format_gzipped_when_it_asks(source: MachineSource, compat: str) -> None:
    import gzip

    server = Server(Exporter(source, compat=compat), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        headers, body = fetch(url, {"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip"})
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert headers["Content-Encoding"] == "gzip" and int(headers["Content-Length"]) == len(body)
        text = gzip.decompress(body).decode()
        plain_headers, plain = fetch(url, {"Accept": PROMETHEUS_ACCEPT})
        assert "Content-Encoding" not in plain_headers
        assert types_of(text) == types_of(plain.decode()) and "counter" in types_of(text).values()
        assert len(body) * 5 < len(plain)  # compressed, not merely wrapped
    finally:
        server.shutdown()


def test_name_filters_are_served_by_the_fast_renderer_in_both_families(source: MachineSource) -> None:
    for compat, name in (
        ("native", "gpudiag_gpu_energy_joules_total"),
        ("dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
    ):
        server = Server(Exporter(source, compat=compat), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
        try:
            _, body = fetch(f"http://127.0.0.1:{server.port}/metrics?name[]={name}&name[]=gpudiag_nvml_up", {})
        finally:
            server.shutdown()
        assert types_of(body.decode()) == {name: "counter", "gpudiag_nvml_up": "gauge"}


def test_the_dcgm_family_is_never_openmetrics(source: MachineSource) -> None:
    server = Server(Exporter(source, compat="dcgm"), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
    try:
        headers, body = fetch(f"http://127.0.0.1:{server.port}/metrics", {"Accept": "application/openmetrics-text"})
    finally:
        server.shutdown()
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert types_of(body.decode())["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] == "counter"


def test_livez_fails_while_a_scrape_hangs_and_readyz_never_does(source: MachineSource) -> None:
    import threading

    from gpudiag.export.exporter import HUNG_AFTER_S

    now = [0.0]
    hang = threading.Event()
    hung = threading.Event()

    def stuck() -> dict[int, Any]:  # called inside the scrape, as a hung NVML call would be
        if now[0] > 0:
            hung.set()
            hang.wait(10)
        return {}

    exporter = Exporter(source, tracked=stuck, clock=lambda: now[0])
    server = Server(exporter, "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert get(f"{base}/livez") == (200, "ok\n") and get(f"{base}/readyz") == (200, "ok\n")
        now[0] = 1.0
        scraping = threading.Thread(target=get, args=(f"{base}/metrics",))
        scraping.start()
        assert hung.wait(10)
        assert get(f"{base}/livez")[0] == 200  # a scrape in progress is not yet a hung one
        now[0] += HUNG_AFTER_S + 1
        status, body = get(f"{base}/livez")
        assert status == 503 and "a scrape has been running for 61 s" in body
        assert get(f"{base}/readyz") == (200, "ok\n")  # still a target: a hung GPU is news, not a reason to hide
        hang.set()
        scraping.join(10)
        assert get(f"{base}/livez") == (200, "ok\n")
    finally:
        hang.set()
        server.shutdown()
    with open_source("no-driver") as s:  # NVML down: /healthz says so; the exporter is alive and ready
        server = Server(Exporter(s), "127.0.0.1", 0, poll_interval=QUICK_SHUTDOWN)
        try:
            base = f"http://127.0.0.1:{server.port}"
            assert get(f"{base}/healthz")[0] == 503
            assert get(f"{base}/livez")[0] == get(f"{base}/readyz")[0] == 200
        finally:
            server.shutdown()


def test_host_lookups_are_cached_while_the_pid_stays(source: MachineSource) -> None:
    asked: list[int] = []
    real = source.host

    def counting(pid: int) -> Any:
        asked.append(pid)
        return real(pid)

    source.host = counting
    exporter = Exporter(source)
    scrape(exporter)
    scrape(exporter)
    assert len(asked) == 64  # once per process, not once per scrape


@pytest.mark.gpu
def test_exporter_on_this_machines_gpus(cli: Cli) -> None:
    """Live NVML: every GPU has its identity, memory and clocks; the text passes prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    code, out, err = cli("exporter", "--once", "--no-kubelet")
    assert code == 0, err
    samples = [s for family in text_string_to_metric_families(out) for s in family.samples]
    gpus = {s.labels["gpu"] for s in samples if s.name == "gpudiag_gpu_info"}
    assert gpus
    for name in ("gpudiag_gpu_memory_total_bytes", "gpudiag_gpu_clock_hertz", "gpudiag_gpu_temperature_celsius"):
        assert {s.labels["gpu"] for s in samples if s.name == name} == gpus, name
    assert [s.value for s in samples if s.name == "gpudiag_nvml_up"] == [1]


def test_pytorch_allocator_split_where_gpudiag_track_runs(tmp_path: Path) -> None:
    from gpudiag.track import entries
    from tests.test_memory_cli import recorded_entry

    directory = recorded_entry(tmp_path / "track")
    with open_source("v100x4-tutorial") as s:
        samples = scrape(Exporter(s, tracked=lambda: entries.read_entries(directory, live=False)))
    proc = {"gpu": "0", "pid": "31337"}
    assert pick(samples, "gpudiag_process_gpu_memory_bytes", **proc) == [10944 * MiB]
    assert pick(samples, "gpudiag_process_torch_allocated_bytes", **proc) == [8000 * MiB]
    assert pick(samples, "gpudiag_process_torch_reserved_bytes", **proc) == [10000 * MiB]
    assert pick(samples, "gpudiag_process_torch_cached_free_bytes", **proc) == [2000 * MiB]
    assert pick(samples, "gpudiag_process_other_gpu_memory_bytes", **proc) == [944 * MiB]
    assert pick(samples, "gpudiag_process_torch_ooms_total", **proc) == [1]
    assert pick(samples, "gpudiag_process_torch_alloc_retries_total", **proc) == [3]
    assert pick(samples, "gpudiag_process_torch_allocated_bytes", gpu="1") == []  # untracked device: no split


@pytest.mark.parametrize(
    ("compat", "never"),
    [
        ("native", {"nvmlDeviceValidateInforom", "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetPersistenceMode"}),
        (
            "dcgm",
            {"nvmlDeviceValidateInforom", "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetNumaNodeId"},
        ),
    ],
)
def test_a_scrape_asks_nvml_only_for_what_its_family_exports(
    source: MachineSource, compat: str, never: set[str]
) -> None:
    exporter = Exporter(source, compat=compat)
    scrape(exporter)  # the first also asks what cannot change, GPM's support and the Xid event set
    before = len(source.lib.calls)
    scrape(exporter)
    asked = set(source.lib.calls[before:])
    assert not asked & never
    # NVML samples PCIe throughput over 20 ms per call: GPM's figures give the traffic instead.
    assert "nvmlDeviceGetPcieThroughput" not in asked
    assert len(source.lib.calls) - before < 40 * 8  # a handful of calls per GPU, never the details' ~130
    assert "nvmlDeviceGetClockInfo" in asked and "nvmlDeviceGetMemoryInfo" in asked
    assert {"nvmlGpmSampleGet", "nvmlDeviceGetFieldValues", "nvmlEventSetWait_v2"} <= asked


def test_throttle_reasons_are_the_slowdowns_named_as_the_checks_name_them() -> None:
    from gpudiag.export.gpu_families import GPU_FAMILIES
    from gpudiag.readings import CLOCK_EVENT_NAMES

    (events,) = (f for f in GPU_FAMILIES if f.name == "gpudiag_gpu_clock_event_active")
    reasons = {s.bit: s.labels[0] for s in events.samples}
    assert {bit: CLOCK_EVENT_NAMES[bit] for bit in reasons} == reasons
    assert sorted(reasons) == [0x4, 0x8, 0x20, 0x40, 0x80]  # idle, app clocks, sync boost, display: states


@pytest.mark.parametrize(("example", "capture"), [("idle", ""), ("busy", "-busy")])
def test_captured_h100_clocks_energy_and_replays_are_the_captures(example: str, capture: str) -> None:
    """The exporter's extra readings on the two captured H100 machines, held against nvidia-smi -q -x
    and the NVML getters recorded at the same moment (docs/hardware/h100-80gb-hbm3-driver580/)."""
    import json
    import xml.etree.ElementTree as ET

    hardware = Path(__file__).resolve().parents[1] / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
    with open_source(f"h100-driver580-{example}") as s:
        (gpu,) = s.read().gpus
    smi = ET.parse(hardware / f"nvidia-smi-q{capture}.xml").getroot().find("gpu")
    assert smi is not None
    clocks = smi.find("clocks")
    assert clocks is not None

    def mhz(tag: str) -> int:
        return int((clocks.findtext(tag) or "").split()[0])

    assert (gpu.clock_sm_mhz.value, gpu.clock_graphics_mhz.value, gpu.clock_memory_mhz.value) == (
        mhz("sm_clock"),
        mhz("graphics_clock"),
        mhz("mem_clock"),
    )
    assert gpu.pcie_replays.value == int(smi.findtext("pci/replay_counter") or -1)
    getters = json.loads((hardware / f"nvml-getters-{example}.json").read_text())["device0"]
    assert gpu.energy_mj.value == getters["nvmlDeviceGetTotalEnergyConsumption"]["ok"]


@pytest.mark.parametrize(("example", "capture"), [("idle", ""), ("busy", "-busy")])
def test_captured_h100_memory_temperature_codecs_and_licensing_are_the_captures(example: str, capture: str) -> None:
    """dcgm-exporter's fields on the captured H100s against its nvidia-smi -q -x (the snapshot's GPU) and
    the NVML getters of the same moment; what neither recorded (the other policies' clock-holding time,
    NVLink counters, GPM) stays "not recorded"."""
    import json
    import xml.etree.ElementTree as ET

    hardware = Path(__file__).resolve().parents[1] / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
    with open_source(f"h100-driver580-{example}") as s:
        (gpu,) = s.read(GROUPS["dcgm"]).gpus
    smi = ET.parse(hardware / f"nvidia-smi-q{capture}.xml").getroot().find("gpu")
    assert smi is not None
    assert gpu.memory_temperature_c.value == int((smi.findtext("temperature/memory_temp") or "").split()[0])
    getters = json.loads((hardware / f"nvml-getters-{example}.json").read_text())["device0"]
    assert [gpu.encoder_percent.value, 100000] == getters["nvmlDeviceGetEncoderUtilization"]["ok"]
    assert [gpu.decoder_percent.value, 100000] == getters["nvmlDeviceGetDecoderUtilization"]["ok"]
    assert getters["nvmlDeviceGetGridLicensableFeatures"]["ok"]["isGridLicenseSupported"] == 0
    assert gpu.vgpu_license_status.value == 0  # DCGM's answer where vGPU licensing does not apply
    held = {
        line.split("\t")[0]: line.split("\t")[1]
        for line in (hardware / "nvidia-smi-query-gpu-each-field.tsv").read_text().splitlines()
    }
    assert held["clocks_event_reasons_counters.sw_power_cap"] == "0 us" and gpu.violations.power_ns.value == 0
    assert held["clocks_event_reasons_counters.sync_boost"] == "0 us" and gpu.violations.sync_boost_ns.value == 0
    for reading in (gpu.violations.thermal_ns, gpu.nvlink_data_rx_kib, gpu.pcie_data_tx_bytes, gpu.profiling):
        assert reading.reason is Reason.NOT_RECORDED


def test_the_exporters_readings_agree_with_the_recorded_details() -> None:
    """Where an example records nvidia-smi -q details, the exporter's cheap readings say the same."""
    from gpudiag.replay.fixtures import example_names

    for name in example_names():
        for gpu in load(name)[0].gpus:
            details = gpu.details.value
            if details is None:
                continue
            assert gpu.clock_sm_mhz == details.clocks.current.sm, name
            assert gpu.clock_memory_mhz == details.clocks.current.memory, name
            assert gpu.clock_graphics_mhz == details.clocks.current.graphics, name
            assert gpu.energy_mj == details.power.energy_mj, name
            assert gpu.pcie_replays == details.pcie.replay_counter, name
            assert gpu.memory_temperature_c == details.temperatures.memory_c, name
            assert gpu.encoder_percent == details.codecs.encoder_percent, name
            assert gpu.decoder_percent == details.codecs.decoder_percent, name
            counters = dict(details.clocks.event_reason_counters_us)
            assert gpu.violations.power_ns == counters["sw_power_cap"].map(lambda us: us * 1000), name
            assert gpu.violations.sync_boost_ns == counters["sync_boost"].map(lambda us: us * 1000), name
