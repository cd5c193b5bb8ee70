"""`nvidia-smi -q`'s power readings: the GPU's, its memory's and its module's, limits, smoothing, workload
profiles. Each reading is its field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import (
    BOOL,
    FI_POWER_AVERAGE,
    FI_POWER_CURRENT_LIMIT,
    FI_POWER_DEFAULT_LIMIT,
    FI_POWER_INSTANT,
    FI_POWER_MAX_LIMIT,
    FI_POWER_MIN_LIMIT,
    FI_POWER_REQUESTED_LIMIT,
    FI_POWER_SMOOTHING_ENABLED,
    MILLIWATTS,
    POWER_SCOPE_MEMORY,
    POWER_SCOPE_MODULE,
    Codec,
    Spec,
)
from gpudiag.values import Reading, not_recorded


class PowerDetail(msgspec.Struct, frozen=True):
    management: Reading[bool]
    average_w: Reading[float]  # over the last second
    instant_w: Reading[float]
    requested_limit_w: Reading[float]  # what the administrator set (nvidia-smi's power.limit)
    default_limit_w: Reading[float]
    min_limit_w: Reading[float]
    max_limit_w: Reading[float]
    energy_mj: Reading[int]  # millijoules since the driver loaded
    # The memory's and the whole module's readings (field values of scope MEMORY and MODULE).
    memory_average_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    memory_instant_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_average_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_instant_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_current_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_requested_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_default_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_min_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    module_max_limit_w: Reading[float] = msgspec.field(default_factory=not_recorded)
    smoothing: Reading[bool] = msgspec.field(default_factory=not_recorded)  # power smoothing enabled
    # Workload power profiles (NVML_POWER_PROFILE_* ids) requested and enforced.
    profiles_requested: Reading[tuple[int, ...]] = msgspec.field(default_factory=not_recorded)
    profiles_enforced: Reading[tuple[int, ...]] = msgspec.field(default_factory=not_recorded)


PROFILES = Codec(  # a nvmlMask255_t as the profile ids it sets, and back
    lambda m: tuple(i for i in range(255) if int(m.mask[i // 32]) >> (i % 32) & 1),
    lambda ids: {"mask": [sum(1 << (i % 32) for i in ids if i // 32 == word) for word in range(8)]},
)


ROWS: tuple[Spec, ...] = (
    detail(
        "power.average_w",  # over the last second
        field=FI_POWER_AVERAGE,
        codec=MILLIWATTS,
        unit="W",
    ),
    detail(
        "power.instant_w",
        field=FI_POWER_INSTANT,
        codec=MILLIWATTS,
        unit="W",
    ),
    *(
        detail(
            f"power.{which}_limit_w",
            call="nvmlDeviceGetPowerManagementLimitConstraints",
            pick=index,
            codec=MILLIWATTS,
            unit="W",
        )
        for index, which in ((0, "min"), (1, "max"))
    ),
    detail(
        "power.management",
        call="nvmlDeviceGetPowerManagementMode",
        codec=BOOL,
    ),
    detail(
        "power.requested_limit_w",  # what the administrator set (nvidia-smi's power.limit)
        call="nvmlDeviceGetPowerManagementLimit",
        codec=MILLIWATTS,
        unit="W",
    ),
    detail(
        "power.default_limit_w",
        call="nvmlDeviceGetPowerManagementDefaultLimit",
        codec=MILLIWATTS,
        unit="W",
    ),
    detail(
        "power.energy_mj",  # millijoules since the driver loaded
        call="nvmlDeviceGetTotalEnergyConsumption",
        unit="J",
    ),
    *(
        detail(
            f"power.{scope_name}_{name}_w",
            field=field,
            scope=scope,
            codec=MILLIWATTS,
            unit="W",
        )
        for scope_name, scope, readings in (
            (
                "memory",
                POWER_SCOPE_MEMORY,
                (("average", FI_POWER_AVERAGE), ("instant", FI_POWER_INSTANT)),
            ),
            (
                "module",
                POWER_SCOPE_MODULE,
                (
                    ("average", FI_POWER_AVERAGE),
                    ("instant", FI_POWER_INSTANT),
                    ("current_limit", FI_POWER_CURRENT_LIMIT),
                    ("requested_limit", FI_POWER_REQUESTED_LIMIT),
                    ("default_limit", FI_POWER_DEFAULT_LIMIT),
                    ("min_limit", FI_POWER_MIN_LIMIT),
                    ("max_limit", FI_POWER_MAX_LIMIT),
                ),
            ),
        )
        for name, field in readings
    ),
    detail("power.smoothing", field=FI_POWER_SMOOTHING_ENABLED, codec=BOOL),
    *(
        detail(
            f"power.profiles_{which}",
            call="nvmlDeviceWorkloadPowerProfileGetCurrentProfiles",
            struct="c_nvmlWorkloadPowerProfileCurrentProfiles_v1_t",
            pick=f"{which}ProfilesMask",
            codec=PROFILES,
        )
        for which in ("requested", "enforced")
    ),
)
