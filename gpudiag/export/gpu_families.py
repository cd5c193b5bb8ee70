"""The exporter's per-GPU families: its table of the readings it writes, keyed by the reading.

Each family is a Prometheus family of ``gpudiag exporter`` (and ``memory --prometheus``,
``--textfile``), in the order they are written; each of its samples names the reading it comes
from (a ``gpudiag.readings.Spec`` key), the values of the family's own labels, the part of a struct
value, and the factor to the metric's base unit (joules, hertz, bytes, a ratio for a percentage).
``export.metrics_native`` writes them; a family with no samples here (identity, lost GPUs, the
watch's peak, MIG instances) is filled there. A reading that is N/A on a GPU yields no sample.
Pure data.
"""

from __future__ import annotations

from typing import NamedTuple

from gpudiag.readings import CLOCK_EVENTS, FI_PERF_POLICIES


class Sample(NamedTuple):
    """One series of a family per GPU: the reading at ``key`` (``part`` of its value), scaled."""

    key: str
    labels: tuple[str, ...] = ()  # the values of the family's own labels, after gpu and uuid
    part: str = ""  # an attribute of a struct value
    scale: float = 1.0  # multiplied into the metric's base unit
    per: int = 1  # or divided (utilization: percent / 100)
    bit: int = 0  # a bit mask's bit: 1 while it is set, else 0


class Family(NamedTuple):
    name: str
    help: str
    type: str  # "gauge" or "counter" (written with its _total)
    labels: tuple[str, ...] = ()  # its own labels, after gpu and uuid
    samples: tuple[Sample, ...] = ()


_PERCENT = 1e-2  # a percentage as a ratio

# What the exporter's code fills (not one reading each): their names, by their part in the table.
INFO = "gpudiag_gpu_info"
LOST = "gpudiag_gpu_lost"
PEAK = "gpudiag_gpu_memory_peak_used_bytes"
MIG_TOTAL = "gpudiag_mig_memory_total_bytes"
MIG_USED = "gpudiag_mig_memory_used_bytes"
MIG_LABELS = ("mig_uuid", "gpu_instance", "profile")

