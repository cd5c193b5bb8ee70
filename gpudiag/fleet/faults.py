"""Faults that a drain reason must name because draining alone does not clear them."""

from __future__ import annotations

# The checks whose failure the remedy is about.
REMEDY_CHECKS = ("health.recovery_action", "health.row_remap")

# NVML_GPU_RECOVERY_ACTION_*: 1 GPU reset, 2 node reboot, 3 drain peer-to-peer, 4 drain and reset.
_ACTIONS = {1: "GPU reset needed", 2: "node reboot needed", 3: "drain P2P", 4: "GPU reset needed"}


def remedy(recovery_actions: list[int | None], remap_pending: list[bool | None]) -> str:
    """What else a fix needs ("GPU reset needed", "node reboot needed"; "" for nothing), from NVML's
    recovery action and pending row remaps."""
    needs = {_ACTIONS.get(a, f"recovery action {a}") for a in recovery_actions if a}
    if any(remap_pending):
        needs.add("GPU reset needed")
    if "node reboot needed" in needs:  # a reboot resets every GPU too
        needs.discard("GPU reset needed")
    return ", ".join(sorted(needs))
