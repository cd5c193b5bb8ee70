"""`nvidia-smi -q`'s clocks: current, max, application and default clocks, boost, the clock-event reasons and
their counters, the supported clocks. Each reading is its field here and its row in :data:`ROWS`.
"""

from __future__ import annotations

import msgspec

from gpudiag.details.row import detail
from gpudiag.spec import BOOL, CLOCK_EVENTS, NS_AS_US, Spec
from gpudiag.values import Reading, not_recorded


class ClockSet(msgspec.Struct, frozen=True):
    """One kind of clock (current, max, application, default application) in MHz."""

    graphics: Reading[int]
    sm: Reading[int]
    memory: Reading[int]
    video: Reading[int]


class Clocks(msgspec.Struct, frozen=True):
    current: ClockSet
    max: ClockSet
    applications: ClockSet
    default_applications: ClockSet
    event_reasons_supported: Reading[int]  # NVML bitmask of the reasons this GPU reports
    # Time (µs) spent in each clock-event reason since the driver loaded, by nvidia-smi's name.
    event_reason_counters_us: tuple[tuple[str, Reading[int]], ...]
    max_customer_boost_graphics: Reading[int] = msgspec.field(default_factory=not_recorded)  # MHz
    auto_boost: Reading[bool] = msgspec.field(default_factory=not_recorded)
    auto_boost_default: Reading[bool] = msgspec.field(default_factory=not_recorded)
    # Each supported memory clock (MHz) with the graphics clocks (MHz) it allows, fastest first.
    supported: Reading[tuple[tuple[int, tuple[int, ...]], ...]] = msgspec.field(default_factory=not_recorded)


def _clock_rows(kind: str, call: str) -> list[Spec]:
    return [
        detail(
            f"clocks.{kind}.{clock}",
            call=call,
            args=(f"NVML_CLOCK_{nvml}",),
            unit="MHz",
        )
        for clock, nvml in (("graphics", "GRAPHICS"), ("sm", "SM"), ("memory", "MEM"), ("video", "VIDEO"))
    ]


ROWS: tuple[Spec, ...] = (
    *(
        detail(
            f"clocks.event_reason_counters_us[{event.query}]",
            field=event.counter_field,
            value_type=3,
            codec=NS_AS_US,
            unit="us",
        )
        for event in CLOCK_EVENTS
        if event.counter_field
    ),
    detail(
        "clocks.event_reasons_supported",
        call="nvmlDeviceGetSupportedClocksEventReasons",
        fallback="nvmlDeviceGetSupportedClocksThrottleReasons",  # drivers before R535
    ),
    *_clock_rows("current", "nvmlDeviceGetClockInfo"),
    *_clock_rows("max", "nvmlDeviceGetMaxClockInfo"),
    *_clock_rows("applications", "nvmlDeviceGetApplicationsClock"),
    *_clock_rows("default_applications", "nvmlDeviceGetDefaultApplicationsClock"),
    detail(
        "clocks.max_customer_boost_graphics",
        call="nvmlDeviceGetMaxCustomerBoostClock",
        args=("NVML_CLOCK_GRAPHICS",),
        unit="MHz",
    ),
    *(
        detail(
            f"clocks.auto_boost{suffix}",
            call="nvmlDeviceGetAutoBoostedClocksEnabled",
            pick=index,
            codec=BOOL,
        )
        for index, suffix in ((0, ""), (1, "_default"))
    ),
    detail("clocks.supported", call="nvmlDeviceGetSupportedMemoryClocks", custom=True),  # with each's graphics clocks
)