GPU_FAMILIES: tuple[Family, ...] = (
    Family(INFO, "GPU identity (value 1)", "gauge", ("name", "pci_bus_id", "driver_version")),
    Family(LOST, "1 when the GPU is lost (fallen off the bus) or cannot be opened", "gauge"),
    Family("gpudiag_gpu_memory_total_bytes", "GPU memory size", "gauge", (), (Sample("memory", part="total_bytes"),)),
    Family(
        "gpudiag_gpu_memory_used_bytes", "GPU memory in use (NVML)", "gauge", (), (Sample("memory", part="used_bytes"),)
    ),
    Family("gpudiag_gpu_memory_free_bytes", "GPU memory free", "gauge", (), (Sample("memory", part="free_bytes"),)),
    Family(
        "gpudiag_gpu_memory_reserved_bytes",
        "GPU memory the driver reserves",
        "gauge",
        (),
        (Sample("memory", part="reserved_bytes"),),
    ),
    Family(PEAK, "Most GPU memory in use since the watch began", "gauge"),  # labelled by gpu only
    Family(
        "gpudiag_gpu_utilization_ratio",
        "Share of time a kernel ran (NVML sample period)",
        "gauge",
        (),
        (Sample("utilization", part="gpu_percent", per=100),),
    ),
    Family(
        "gpudiag_gpu_memory_utilization_ratio",
        "Share of time device memory was read or written",
        "gauge",
        (),
        (Sample("utilization", part="memory_percent", per=100),),
    ),
    Family("gpudiag_gpu_power_watts", "Power draw", "gauge", (), (Sample("power_draw_w"),)),
    Family("gpudiag_gpu_power_limit_watts", "Enforced power limit", "gauge", (), (Sample("power_limit_w"),)),
    Family(
        "gpudiag_gpu_energy_joules",
        "Energy used since the driver loaded",
        "counter",
        (),
        (Sample("energy_mj", scale=1e-3),),
    ),
    Family("gpudiag_gpu_temperature_celsius", "GPU temperature", "gauge", (), (Sample("temperature_c"),)),
    Family(
        "gpudiag_gpu_slowdown_temperature_celsius",
        "Temperature at which the GPU slows down",
        "gauge",
        (),
        (Sample("temperature_slowdown_c"),),
    ),
    Family(
        "gpudiag_gpu_fan_ratio",
        "Fan speed, share of its maximum",
        "gauge",
        (),
        (Sample("fan_percent", scale=_PERCENT),),
    ),
    Family(
        "gpudiag_gpu_clock_hertz",
        "Current clock",
        "gauge",
        ("clock",),
        tuple(Sample(f"clock_{name}_mhz", (name,), scale=1e6) for name in ("sm", "memory", "graphics")),
    ),
    Family("gpudiag_gpu_performance_state", "Performance state (0 = P0, fastest)", "gauge", (), (Sample("pstate"),)),
    Family(
        "gpudiag_gpu_clock_event_active",
        "1 while this reason holds the clocks down (throttling)",
        "gauge",
        ("reason",),
        # Only the reasons that slow a busy GPU down: idle, application clocks, sync boost and display
        # are states, not slowdowns, and would add four series per GPU.
        tuple(Sample("clock_event_reasons", (e.name,), bit=e.bit) for e in CLOCK_EVENTS if e.slowdown),
    ),
    Family(
        "gpudiag_gpu_ecc_errors",
        "ECC errors",
        "counter",
        ("error", "counter"),
        tuple(
            Sample(f"ecc_errors.{counter}_{error}", (error, counter))
            for error, counter in (
                ("corrected", "volatile"),
                ("uncorrected", "volatile"),
                ("corrected", "aggregate"),
                ("uncorrected", "aggregate"),
            )
        ),
    ),
    Family(
        "gpudiag_gpu_retired_pages",
        "Retired memory pages",
        "gauge",
        ("cause",),
        (
            Sample("retired_pages", ("single_bit_ecc",), part="single_bit"),
            Sample("retired_pages", ("double_bit_ecc",), part="double_bit"),
        ),
    ),
    Family(
        "gpudiag_gpu_retired_pages_pending",
        "1 when a page retirement waits for a reset",
        "gauge",
        (),
        (Sample("retired_pages", part="pending"),),
    ),
    Family(
        "gpudiag_gpu_remapped_rows",
        "Memory rows remapped",
        "counter",
        ("error",),
        (
            Sample("remapped_rows", ("correctable",), part="correctable"),
            Sample("remapped_rows", ("uncorrectable",), part="uncorrectable"),
        ),
    ),
    Family(
        "gpudiag_gpu_row_remap_pending",
        "1 when a row remap waits for a reset",
        "gauge",
        (),
        (Sample("remapped_rows", part="pending"),),
    ),
    Family(
        "gpudiag_gpu_row_remap_failure",
        "1 when row remapping failed (no spare rows)",
        "gauge",
        (),
        (Sample("remapped_rows", part="failure"),),
    ),
    Family(
        "gpudiag_gpu_pcie_link_generation", "Current PCIe link generation", "gauge", (), (Sample("pcie.gen_current"),)
    ),
    Family(
        "gpudiag_gpu_pcie_link_max_generation",
        "Best PCIe generation of GPU and slot",
        "gauge",
        (),
        (Sample("pcie.gen_max"),),
    ),
    Family(
        "gpudiag_gpu_pcie_link_width", "Current PCIe link width (lanes)", "gauge", (), (Sample("pcie.width_current"),)
    ),
    Family(
        "gpudiag_gpu_pcie_link_max_width", "Widest PCIe link of GPU and slot", "gauge", (), (Sample("pcie.width_max"),)
    ),
    Family("gpudiag_gpu_pcie_replays", "PCIe link-level retries", "counter", (), (Sample("pcie_replays"),)),
    Family(
        "gpudiag_gpu_memory_temperature_celsius",
        "GPU memory (HBM) temperature",
        "gauge",
        (),
        (Sample("memory_temperature_c"),),
    ),
    Family(
        "gpudiag_gpu_encoder_utilization_ratio",
        "Share of time the video encoder was busy",
        "gauge",
        (),
        (Sample("encoder_percent", scale=_PERCENT),),
    ),
    Family(
        "gpudiag_gpu_decoder_utilization_ratio",
        "Share of time the video decoder was busy",
        "gauge",
        (),
        (Sample("decoder_percent", scale=_PERCENT),),
    ),
    Family(
        "gpudiag_gpu_clocks_held_seconds",
        "Time each performance policy held the clocks down since the driver loaded (DCGM's *_VIOLATION)",
        "counter",
        ("policy",),
        tuple(Sample(f"violations.{policy}_ns", (policy,), scale=1e-9) for policy, _ in FI_PERF_POLICIES),
    ),
    Family(
        "gpudiag_gpu_nvlink_data_bytes",
        "NVLink data sent (tx) and received (rx), all links",
        "counter",
        ("direction",),
        (Sample("nvlink_data_rx_kib", ("rx",), scale=1024), Sample("nvlink_data_tx_kib", ("tx",), scale=1024)),
    ),
    Family(
        "gpudiag_gpu_pcie_data_bytes",
        "PCIe data sent (tx) and received (rx): NVML's byte counters, which may wrap",
        "counter",
        ("direction",),
        (Sample("pcie_data_tx_bytes", ("tx",)), Sample("pcie_data_rx_bytes", ("rx",))),
    ),
    *(
        Family(
            f"gpudiag_gpu_{figure}_ratio",
            doc,
            "gauge",
            (),
            (Sample("profiling", part=f"{figure}_percent", scale=_PERCENT),),
        )
        for figure, doc in (
            ("graphics_active", "Share of time a graphics or compute engine was busy (GPM)"),
            ("sm_active", "Share of SM cycles with at least one warp (GPM)"),
            ("sm_occupancy", "Warps resident on the SMs against their maximum (GPM)"),
            ("dram_active", "Device memory bandwidth used against its peak (GPM)"),
        )
    ),
    Family(
        "gpudiag_gpu_pipe_active_ratio",
        "Share of SM cycles a pipe was busy (GPM)",
        "gauge",
        ("pipe",),
        tuple(
            Sample("profiling", (pipe,), part=f"{pipe}_active_percent", scale=_PERCENT)
            for pipe in ("tensor", "fp64", "fp32", "fp16")
        ),
    ),
    Family(
        "gpudiag_gpu_link_throughput_bytes_per_second",
        "PCIe and NVLink traffic over the last window (GPM), bytes per second",
        "gauge",
        ("link", "direction"),
        tuple(
            Sample("profiling", (link, direction), part=f"{link}_{direction}_bytes_per_s")
            for link, direction in (("pcie", "tx"), ("pcie", "rx"), ("nvlink", "tx"), ("nvlink", "rx"))
        ),
    ),
    Family(MIG_TOTAL, "MIG instance memory size", "gauge", MIG_LABELS),
    Family(MIG_USED, "MIG instance memory in use", "gauge", MIG_LABELS),
)
