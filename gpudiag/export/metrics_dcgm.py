"""dcgm-exporter's default counters under their own names, units, types and labels (``--compat dcgm``).

So that NVIDIA's published Grafana dashboard for dcgm-exporter, and alerts written for it, work
unchanged. The names, units and Prometheus types are those of dcgm-exporter's
``etc/default-counters.csv`` (and, for the fields it lists commented out, their lines there); the
labels are those its renderer (``internal/pkg/rendermetrics/render_metrics.go``) puts on each
series: ``gpu``, ``UUID``, ``pci_bus_id``, ``device`` (``nvidia`` + the GPU's id, as dcgm-exporter
writes it, not the minor number), ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` on MIG instances,
the host name, the driver version (the CSV's ``label`` row) and ``pod``/``namespace``/``container``
in Kubernetes; ``DCGM_FI_DEV_XID_ERRORS`` adds ``err_code`` and ``err_msg``
(``internal/pkg/collector/gpu_collector.go``). The host name is both ``Hostname`` (dcgm-exporter
up to 4.8.2, and the dashboards and rules written for it) and ``hostname`` (since 4.8.3).

Several fields are counters without the ``_total`` suffix, as dcgm-exporter types them: they are
rendered as ``# TYPE X counter`` over samples named ``X`` (see :class:`BareMetric`), which only
the text format 0.0.4 can say; this family is never served as OpenMetrics.

Everything comes from NVML; nothing is faked where NVML has no answer, and a field a GPU does not
answer has no series. Memory temperature (field value ``NVML_FI_DEV_MEMORY_TEMP``) and
encoder/decoder utilization (``nvmlDeviceGetEncoderUtilization``/``DecoderUtilization``) are NVML
readings like the rest of ``FIELDS`` (``readings.GPU_READINGS`` names each one's call); the Xid
errors come from NVML's event set (``nvmlEventSetWait_v2`` with no wait, on ``nvmlEventTypeXidCriticalError``); the
NVLink bandwidth (field values ``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX``/``RX``) and the PCIe
throughput (``NVML_FI_DEV_PCIE_COUNT_TX_BYTES``/``RX_BYTES``) are those counters per second between
two scrapes (``RATES``); the profiling fields (``DCGM_FI_PROF_*``) come from NVML's GPU performance
monitoring (GPM: ``nvmlGpmMetricsGet``) on Hopper and newer, the way DCGM itself reads them there:
on an older GPU they are absent (DCGM reads them through its own profiling module, which NVML does
not have), as is each one GPM does not answer. ``gpudiag_gpu_lost`` (gpudiag's own, with the same
identity labels) says which GPU went away, where dcgm-exporter's series would just stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from gpudiag.export.attribution import Owner
from gpudiag.export.exposition import BareMetric, RowMetric
from gpudiag.export.metrics_native import mig_profile
from gpudiag.export.xid import XidTally, description
from gpudiag.model import Gpu, GpuState, Machine, Reading
from gpudiag.readings import reading_at

MIB = 1024 * 1024


class Field(NamedTuple):
    """One DCGM field: its name, Prometheus type and help as dcgm-exporter writes them, and the
    reading it comes from (a ``gpudiag.readings.Spec`` key; ``part``: an attribute of a struct value)
    in DCGM's unit."""

    name: str
    type: str
    help: str
    key: str
    part: str = ""
    scale: float = 1  # multiplied into DCGM's unit (a percentage as a ratio)
    mib: bool = False  # bytes as whole MiB


