"""nvidia-smi's ``--query-gpu`` vocabulary (driver 580): every name and alias it accepts, in its order,
with its unit and what it prints without a value. Pure data; :mod:`gpudiag.query.gpu_fields` reads it
once. Checked name by name against the H100's ``nvidia-smi --help-query-gpu``
(``tests/test_query_fields.py``).
"""

from __future__ import annotations

# nvidia-smi --help-query-gpu (driver 580), in its order: each name with its aliases and its [unit];
# "=TEXT" where nvidia-smi prints TEXT, not "[N/A]", without a value.
NVIDIA_SMI_FIELDS = """
timestamp
driver_version
vgpu_driver_capability.heterogenous_multivGPU
count
name gpu_name
serial gpu_serial
uuid gpu_uuid
pci.bus_id gpu_bus_id
pci.domain
pci.bus
pci.device
pci.baseClass
pci.subClass
pci.device_id
pci.sub_device_id
vgpu_device_capability.fractional_multiVgpu
vgpu_device_capability.heterogeneous_timeSlice_profile
vgpu_device_capability.heterogeneous_timeSlice_sizes
vgpu_device_capability.homogeneous_placements
vgpu_device_capability.mig_timeSlicing
vgpu_device_capability.mig_timeSlicing_mode
pcie.link.gen.current
pcie.link.gen.gpucurrent
pcie.link.gen.max
pcie.link.gen.gpumax
pcie.link.gen.hostmax
pcie.link.width.current
pcie.link.width.max
index
display_mode
display_attached
display_active
persistence_mode
addressing_mode
accounting.mode
accounting.buffer_size
driver_model.current
driver_model.pending
vbios_version
inforom.img inforom.image
inforom.oem
inforom.ecc
inforom.pwr inforom.power
inforom.checksum_validation
gpu_recovery_action
gom.current gpu_operation_mode.current
gom.pending gpu_operation_mode.pending
fan.speed [%]
pstate
clocks_event_reasons.supported clocks_throttle_reasons.supported
clocks_event_reasons.active clocks_throttle_reasons.active
clocks_event_reasons.gpu_idle clocks_throttle_reasons.gpu_idle
clocks_event_reasons.applications_clocks_setting clocks_throttle_reasons.applications_clocks_setting
clocks_event_reasons.sw_power_cap clocks_throttle_reasons.sw_power_cap
clocks_event_reasons.hw_slowdown clocks_throttle_reasons.hw_slowdown
clocks_event_reasons.hw_thermal_slowdown clocks_throttle_reasons.hw_thermal_slowdown
clocks_event_reasons.hw_power_brake_slowdown clocks_throttle_reasons.hw_power_brake_slowdown
clocks_event_reasons.sw_thermal_slowdown clocks_throttle_reasons.sw_thermal_slowdown
clocks_event_reasons.sync_boost clocks_throttle_reasons.sync_boost
clocks_event_reasons_counters.sw_power_cap [us]
clocks_event_reasons_counters.sync_boost [us]
clocks_event_reasons_counters.sw_thermal_slowdown [us]
clocks_event_reasons_counters.hw_thermal_slowdown [us]
clocks_event_reasons_counters.hw_power_brake_slowdown [us]
memory.total [MiB]
memory.reserved [MiB]
memory.used [MiB]
memory.free [MiB]
compute_mode
compute_cap
utilization.gpu [%]
utilization.memory [%]
utilization.encoder [%]
utilization.decoder [%]
utilization.jpeg [%]
utilization.ofa [%]
encoder.stats.sessionCount
encoder.stats.averageFps
encoder.stats.averageLatency
dramEncryption.mode.current
dramEncryption.mode.pending
ecc.mode.current
ecc.mode.pending
ecc.errors.corrected.volatile.device_memory
ecc.errors.corrected.volatile.dram
ecc.errors.corrected.volatile.register_file
ecc.errors.corrected.volatile.l1_cache
ecc.errors.corrected.volatile.l2_cache
ecc.errors.corrected.volatile.texture_memory
ecc.errors.corrected.volatile.cbu
ecc.errors.corrected.volatile.sram
ecc.errors.corrected.volatile.total
ecc.errors.corrected.aggregate.device_memory
ecc.errors.corrected.aggregate.dram
ecc.errors.corrected.aggregate.register_file
ecc.errors.corrected.aggregate.l1_cache
ecc.errors.corrected.aggregate.l2_cache
ecc.errors.corrected.aggregate.texture_memory
ecc.errors.corrected.aggregate.cbu
ecc.errors.corrected.aggregate.sram
ecc.errors.corrected.aggregate.total
ecc.errors.uncorrected.volatile.device_memory
ecc.errors.uncorrected.volatile.dram
ecc.errors.uncorrected.volatile.register_file
ecc.errors.uncorrected.volatile.l1_cache
ecc.errors.uncorrected.volatile.l2_cache
ecc.errors.uncorrected.volatile.texture_memory
ecc.errors.uncorrected.volatile.cbu
ecc.errors.uncorrected.volatile.sram
ecc.errors.uncorrected.volatile.total
ecc.errors.uncorrected.aggregate.device_memory
ecc.errors.uncorrected.aggregate.dram
ecc.errors.uncorrected.aggregate.register_file
ecc.errors.uncorrected.aggregate.l1_cache
ecc.errors.uncorrected.aggregate.l2_cache
ecc.errors.uncorrected.aggregate.texture_memory
ecc.errors.uncorrected.aggregate.cbu
ecc.errors.uncorrected.aggregate.sram
ecc.errors.uncorrected.aggregate.total
ecc.errors.uncorrected.volatile.sram.parity
ecc.errors.uncorrected.volatile.sram.secded
ecc.errors.uncorrected.aggregate.sram.parity
ecc.errors.uncorrected.aggregate.sram.secded
ecc.errors.uncorrected.aggregate.sram.thresholdExceeded
ecc.errors.uncorrected.aggregate.sram.l2
ecc.errors.uncorrected.aggregate.sram.sm
ecc.errors.uncorrected.aggregate.sram.mcu
ecc.errors.uncorrected.aggregate.sram.pcie
ecc.errors.uncorrected.aggregate.sram.other
retired_pages.single_bit_ecc.count retired_pages.sbe
retired_pages.double_bit.count retired_pages.dbe
retired_pages.pending
remapped_rows.correctable remapped_rows.sbe
remapped_rows.correctable_inactive
remapped_rows.uncorrectable remapped_rows.dbe
remapped_rows.uncorrectable_inactive
remapped_rows.pending
remapped_rows.failure
remapped_rows.histogram.max
remapped_rows.histogram.high
remapped_rows.histogram.partial
remapped_rows.histogram.low
remapped_rows.histogram.none
temperature.gpu
temperature.gpu.tlimit
temperature.memory
power.management
power.draw [W]
power.draw.average gpu.power.draw.average [W]
power.draw.instant gpu.power.draw.instant [W]
power.limit gpu.power.requested_limit [W]
enforced.power.limit gpu.power.current_limit [W]
power.default_limit gpu.power.default_limit [W]
power.min_limit gpu.power.min_limit [W]
power.max_limit gpu.power.max_limit [W]
module.power.draw.average
module.power.draw.instant
module.power.limit module.power.requested_limit
module.enforced.power.limit module.power.current_limit
module.power.default_limit
module.power.min_limit
module.power.max_limit
power_smoothing.delayed_power_smoothing_supported
power_smoothing.primary_power_floor
power_smoothing.secondary_power_floor
power_smoothing.min_primary_floor_activation_offset
power_smoothing.min_primary_floor_activation_point
power_smoothing.window_multiplier
power_smoothing.curr_profile.secondary_power_floor
power_smoothing.curr_profile.primary_floor_act_window_multiplier
power_smoothing.curr_profile.primary_floor_tar_window_multiplier
power_smoothing.curr_profile.primary_floor_act_offset
power_smoothing.admin_override.secondary_power_floor
power_smoothing.admin_override.primary_floor_act_window_multiplier
power_smoothing.admin_override.primary_floor_tar_window_multiplier
power_smoothing.admin_override.primary_floor_act_offset
clocks.current.graphics clocks.gr [MHz]
clocks.current.sm clocks.sm [MHz]
clocks.current.memory clocks.mem [MHz]
clocks.current.video clocks.video [MHz]
clocks.applications.graphics clocks.applications.gr [MHz]
clocks.applications.memory clocks.applications.mem [MHz]
clocks.default_applications.graphics clocks.default_applications.gr [MHz]
clocks.default_applications.memory clocks.default_applications.mem [MHz]
clocks.max.graphics clocks.max.gr [MHz]
clocks.max.sm [MHz]
clocks.max.memory clocks.max.mem [MHz]
mig.mode.current
mig.mode.pending
gsp.mode.current
gsp.mode.default
c2c.mode
protected_memory.total [MiB]
protected_memory.used [MiB]
protected_memory.free [MiB]
fabric.state =N/A
fabric.status =N/A
fabric.cliqueId =N/A
fabric.clusterUuid =N/A
fabric.health.summary =N/A
fabric.health.bandwidth =N/A
fabric.health.route_recovery_in_progress =N/A
fabric.health.route_unhealthy =N/A
fabric.health.access_timeout_recovery =N/A
fabric.health.incorrect_configuration =N/A
fabric.health.partition_assigned =N/A
platform.chassis_serial_number
platform.slot_number
platform.tray_index
platform.host_id
platform.peer_type
platform.module_id
platform.gpu_fabric_guid
hostname
"""
