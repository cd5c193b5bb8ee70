"""`gpudiag visible --json` (`gpudiag.visible/1`): no rich here, so that it runs without it
(cli.plain_front); render.visible_view draws the text."""

from __future__ import annotations

from typing import Any

from gpudiag.visibility import ProbeReport, Resolution

SCHEMA = "gpudiag.visible/1"


def probe_json(probe: ProbeReport | None) -> dict[str, Any] | None:
    if probe is None:
        return None
    return {
        "status": probe.status,
        "summary": probe.summary,
        "disagreements": list(probe.disagreements),
        "notes": list(probe.notes),
        "torch_count_before_init": probe.torch_count_before_init,
        "sources": [
            {
                "name": s.name,
                "label": s.label,
                "answered": s.devices is not None,
                "detail": s.detail,
                "devices": None
                if s.devices is None
                else [
                    {
                        "cuda_ordinal": d.ordinal,
                        "name": d.name,
                        "uuid": d.uuid,
                        "pci_bus_id": d.pci_bus_id,
                        "memory_total_bytes": d.memory_total_bytes,
                    }
                    for d in s.devices
                ],
            }
            for s in probe.sources
        ],
    }


def to_json(
    resolution: Resolution,
    origin: str,
    hints: tuple[str, ...],
    probe: ProbeReport | None,
    select: dict[str, Any] | None = None,
) -> dict[str, Any]:
    pytorch = resolution.pytorch
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "origin": origin,
        "cuda_visible_devices": resolution.value,
        "cuda_device_order": resolution.order,
        "cuda_device_order_value": resolution.order_value,
        "order_is_heuristic": resolution.order_is_heuristic,
        "devices": [
            {
                "cuda_ordinal": d.ordinal,
                "nvml_index": d.gpu_index,
                "mig_index": d.mig.index if d.mig is not None else None,
                "uuid": d.uuid,
                "pci_bus_id": d.pci_bus_id,
                "name": d.name,
                "memory_total_bytes": d.memory_total_bytes,
                "parent_uuid": d.parent_uuid,
                "gpu_instance_id": d.mig.gpu_instance_id.value if d.mig is not None else None,
                "compute_instance_id": d.mig.compute_instance_id.value if d.mig is not None else None,
                "compute_mode": d.compute_mode or None,
            }
            for d in resolution.devices
        ],
        "entries": [
            {
                "position": e.position,
                "token": e.token,
                "outcome": e.outcome.value,
                "reason": e.reason,
                "kind": e.kind,
                "nvml_index": e.gpu_index,
                "mig_index": e.mig_index,
                "documented": e.documented,
            }
            for e in resolution.entries
        ],
        "warnings": list(resolution.warnings),
        "undocumented": list(resolution.undocumented),
        "pytorch": None
        if pytorch is None
        else {
            "device_count_before_init": pytorch.count_before_init,
            "error": pytorch.error or None,
            "asks_cuda_runtime": pytorch.asks_cuda,
            "nvml_index_by_cuda_ordinal": [
                {"cuda_ordinal": i.ordinal, "nvml_index": i.nvml_index, "error": i.error or None}
                for i in pytorch.nvml_indices
            ],
            "divergences": list(pytorch.divergences),
        },
        "narrowed_by": [{"variable": n, "value": v, "meaning": m} for n, v, m in resolution.narrowing],
        "hints": list(hints),
        "probe": probe_json(probe),
    }
    if select is not None:
        data["select"] = select
    return data
