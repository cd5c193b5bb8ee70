"""dcgm-exporter's default counters under their own names, units, types and labels (``--compat dcgm``).

So that NVIDIA's published Grafana dashboard for dcgm-exporter, and alerts written for it, work
unchanged. The names, units and Prometheus types are those of dcgm-exporter's
``etc/default-counters.csv``; the labels are those its renderer
(``internal/pkg/rendermetrics/render_metrics.go``) puts on each series: ``gpu``, ``UUID``,
``pci_bus_id``, ``device`` (``nvidia`` + the GPU's id, as dcgm-exporter writes it, not the
minor number), ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` on MIG instances, the host name,
the driver version (the CSV's ``label`` row) and ``pod``/``namespace``/``container`` in
Kubernetes. The host name is both ``Hostname`` (dcgm-exporter up to 4.8.2, and the dashboards
and rules written for it) and ``hostname`` (since 4.8.3).

Four fields are counters without the ``_total`` suffix, as dcgm-exporter types them: they are
rendered as ``# TYPE X counter`` over samples named ``X`` (see :class:`BareMetric`), which only
the text format 0.0.4 can say; this family is never served as OpenMetrics.

Only what NVML itself measures is exported: DCGM's profiling fields (``DCGM_FI_PROF_*``), XID
errors, memory temperature, encoder/decoder and NVLink counters need DCGM and are absent, never
faked. ``gpudiag_gpu_lost`` (gpudiag's own, with the same identity labels) says which GPU went
away, where dcgm-exporter's series would just stop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpudiag.export.attribution import Owner
from gpudiag.export.exposition import BareMetric
from gpudiag.export.metrics_native import mig_profile
from gpudiag.model import Gpu, GpuState, Machine, Reading

MIB = 1024 * 1024

# (field, Prometheus type, help as dcgm-exporter writes it, reading)
Field = tuple[str, str, str, Callable[[Gpu], Reading[Any]]]


def _mib(pick: Callable[[Any], int]) -> Callable[[Gpu], Reading[Any]]:
    return lambda g: g.memory.map(lambda m: pick(m) // MIB)


FIELDS: tuple[Field, ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: g.clock_sm_mhz),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda g: g.clock_memory_mhz),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temperature_c),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: g.power_draw_w),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        lambda g: g.energy_mj,
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", lambda g: g.pcie_replays),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.utilization.map(lambda u: u.gpu_percent)),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
        lambda g: g.utilization.map(lambda u: u.memory_percent),
    ),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", _mib(lambda m: m.free_bytes)),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", _mib(lambda m: m.used_bytes)),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        "gauge",
        "Framebuffer memory reserved (in MiB).",
        lambda g: (
            g.memory.value.reserved_bytes.map(lambda b: b // MIB)
            if g.memory.value is not None
            else Reading.missing_like(g.memory)
        ),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        lambda g: g.remapped_rows.map(lambda r: r.uncorrectable),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        lambda g: g.remapped_rows.map(lambda r: r.correctable),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda g: g.remapped_rows.map(lambda r: int(r.failure)),
    ),
)

LOST = "gpudiag_gpu_lost"


def _identity(g: Gpu, known: Gpu | None, hostname: str) -> dict[str, str]:
    """dcgm-exporter's identity labels of a GPU; a GPU that is not OK now keeps those it last had."""
    source = g if g.state is GpuState.OK or known is None else known
    return {
        "gpu": str(g.index),
        "UUID": source.uuid.get(""),
        "pci_bus_id": source.pci_bus_id.get(""),
        "device": f"nvidia{g.index}",  # dcgm-exporter: "nvidia" + the GPU's DCGM id (NVML's order)
        "modelName": source.name.get(""),
        "Hostname": hostname,  # dcgm-exporter up to 4.8.2 (and dashboards and rules written then)
        "hostname": hostname,  # dcgm-exporter since 4.8.3
    }


def _with_owner(labels: dict[str, str], who: Owner | None) -> dict[str, str]:
    if who is None:
        return labels
    return {**labels, "pod": who.pod, "namespace": who.namespace, "container": who.container}


def families(
    machine: Machine | None,
    hostname: str,
    device_owners: Mapping[str, Owner] | None = None,
    known: Mapping[int, Gpu] | None = None,
) -> list[Any]:
    """The DCGM-named families for one reading, then ``gpudiag_gpu_lost``.

    ``device_owners`` (GPU or MIG UUID, lower case -> the one container holding it) is given in
    Kubernetes: every series then carries ``pod``, ``namespace`` and ``container``, empty where
    no single container holds the device (an empty label is no label to Prometheus).
    ``known``: each GPU as last seen working, by index, for the identity of one that is lost now.
    """
    made = {name: BareMetric(name, doc, typ) for name, typ, doc, _ in FIELDS}
    lost = BareMetric(LOST, "1 when the GPU is lost (fallen off the bus) or cannot be opened", "gauge")
    if machine is None:
        return [*made.values(), lost]
    driver = machine.nvml.driver_version.get("")
    kube = device_owners is not None
    owners = device_owners or {}
    remembered = known or {}
    for g in machine.gpus:
        identity = _identity(g, remembered.get(g.index), hostname)
        lost.add_sample(LOST, identity, 0.0 if g.state is GpuState.OK else 1.0)
        if g.state is not GpuState.OK:
            continue
        base = {**identity, "DCGM_FI_DRIVER_VERSION": driver}
        gpu_owner = owners.get(g.uuid.get("").lower(), Owner()) if kube else None
        labels = _with_owner(base, gpu_owner)
        for name, _typ, _doc, read in FIELDS:
            value = read(g).value
            if value is not None:
                made[name].add_sample(name, labels, float(value))
        for mig in g.mig_devices:
            if (m := mig.memory.value) is None:
                continue
            gi = mig.gpu_instance_id.value
            mig_labels = {
                **base,
                "GPU_I_PROFILE": mig_profile(mig.name.get("")),
                "GPU_I_ID": "" if gi is None else str(gi),
            }
            mig_owner = owners.get(mig.uuid.get("").lower(), Owner()) if kube else None
            mig_labels = _with_owner(mig_labels, mig_owner)
            made["DCGM_FI_DEV_FB_FREE"].add_sample("DCGM_FI_DEV_FB_FREE", mig_labels, float(m.free_bytes // MIB))
            made["DCGM_FI_DEV_FB_USED"].add_sample("DCGM_FI_DEV_FB_USED", mig_labels, float(m.used_bytes // MIB))
    return [*made.values(), lost]
