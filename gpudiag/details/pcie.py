"""`nvidia-smi -q`'s PCIe beyond the link: throughput, replays, atomics, bridge chips. Each reading is its
field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import FI_PCIE_ATOMICS_INBOUND, FI_PCIE_ATOMICS_OUTBOUND, FI_PCIE_REPLAY_ROLLOVER, Codec, Spec
from gpudiag.values import Reading, not_recorded


class PcieDetail(msgspec.Struct, frozen=True):
    tx_kbps: Reading[int]  # KB/s over the last 20 ms, as NVML samples it
    rx_kbps: Reading[int]
    replay_counter: Reading[int]
    replay_rollovers: Reading[int] = msgspec.field(default_factory=not_recorded)
    atomic_caps_outbound: Reading[int] = msgspec.field(default_factory=not_recorded)  # NVML_PCIE_ATOMICS_CAP_*
    atomic_caps_inbound: Reading[int] = msgspec.field(default_factory=not_recorded)
    # Bridge chips between the host and the GPU, as (type, firmware version).
    bridge_chips: Reading[tuple[tuple[str, int], ...]] = msgspec.field(default_factory=not_recorded)


BRIDGE_TYPES = {0: "PLX", 1: "BR04"}  # nvmlBridgeChipType_t


BRIDGES = Codec(
    lambda h: tuple(
        (BRIDGE_TYPES.get(int(c.type), str(int(c.type))), int(c.fwVersion))
        for c in list(h.bridgeChipInfo)[: int(h.bridgeCount)]
    ),
    lambda chips: {
        "bridgeCount": len(chips),
        "bridgeChipInfo": [
            {"type": next((k for k, v in BRIDGE_TYPES.items() if v == kind), 0), "fwVersion": fw} for kind, fw in chips
        ],
    },
)


ROWS: tuple[Spec, ...] = (
    *(
        detail(
            f"pcie.{direction}_kbps",  # KB/s over the last 20 ms, as NVML samples it
            call="nvmlDeviceGetPcieThroughput",
            args=(f"NVML_PCIE_UTIL_{direction.upper()}_BYTES",),
            unit="KB/s",
        )
        for direction in ("tx", "rx")
    ),
    detail(
        "pcie.replay_counter",
        call="nvmlDeviceGetPcieReplayCounter",
    ),
    detail(
        "pcie.replay_rollovers",
        field=FI_PCIE_REPLAY_ROLLOVER,
    ),
    *(
        detail(
            f"pcie.atomic_caps_{direction}",
            field=field,
        )
        for direction, field in (("outbound", FI_PCIE_ATOMICS_OUTBOUND), ("inbound", FI_PCIE_ATOMICS_INBOUND))
    ),
    detail(
        "pcie.bridge_chips",
        call="nvmlDeviceGetBridgeChipInfo",
        codec=BRIDGES,
    ),
)
