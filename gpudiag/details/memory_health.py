"""`nvidia-smi -q`'s memory health: ECC errors by location, row remapping, SRAM errors, retired pages, repairs,
DRAM encryption. Each reading is its field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import BOOL, FI_REMAPPED_COR_INACTIVE, FI_REMAPPED_UNC_INACTIVE, Codec, Spec
from gpudiag.values import Reading, not_recorded

ECC_LOCATIONS = (
    ("l1_cache", 0),
    ("l2_cache", 1),
    ("device_memory", 2),  # also nvidia-smi's "dram": the same NVML location
    ("register_file", 3),
    ("texture_memory", 4),
    ("texture_shm", 5),
    ("cbu", 6),
    ("sram", 7),
)


class EccLocation(msgspec.Struct, frozen=True):
    location: str  # one of ECC_LOCATIONS
    volatile_corrected: Reading[int]
    volatile_uncorrected: Reading[int]
    aggregate_corrected: Reading[int]
    aggregate_uncorrected: Reading[int]


class RowRemapHistogram(msgspec.Struct, frozen=True):
    """Banks by how many spare rows they have left (nvmlRowRemapperHistogramValues_t)."""

    max: int
    high: int
    partial: int
    low: int
    none: int


class SramErrors(msgspec.Struct, frozen=True):
    """SRAM ECC errors by kind and, for aggregate uncorrectable ones, by unit (Hopper and later)."""

    volatile_corrected: int
    volatile_uncorrected_parity: int
    volatile_uncorrected_secded: int
    aggregate_corrected: int
    aggregate_uncorrected_parity: int
    aggregate_uncorrected_secded: int
    aggregate_l2: int
    aggregate_sm: int
    aggregate_mcu: int  # microcontroller
    aggregate_pcie: int
    aggregate_other: int
    threshold_exceeded: bool  # enough uncorrectable SRAM errors that the GPU should be serviced


class MemoryHealth(msgspec.Struct, frozen=True):
    ecc_by_location: tuple[EccLocation, ...]
    row_remap_histogram: Reading[RowRemapHistogram]
    sram: Reading[SramErrors]
    # Rows remapped in an earlier boot whose remapping no longer applies (nvidia-smi's *_inactive).
    remapped_inactive_correctable: Reading[int]
    remapped_inactive_uncorrectable: Reading[int]
    retired_single_bit_addresses: Reading[tuple[int, ...]]
    retired_double_bit_addresses: Reading[tuple[int, ...]]
    channel_repair_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)
    tpc_repair_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)
    unrepairable_memory: Reading[bool] = msgspec.field(default_factory=not_recorded)
    dram_encryption_current: Reading[bool] = msgspec.field(default_factory=not_recorded)
    dram_encryption_pending: Reading[bool] = msgspec.field(default_factory=not_recorded)


ROW_REMAP_HISTOGRAM = Codec(
    lambda r: RowRemapHistogram(int(r.max), int(r.high), int(r.partial), int(r.low), int(r.none)),
    lambda h: {"max": h.max, "high": h.high, "partial": h.partial, "low": h.low, "none": h.none},
)


ADDRESSES = Codec(lambda pages: tuple(int(page) for page in pages), list)


ROWS: tuple[Spec, ...] = (
    detail(
        "memory_health.remapped_inactive_correctable",
        field=FI_REMAPPED_COR_INACTIVE,
    ),
    detail(
        "memory_health.remapped_inactive_uncorrectable",
        field=FI_REMAPPED_UNC_INACTIVE,
    ),
    detail(
        "memory_health.ecc_by_location",  # 4 counters at each of ECC_LOCATIONS
        call="nvmlDeviceGetMemoryErrorCounter",
        custom=True,
    ),
    detail(
        "memory_health.sram",  # a struct by reference
        call="nvmlDeviceGetSramEccErrorStatus",
        custom=True,
    ),
    detail(
        "memory_health.row_remap_histogram",
        call="nvmlDeviceGetRowRemapperHistogram",
        codec=ROW_REMAP_HISTOGRAM,
    ),
    *(
        detail(
            f"memory_health.retired_{kind}_addresses",
            call="nvmlDeviceGetRetiredPages",
            args=(f"NVML_PAGE_RETIREMENT_CAUSE_{cause}",),
            codec=ADDRESSES,
        )
        for kind, cause in (("single_bit", "MULTIPLE_SINGLE_BIT_ECC_ERRORS"), ("double_bit", "DOUBLE_BIT_ECC_ERROR"))
    ),
    *(
        detail(
            f"memory_health.dram_encryption_{which}",
            call="nvmlDeviceGetDramEncryptionMode",
            pick=index,
            codec=BOOL,
        )
        for index, which in ((0, "current"), (1, "pending"))
    ),
    *(
        detail(
            f"memory_health.{name}_repair_pending",
            call="nvmlDeviceGetRepairStatus",
            pick=index,
            codec=BOOL,
        )
        for index, name in ((0, "channel"), (1, "tpc"))
    ),
    detail(
        "memory_health.unrepairable_memory",
        call="nvmlDeviceGetUnrepairableMemoryFlag_v1",
        codec=BOOL,
    ),
)
