"""`nvidia-smi -q`'s temperatures: the memory's, the limits and margins, the target. Each reading is its field
here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import (
    FI_MEMORY_TEMP,
    FI_TEMPERATURE_GPU_MAX_TLIMIT,
    FI_TEMPERATURE_MEM_MAX_TLIMIT,
    FI_TEMPERATURE_SHUTDOWN_TLIMIT,
    FI_TEMPERATURE_SLOWDOWN_TLIMIT,
    Spec,
)
from gpudiag.values import Reading, not_recorded


class Temperatures(msgspec.Struct, frozen=True):
    memory_c: Reading[int]
    margin_c: Reading[int]  # degrees below the slowdown limit (nvidia-smi's temperature.gpu.tlimit)
    gpu_max_c: Reading[int]  # the most the GPU is designed to run at
    memory_max_c: Reading[int]
    # Each limit as degrees from the T.Limit (driver 580's -q: negative beyond it, 0 at it).
    shutdown_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    slowdown_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    gpu_max_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    memory_max_tlimit_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    target_c: Reading[int] = msgspec.field(default_factory=not_recorded)  # the GPU target temperature set
    target_min_c: Reading[int] = msgspec.field(default_factory=not_recorded)
    target_max_c: Reading[int] = msgspec.field(default_factory=not_recorded)


ROWS: tuple[Spec, ...] = (
    detail(
        "temperatures.memory_c",
        field=FI_MEMORY_TEMP,
        unit="C",
    ),
    detail(
        "temperatures.margin_c",
        call="nvmlDeviceGetMarginTemperature",
        unit="C",
    ),
    detail(
        "temperatures.gpu_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_GPU_MAX",),
        unit="C",
    ),
    detail(
        "temperatures.memory_max_c",
        call="nvmlDeviceGetTemperatureThreshold",
        args=("NVML_TEMPERATURE_THRESHOLD_MEM_MAX",),
        unit="C",
    ),
    *(
        detail(
            f"temperatures.{name}_tlimit_c",  # signed: degrees beyond (negative) or below the T.Limit
            field=field,
            value_type=5,
            unit="C",
        )
        for name, field in (
            ("shutdown", FI_TEMPERATURE_SHUTDOWN_TLIMIT),
            ("slowdown", FI_TEMPERATURE_SLOWDOWN_TLIMIT),
            ("gpu_max", FI_TEMPERATURE_GPU_MAX_TLIMIT),
            ("memory_max", FI_TEMPERATURE_MEM_MAX_TLIMIT),
        )
    ),
    *(
        detail(
            f"temperatures.{name}",  # the target set with nvidia-smi -gtt, and the range it takes
            call="nvmlDeviceGetTemperatureThreshold",
            args=(f"NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_{threshold}",),
            unit="C",
        )
        for name, threshold in (("target_c", "CURR"), ("target_min_c", "MIN"), ("target_max_c", "MAX"))
    ),
)
