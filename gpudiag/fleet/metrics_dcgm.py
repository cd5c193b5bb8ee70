"""dcgm-exporter's default counters under their own names, units and labels (``--compat dcgm``).

So that NVIDIA's published Grafana dashboard for dcgm-exporter, and alerts written for it, work
unchanged. The names and units are those of dcgm-exporter's ``etc/default-counters.csv``; the
labels are those it puts on each series (``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
``modelName``, ``Hostname``/``hostname``, the driver version, ``GPU_I_PROFILE``/``GPU_I_ID``
on MIG instances, and ``pod``/``namespace``/``container`` in Kubernetes).

Only what NVML itself measures is exported: DCGM's profiling fields (``DCGM_FI_PROF_*``), XID
errors, memory temperature, encoder/decoder and NVLink counters need DCGM and are absent, never
faked. dcgm-exporter types some fields as counters without the ``_total`` suffix; they are
exposed untyped here, which keeps the names the dashboards query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpudiag.fleet.attribution import Owner
from gpudiag.fleet.metrics_native import mig_profile
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
        "unknown",
        "Total energy consumption since boot (in mJ).",
        lambda g: g.energy_mj,
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "unknown", "Total number of PCIe retries.", lambda g: g.pcie_replays),
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
        "unknown",
        "Number of remapped rows for uncorrectable errors",
        lambda g: g.remapped_rows.map(lambda r: r.uncorrectable),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "unknown",
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

MIG_FIELDS = ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED")


def _base_labels(g: Gpu, hostname: str, driver: str) -> dict[str, str]:
    minor = g.minor_number.value
    return {
        "gpu": str(g.index),
        "UUID": g.uuid.get(""),
        "pci_bus_id": g.pci_bus_id.get(""),
        "device": f"nvidia{minor}" if minor is not None else "",
        "modelName": g.name.get(""),
        "Hostname": hostname,  # dcgm-exporter before 3.3 (and dashboards written then)
        "hostname": hostname,  # dcgm-exporter since 3.3
        "DCGM_FI_DRIVER_VERSION": driver,
    }


def _with_owner(labels: dict[str, str], who: Owner | None) -> dict[str, str]:
    if who is None:
        return labels
    return {**labels, "pod": who.pod, "namespace": who.namespace, "container": who.container}


def families(
    machine: Machine | None,
    hostname: str,
    device_owners: Mapping[str, Owner] | None = None,
) -> list[Any]:
    """The DCGM-named families for one reading. ``device_owners`` (GPU or MIG UUID, lower case ->
    the one container holding it) is given in Kubernetes: every series then carries ``pod``,
    ``namespace`` and ``container``, empty where no single container holds the device."""
    from prometheus_client.core import Metric

    made = {name: Metric(name, doc, typ) for name, typ, doc, _ in FIELDS}
    if machine is None:
        return list(made.values())
    driver = machine.nvml.driver_version.get("")
    kube = device_owners is not None
    owners = device_owners or {}
    for g in machine.gpus:
        if g.state is not GpuState.OK:
            continue
        base = _base_labels(g, hostname, driver)
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
    return list(made.values())