_VIOLATIONS = (
    ("POWER", "power", "power constraints"),
    ("THERMAL", "thermal", "thermal constraints"),
    ("SYNC_BOOST", "sync_boost", "sync-boost constraints"),
    ("BOARD_LIMIT", "board_limit", "board limit constraints"),
    ("LOW_UTIL", "low_utilization", "low utilization"),
    ("RELIABILITY", "reliability", "reliability constraints"),
)
_ECC = (
    ("SBE_VOL", "volatile_corrected", "single-bit volatile"),
    ("DBE_VOL", "volatile_uncorrected", "double-bit volatile"),
    ("SBE_AGG", "aggregate_corrected", "single-bit persistent"),
    ("DBE_AGG", "aggregate_uncorrected", "double-bit persistent"),
)
# DCGM's profiling fields (DCGM_FI_PROF_*) by the GPM figure each is (dcgm_fields.cpp maps them so on
# Hopper and newer), the help of dcgm-exporter's CSV, and the factor to DCGM's unit.
_PROFILING = (
    ("GR_ENGINE_ACTIVE", "graphics_active_percent", "Ratio of time the graphics engine is active."),
    ("SM_ACTIVE", "sm_active_percent", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("SM_OCCUPANCY", "sm_occupancy_percent", "The ratio of number of warps resident on an SM."),
    ("PIPE_TENSOR_ACTIVE", "tensor_active_percent", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DRAM_ACTIVE",
        "dram_active_percent",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    ("PIPE_FP64_ACTIVE", "fp64_active_percent", "Ratio of cycles the fp64 pipes are active."),
    ("PIPE_FP32_ACTIVE", "fp32_active_percent", "Ratio of cycles the fp32 pipes are active."),
    ("PIPE_FP16_ACTIVE", "fp16_active_percent", "Ratio of cycles the fp16 pipes are active."),
    *(
        (
            f"{link}_{direction.upper()}_BYTES",
            f"{link.lower()}_{direction}_bytes_per_s",
            f"The rate of data {verb} over the {bus} bus - including both protocol headers and data payloads -"
            " in bytes per second.",
        )
        for link, bus in (("PCIE", "PCIe"), ("NVLINK", "NVLink"))
        for direction, verb in (("tx", "transmitted"), ("rx", "received"))
    ),
)

FIELDS: tuple[Field, ...] = (
    Field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "clock_sm_mhz"),
    Field("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "clock_memory_mhz"),
    Field("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "memory_temperature_c"),
    Field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temperature_c"),
    Field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_draw_w"),
    Field(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", "energy_mj"
    ),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replays"),
    Field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "utilization", "gpu_percent"),
    Field("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "utilization", "memory_percent"),
    Field("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", "encoder_percent"),
    Field("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", "decoder_percent"),
    *(
        Field(
            f"DCGM_FI_DEV_{name}_VIOLATION",
            "counter",
            f"Throttling duration due to {why} (in ns).",
            f"violations.{policy}_ns",
        )
        for name, policy, why in _VIOLATIONS
    ),
    Field(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).",
        "clock_event_reasons",
    ),
    Field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "memory", "free_bytes", mib=True),
    Field("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "memory", "used_bytes", mib=True),
    Field(
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
        "memory",
        "reserved_bytes",
        mib=True,
    ),
    *(
        Field(
            f"DCGM_FI_DEV_ECC_{name}_TOTAL", "counter", f"Total number of {what} ECC errors.", f"ecc_errors.{counter}"
        )
        for name, counter, what in _ECC
    ),
    Field(
        "DCGM_FI_DEV_RETIRED_SBE",
        "counter",
        "Total number of retired pages due to single-bit errors.",
        "retired_pages",
        "single_bit",
    ),
    Field(
        "DCGM_FI_DEV_RETIRED_DBE",
        "counter",
        "Total number of retired pages due to double-bit errors.",
        "retired_pages",
        "double_bit",
    ),
    Field(
        "DCGM_FI_DEV_RETIRED_PENDING",
        "counter",
        "Total number of pages pending retirement.",
        "retired_pages",
        "pending",
    ),
    Field("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", "vgpu_license_status"),
    Field(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        "remapped_rows",
        "uncorrectable",
    ),
    Field(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        "remapped_rows",
        "correctable",
    ),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", "remapped_rows", "failure"),
    *(
        Field(f"DCGM_FI_PROF_{name}", "gauge", doc, "profiling", figure, 0.01 if figure.endswith("_percent") else 1)
        for name, figure, doc in _PROFILING
    ),
)
XID = "DCGM_FI_DEV_XID_ERRORS"
XID_HELP = "Value of the last XID error encountered."
NVLINK_BANDWIDTH = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
NVLINK_BANDWIDTH_HELP = "Total number of NVLink bandwidth counters for all lanes."
# DCGM's fields that are rates of NVML counters between two scrapes: (field, type, help as dcgm-exporter's
# CSV writes it, the counter's model field, the divisor from its unit per second to DCGM's). NVLink: KiB
# (rx + tx, all links) per second / 1000, as DcgmCacheManager::ReadAndCacheNvLinkBandwidth computes it.
# PCIe: DCGM reads nvmlDeviceGetPcieThroughput (KB/s over 20 ms, a 20 ms wait per call and direction);
# the same KB/s from NVML's PCIe byte counters over the scrape interval makes a scrape wait for nothing.
RATES = (
    (NVLINK_BANDWIDTH, "counter", NVLINK_BANDWIDTH_HELP, "nvlink_data_kib", 1000.0),
    *(
        (
            f"DCGM_FI_DEV_PCIE_{direction.upper()}_THROUGHPUT",
            "counter",
            f"Total number of bytes {verb} through PCIe {direction.upper()} (in KB) via NVML.",
            f"pcie_data_{direction}_bytes",
            1024.0,
        )
        for direction, verb in (("tx", "transmitted"), ("rx", "received"))
    ),
)
# The readings RATES' counters are made of (export.exporter's per_second), and the MIG instances the
# framebuffer fields also have series of: with FIELDS', what the dcgm family reads (READS).
RATE_READS = ("nvlink_data_rx_kib", "nvlink_data_tx_kib", "pcie_data_tx_bytes", "pcie_data_rx_bytes")
READS = (*(f.key for f in FIELDS), *RATE_READS, "mig_devices")
LOST = "gpudiag_gpu_lost"


def _value(g: Gpu, key: str, part: str) -> Any:
    """The reading at ``key`` of a GPU (``part`` of its value); None when it is N/A."""
    value = reading_at(g, key).value
    if value is not None and part:
        value = getattr(value, part)
        value = value.value if isinstance(value, Reading) else value
    return value


IDENTITY = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hostname")
OWNER = ("pod", "namespace", "container")


def _identity(g: Gpu, known: Gpu | None, hostname: str) -> tuple[str, ...]:
    """dcgm-exporter's identity labels of a GPU (IDENTITY's values); a GPU that is not OK now keeps
    those it last had."""
    source = g if g.state is GpuState.OK or known is None else known
    return (
        str(g.index),
        source.uuid.get(""),
        source.pci_bus_id.get(""),
        f"nvidia{g.index}",  # dcgm-exporter: "nvidia" + the GPU's DCGM id (NVML's order)
        source.name.get(""),
        hostname,  # Hostname: dcgm-exporter up to 4.8.2 (and dashboards and rules written then)
        hostname,  # hostname: dcgm-exporter since 4.8.3
    )


def families(
    machine: Machine | None,
    hostname: str,
    device_owners: Mapping[str, Owner] | None = None,
    known: Mapping[int, Gpu] | None = None,
    xids: XidTally | None = None,
    per_second: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Any]:
    """The DCGM-named families for one reading, then ``gpudiag_gpu_lost``.

    ``device_owners`` (GPU or MIG UUID, lower case -> the one container holding it) is given in
    Kubernetes: every series then carries ``pod``, ``namespace`` and ``container``, empty where
    no single container holds the device (an empty label is no label to Prometheus).
    ``known``: each GPU as last seen working, by index, for the identity of one that is lost now.
    ``xids``: the Xid errors seen so far (a GPU whose events NVML cannot report has no series);
    ``per_second``: the increase per second of the counters RATES names (by counter, then GPU UUID)
    since the previous scrape, where two scrapes gave one.

    Most families have one set of label names (rows of values, formatted once per series); the
    framebuffer's also has MIG instances' series, which dcgm-exporter labels further.
    """
    kube = device_owners is not None
    names = [*IDENTITY, "DCGM_FI_DRIVER_VERSION", *(OWNER if kube else ())]
    with_mig = {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED"}
    made: dict[str, Any] = {
        name: BareMetric(name, doc, typ) if name in with_mig else RowMetric(name, doc, typ, names, bare=True)
        for name, typ, doc, *_ in FIELDS
    }
    xid = RowMetric(XID, XID_HELP, "gauge", [*names, "err_code", "err_msg"], bare=True)
    rated = [
        (RowMetric(name, doc, typ, names, bare=True), counter, divisor) for name, typ, doc, counter, divisor in RATES
    ]
    lost = RowMetric(LOST, "1 when the GPU is lost (fallen off the bus) or cannot be opened", "gauge", list(IDENTITY))
    out = [*made.values(), xid, *(family for family, _, _ in rated), lost]
    if machine is None:
        return out
    driver = machine.nvml.driver_version.get("")
    owners = device_owners or {}
    remembered = known or {}
    rates = per_second or {}
    for g in machine.gpus:
        identity = _identity(g, remembered.get(g.index), hostname)
        lost.add_row(identity, 0.0 if g.state is GpuState.OK else 1.0)
        if g.state is not GpuState.OK:
            continue
        uuid = g.uuid.get("")
        values = (*identity, driver)
        if kube:
            who = owners.get(uuid.lower(), Owner())
            values = (*values, who.pod, who.namespace, who.container)
        labels = dict(zip(names, values, strict=True))
        for name, _typ, _doc, key, part, scale, in_mib in FIELDS:
            value = _value(g, key, part)
            if value is None:
                continue
            if in_mib:
                value //= MIB
            elif scale != 1:
                value *= scale
            family = made[name]
            if name in with_mig:
                family.add_sample(name, labels, float(value))
            else:
                family.add_row(values, float(value))
        record = xids.of(uuid) if xids is not None else None
        if record is not None:
            xid.add_row((*values, str(record.last), description(record.last)), float(record.last))
        for family, counter, divisor in rated:
            if (rate := rates.get(counter, {}).get(uuid)) is not None:
                family.add_row(values, float(int(rate / divisor)))  # DCGM's integer unit
        for mig in g.mig_devices:
            if (m := mig.memory.value) is None:
                continue
            gi = mig.gpu_instance_id.value
            mig_labels = {
                **dict(zip(names[: len(IDENTITY) + 1], values, strict=False)),
                "GPU_I_PROFILE": mig_profile(mig.name.get("")),
                "GPU_I_ID": "" if gi is None else str(gi),
            }
            if kube:
                who = owners.get(mig.uuid.get("").lower(), Owner())
                mig_labels.update(pod=who.pod, namespace=who.namespace, container=who.container)
            made["DCGM_FI_DEV_FB_FREE"].add_sample("DCGM_FI_DEV_FB_FREE", mig_labels, float(m.free_bytes // MIB))
            made["DCGM_FI_DEV_FB_USED"].add_sample("DCGM_FI_DEV_FB_USED", mig_labels, float(m.used_bytes // MIB))
    return out
