"""The ``-q`` layout and the readings' lines in it: the details view's tables (``render.details_view``
renders them, ``render.details_xml`` writes the same lines under their ``-q -x`` elements). Pure data.
"""

from __future__ import annotations

# The lines of a GPU in `-q`, in nvidia-smi's order and words (driver 580), each with its `-q -x`
# element after ``@``. A line is a reading's (the one whose Q_LINES entry names its path): it shows
# when the GPU's details are recorded or the reading is not one of them; a heading shows when a line
# under it does. ``!REASON``: a line NVML has no call for (N/A, and why). ``%xml``: only in -q -x;
# ``%display``: in the text only when --display names its section. {name}: lines built by the details
# view (composite readings); [details] ... [/details]: only when details are recorded; [text] ...
# [/text]: not in -q -x.
SKELETON = """
Product Name @product_name
Product Brand @product_brand
Product Architecture @product_architecture
Display Mode @display_mode
Display Attached @display_attached
Display Active @display_active
Persistence Mode @persistence_mode
Addressing Mode @addressing_mode
MIG Mode @mig_mode
    Current @current_mig
    Pending @pending_mig
{mig_devices}
Accounting Mode @accounting_mode
Accounting Mode Buffer Size @accounting_mode_buffer_size
Driver Model @driver_model
    Current @current_dm
    Pending @pending_dm
Serial Number @serial
GPU UUID @uuid
GPU PDI @pdi
Minor Number @minor_number
VBIOS Version @vbios_version
MultiGPU Board @multigpu_board
Board ID @board_id
Board Part Number @board_part_number
[details]
GPU Part Number @gpu_part_number !NVML has no call for it
FRU Part Number @gpu_fru_part_number !NVML has no call for it
[/details]
Platform Info @platformInfo
    Chassis Serial Number @chassis_serial_number
    Slot Number @slot_number
    Tray Index @tray_index
    Host ID @host_id
    Peer Type @peer_type
    Module Id @module_id
    GPU Fabric GUID @gpu_fabric_guid
Inforom Version @inforom_version
    Image Version @img_version
    OEM Object @oem_object
    ECC Object @ecc_object
    Power Management Object @pwr_object
Inforom BBX Object Flush @inforom_bbx_flush
    Latest Timestamp @latest_timestamp
    Latest Duration @latest_duration
GPU Operation Mode @gpu_operation_mode
    Current @current_gom
    Pending @pending_gom
GPU C2C Mode @c2c_mode
GPU Virtualization Mode @gpu_virtualization_mode
    Virtualization Mode @virtualization_mode
    Host VGPU Mode @host_vgpu_mode
    vGPU Heterogeneous Mode @vgpu_heterogeneous_mode
GPU Recovery Action @gpu_recovery_action
GSP Firmware Version @gsp_firmware_version
[details]
IBMNPU @ibmnpu
    Relaxed Ordering Mode @relaxed_ordering_mode !NVML has no call for it
[/details]
PCI @pci
    Bus @pci_bus
    Device @pci_device
    Domain @pci_domain
    Base Classcode @pci_base_class
    Sub Classcode @pci_sub_class
    Device Id @pci_device_id
    Bus Id @pci_bus_id
    Sub System Id @pci_sub_system_id
    GPU Link Info @pci_gpu_link_info
        PCIe Generation @pcie_gen
            Max @max_link_gen
            Current @current_link_gen
            Device Current @device_current_link_gen
            Device Max @max_device_link_gen
[details]
            Host Max @max_host_link_gen !NVML has no call for the host's maximum
[/details]
        Link Width @link_widths
            Max @max_link_width
            Current @current_link_width
    Bridge Chip @pci_bridge_chip
        Type @bridge_chip_type
        Firmware @bridge_chip_fw
    Replays Since Reset @replay_counter
    Replay Number Rollovers @replay_rollover_counter
    Tx Throughput @tx_util
    Rx Throughput @rx_util
    Atomic Caps Outbound @atomic_caps_outbound
    Atomic Caps Inbound @atomic_caps_inbound
Fan Speed @fan_speed
Performance State @performance_state
{clock_events}
Clocks Event Reasons Counters @clocks_event_reasons_counters
    SW Power Capping @clocks_event_reasons_counters_sw_power_cap
    Sync Boost @clocks_event_reasons_counters_sync_boost
    SW Thermal Slowdown @clocks_event_reasons_counters_sw_therm_slowdown
    HW Thermal Slowdown @clocks_event_reasons_counters_hw_therm_slowdown
    HW Power Braking @clocks_event_reasons_counters_hw_power_brake
[details]
Sparse Operation Mode @sparse_operation_mode !NVML has no call for it
[/details]
{memory}
Compute Mode @compute_mode
Utilization @utilization
    GPU @gpu_util
    Memory @memory_util
    Encoder @encoder_util
    Decoder @decoder_util
    JPEG @jpeg_util
    OFA @ofa_util
Encoder Stats @encoder_stats
    Active Sessions @session_count
    Average FPS @average_fps
    Average Latency @average_latency
FBC Stats @fbc_stats
    Active Sessions @session_count
    Average FPS @average_fps
    Average Latency @average_latency
DRAM Encryption Mode @dram_encryption_mode
    Current @current_dram_encryption
    Pending @pending_dram_encryption
ECC Mode @ecc_mode
    Current @current_ecc
    Pending @pending_ecc
ECC Errors @ecc_errors
    {ecc_counts}
    Channel Repair Pending @channel_repair_pending
    TPC Repair Pending @tpc_repair_pending
    Unrepairable Memory @unrepairable_memory
{retired_pages}
{remapped_rows}
Temperature @temperature
    GPU Current Temp @gpu_temp
    GPU T.Limit Temp @gpu_temp_tlimit
    GPU Shutdown T.Limit Temp @gpu_temp_max_tlimit_threshold
    GPU Slowdown T.Limit Temp @gpu_temp_slow_tlimit_threshold
    GPU Max Operating T.Limit Temp @gpu_temp_max_gpu_tlimit_threshold
    GPU Target Temperature @gpu_target_temperature
    Memory Current Temp @memory_temp
    Memory Max Operating T.Limit Temp @gpu_temp_max_mem_tlimit_threshold
Supported GPU Target Temp @supported_gpu_target_temp %display
    GPU Target Temp Min @gpu_target_temp_min
    GPU Target Temp Max @gpu_target_temp_max
[details]
[text]
Voltage %display
    Graphics !NVML has no call for it
[/text]
[/details]
GPU Power Readings @gpu_power_readings
    Power State @power_state %xml
    Average Power Draw @average_power_draw
    Instantaneous Power Draw @instant_power_draw
    Current Power Limit @current_power_limit
    Requested Power Limit @requested_power_limit
    Default Power Limit @default_power_limit
    Min Power Limit @min_power_limit
    Max Power Limit @max_power_limit
GPU Memory Power Readings @gpu_memory_power_readings
    Average Power Draw @average_power_draw
    Instantaneous Power Draw @instant_power_draw
Module Power Readings @module_power_readings
    Power State @power_state %xml
    Average Power Draw @average_power_draw
    Instantaneous Power Draw @instant_power_draw
    Current Power Limit @current_power_limit
    Requested Power Limit @requested_power_limit
    Default Power Limit @default_power_limit
    Min Power Limit @min_power_limit
    Max Power Limit @max_power_limit
Power Smoothing @power_smoothing
Workload Power Profiles @power_profiles
    Requested Profiles @power_profile_requested_profiles
    Enforced Profiles @power_profile_enforced_profiles
Clocks @clocks
    Graphics @graphics_clock
    SM @sm_clock
    Memory @mem_clock
    Video @video_clock
Applications Clocks @applications_clocks
    Graphics @graphics_clock
    Memory @mem_clock
Default Applications Clocks @default_applications_clocks
    Graphics @graphics_clock
    Memory @mem_clock
[details]
Deferred Clocks @deferred_clocks
    Memory @mem_clock !NVML has no call for it
[/details]
Max Clocks @max_clocks
    Graphics @graphics_clock
    SM @sm_clock
    Memory @mem_clock
    Video @video_clock
Max Customer Boost Clocks @max_customer_boost_clocks
    Graphics @graphics_clock
Clock Policy @clock_policy
    Auto Boost @auto_boost
    Auto Boost Default @auto_boost_default
Fabric @fabric
    State @state
    Status @status
    CliqueId @cliqueId
    ClusterUUID @clusterUuid
    Health @health
        Summary @summary
        Bandwidth @bandwidth
        Route Recovery in progress @route_recovery_in_progress
        Route Unhealthy @route_unhealthy
        Access Timeout Recovery @access_timeout_recovery
        Incorrect Configuration @incorrect_configuration
        Partition Assigned @partition_assigned
{supported_clocks}
{processes}
Capabilities @capabilities
    EGM @egm
[text]
gpudiag
    {index}
    {details}
    Inforom Checksum Validation
    GSP Firmware Mode
        Current
        Default
    Power Management
    Power Draw
    Total Energy Consumption
    GPU Shutdown Temp
    GPU Slowdown Temp
    GPU Max Operating Temp
    Memory Max Operating Temp
    {process_load}
    {nvlink}
    {topology}
[/text]
"""

# Each reading's -q line(s), keyed by its row (``gpudiag.readings.Spec.key``): ``PATH[:PART][=FORMAT]``,
# the line's path under the GPU in SKELETON ("PCI/GPU Link Info/Link Width/Max"), the part of a struct
# value shown (an attribute, or an index), and how a value is written (``render.format.VALUE_FORMATS``;
# none: as it is), followed by the row's unit. A reading that nvidia-smi -q prints needs only its entry
# here: SKELETON holds nvidia-smi's lines no reading fills yet.
Q_LINES: dict[str, tuple[str, ...]] = {
    "uuid": ("GPU UUID",),
    "pci_bus_id": ("PCI/Bus Id",),
    "name": ("Product Name",),
    "minor_number": ("Minor Number",),
    "utilization": (
        "Utilization/GPU:gpu_percent",
        "Utilization/Memory:memory_percent",
    ),
    "temperature_c": ("Temperature/GPU Current Temp",),
    "temperature_slowdown_c": ("gpudiag/GPU Slowdown Temp",),  # driver 580's -q shows it from the T.Limit (details)
    "temperature_shutdown_c": ("gpudiag/GPU Shutdown Temp",),
    "fan_percent": ("Fan Speed",),
    "power_draw_w": ("gpudiag/Power Draw=2f",),  # driver 580's -q shows the 1 s average and the instant reading only
    "power_limit_w": ("GPU Power Readings/Current Power Limit=2f",),
    "pstate": (
        "Performance State=pstate",
        "GPU Power Readings/Power State=pstate",
        "Module Power Readings/Power State=pstate",
    ),
    "persistence_mode": ("Persistence Mode=enabled",),
    "compute_mode": ("Compute Mode=value",),
    "pcie.gen_current": (
        "PCI/GPU Link Info/PCIe Generation/Current",
        "PCI/GPU Link Info/PCIe Generation/Device Current",
    ),
    "pcie.gen_max": ("PCI/GPU Link Info/PCIe Generation/Max",),
    "pcie.gen_gpu_max": ("PCI/GPU Link Info/PCIe Generation/Device Max",),
    "pcie.width_current": ("PCI/GPU Link Info/Link Width/Current=times",),
    "pcie.width_max": ("PCI/GPU Link Info/Link Width/Max=times",),
    "ecc_mode_current": ("ECC Mode/Current=enabled",),
    "ecc_mode_pending": ("ECC Mode/Pending=enabled",),
    "inforom_valid": ("gpudiag/Inforom Checksum Validation=VALID",),  # --query-gpu's, not in -q
    "recovery_action": ("GPU Recovery Action=recovery_q",),
    "mig_mode_current": ("MIG Mode/Current=enabled",),
    "mig_mode_pending": ("MIG Mode/Pending=enabled",),
    "details.temperatures.memory_c": ("Temperature/Memory Current Temp",),
    "details.power.average_w": ("GPU Power Readings/Average Power Draw=2f",),
    "details.power.instant_w": ("GPU Power Readings/Instantaneous Power Draw=2f",),
    "details.clocks.event_reason_counters_us[sw_power_cap]": ("Clocks Event Reasons Counters/SW Power Capping",),
    "details.clocks.event_reason_counters_us[sync_boost]": ("Clocks Event Reasons Counters/Sync Boost",),
    "details.clocks.event_reason_counters_us[sw_thermal_slowdown]": (
        "Clocks Event Reasons Counters/SW Thermal Slowdown",
    ),
    "details.clocks.event_reason_counters_us[hw_thermal_slowdown]": (
        "Clocks Event Reasons Counters/HW Thermal Slowdown",
    ),
    "details.clocks.event_reason_counters_us[hw_power_brake_slowdown]": (
        "Clocks Event Reasons Counters/HW Power Braking",
    ),
    "details.clocks.current.graphics": ("Clocks/Graphics",),
    "details.clocks.current.sm": ("Clocks/SM",),
    "details.clocks.current.memory": ("Clocks/Memory",),
    "details.clocks.current.video": ("Clocks/Video",),
    "details.clocks.max.graphics": ("Max Clocks/Graphics",),
    "details.clocks.max.sm": ("Max Clocks/SM",),
    "details.clocks.max.memory": ("Max Clocks/Memory",),
    "details.clocks.max.video": ("Max Clocks/Video",),
    "details.clocks.applications.graphics": ("Applications Clocks/Graphics",),
    "details.clocks.applications.memory": ("Applications Clocks/Memory",),
    "details.clocks.default_applications.graphics": ("Default Applications Clocks/Graphics",),
    "details.clocks.default_applications.memory": ("Default Applications Clocks/Memory",),
    "details.power.min_limit_w": ("GPU Power Readings/Min Power Limit=2f",),
    "details.power.max_limit_w": ("GPU Power Readings/Max Power Limit=2f",),
    "details.power.management": ("gpudiag/Power Management=enabled",),
    "details.power.requested_limit_w": ("GPU Power Readings/Requested Power Limit=2f",),
    "details.power.default_limit_w": ("GPU Power Readings/Default Power Limit=2f",),
    "details.power.energy_mj": ("gpudiag/Total Energy Consumption=thousandths",),
    "details.temperatures.margin_c": ("Temperature/GPU T.Limit Temp",),
    "details.temperatures.gpu_max_c": ("gpudiag/GPU Max Operating Temp",),
    "details.temperatures.memory_max_c": ("gpudiag/Memory Max Operating Temp",),
    "details.identity.pci_domain": ("PCI/Domain=hex4",),
    "details.identity.pci_bus": ("PCI/Bus=hex2",),
    "details.identity.pci_device": ("PCI/Device=hex2",),
    "details.identity.pci_device_id": ("PCI/Device Id=hex8",),
    "details.identity.pci_subsystem_id": ("PCI/Sub System Id=hex8",),
    "details.identity.pci_base_class": ("PCI/Base Classcode=hex",),
    "details.identity.pci_sub_class": ("PCI/Sub Classcode=hex",),
    "details.identity.gsp_mode_current": ("gpudiag/GSP Firmware Mode/Current=enabled",),
    "details.identity.gsp_mode_default": ("gpudiag/GSP Firmware Mode/Default=enabled",),
    "details.identity.serial": ("Serial Number",),
    "details.identity.vbios_version": ("VBIOS Version",),
    "details.identity.board_part_number": ("Board Part Number",),
    "details.identity.board_id": ("Board ID=pyhex",),
    "details.identity.module_id": ("Platform Info/Module Id",),
    "details.identity.inforom_image": ("Inforom Version/Image Version",),
    "details.identity.inforom_oem": ("Inforom Version/OEM Object",),
    "details.identity.inforom_ecc": ("Inforom Version/ECC Object",),
    "details.identity.inforom_power": ("Inforom Version/Power Management Object",),
    "details.identity.architecture": ("Product Architecture",),
    "details.identity.gsp_firmware_version": ("GSP Firmware Version",),
    "details.identity.display_mode": (
        "Display Mode=deprecated_q",
        "Display Attached=yes",
    ),
    "details.identity.display_active": ("Display Active=enabled",),
    "details.identity.accounting_mode": ("Accounting Mode=enabled",),
    "details.identity.accounting_buffer_size": ("Accounting Mode Buffer Size",),
    "details.identity.addressing_mode": ("Addressing Mode=addressing",),
    "details.identity.c2c_enabled": ("GPU C2C Mode=enabled",),
    "details.pcie.tx_kbps": ("PCI/Tx Throughput",),
    "details.pcie.rx_kbps": ("PCI/Rx Throughput",),
    "details.pcie.replay_counter": ("PCI/Replays Since Reset",),
    "details.codecs.encoder_sessions": ("Encoder Stats/Active Sessions",),
    "details.codecs.encoder_average_fps": ("Encoder Stats/Average FPS",),
    "details.codecs.encoder_average_latency_us": ("Encoder Stats/Average Latency",),
    "details.codecs.encoder_percent": ("Utilization/Encoder",),
    "details.codecs.decoder_percent": ("Utilization/Decoder",),
    "details.codecs.jpeg_percent": ("Utilization/JPEG",),
    "details.codecs.ofa_percent": ("Utilization/OFA",),
    "details.identity.brand": ("Product Brand",),
    "details.identity.driver_model_current": ("Driver Model/Current",),
    "details.identity.driver_model_pending": ("Driver Model/Pending",),
    "details.identity.pdi": ("GPU PDI=hex16l",),
    "details.identity.multi_gpu_board": ("MultiGPU Board=yes",),
    "details.identity.platform": (
        "Platform Info/Chassis Serial Number:chassis_serial_number",
        "Platform Info/Slot Number:slot_number",
        "Platform Info/Tray Index:tray_index",
        "Platform Info/Host ID:host_id",
        "Platform Info/Peer Type:peer_type=peer_type",
        "Platform Info/GPU Fabric GUID:fabric_guid=guid",
    ),
    "details.identity.bbx_flush": (
        "Inforom BBX Object Flush/Latest Timestamp:0",
        "Inforom BBX Object Flush/Latest Duration:1",
    ),
    "details.identity.gom_current": ("GPU Operation Mode/Current",),
    "details.identity.gom_pending": ("GPU Operation Mode/Pending",),
    "details.identity.virtualization_mode": ("GPU Virtualization Mode/Virtualization Mode",),
    "details.identity.host_vgpu_mode": ("GPU Virtualization Mode/Host VGPU Mode",),
    "details.identity.vgpu_heterogeneous_mode": ("GPU Virtualization Mode/vGPU Heterogeneous Mode=enabled",),
    "details.identity.egm": ("Capabilities/EGM=lower_enabled",),
    "details.identity.fabric": (
        "Fabric/State:state=fabric_state",
        "Fabric/Status:status=fabric_status",
        "Fabric/CliqueId:clique_id=fabric_number",
        "Fabric/ClusterUUID:cluster_uuid=fabric_uuid",
        "Fabric/Health/Summary:health_summary=fabric_summary",
        "Fabric/Health/Bandwidth:health_mask=fabric_bandwidth",
        "Fabric/Health/Route Recovery in progress:health_mask=fabric_route_recovery",
        "Fabric/Health/Route Unhealthy:health_mask=fabric_route_unhealthy",
        "Fabric/Health/Access Timeout Recovery:health_mask=fabric_access_timeout",
        "Fabric/Health/Incorrect Configuration:health_mask=fabric_configuration",
        "Fabric/Health/Partition Assigned:health_mask=fabric_partition",
    ),
    "details.pcie.replay_rollovers": ("PCI/Replay Number Rollovers",),
    "details.pcie.atomic_caps_outbound": ("PCI/Atomic Caps Outbound=hex",),
    "details.pcie.atomic_caps_inbound": ("PCI/Atomic Caps Inbound=hex",),
    "details.pcie.bridge_chips": (
        "PCI/Bridge Chip/Type=bridge_type",
        "PCI/Bridge Chip/Firmware=bridge_firmware",
    ),
    "details.codecs.fbc_sessions": ("FBC Stats/Active Sessions",),
    "details.codecs.fbc_average_fps": ("FBC Stats/Average FPS",),
    "details.codecs.fbc_average_latency_us": ("FBC Stats/Average Latency",),
    "details.memory_health.dram_encryption_current": ("DRAM Encryption Mode/Current=enabled",),
    "details.memory_health.dram_encryption_pending": ("DRAM Encryption Mode/Pending=enabled",),
    "details.memory_health.channel_repair_pending": ("ECC Errors/Channel Repair Pending=yes",),
    "details.memory_health.tpc_repair_pending": ("ECC Errors/TPC Repair Pending=yes",),
    "details.memory_health.unrepairable_memory": ("ECC Errors/Unrepairable Memory=yes",),
    "details.temperatures.shutdown_tlimit_c": ("Temperature/GPU Shutdown T.Limit Temp",),
    "details.temperatures.slowdown_tlimit_c": ("Temperature/GPU Slowdown T.Limit Temp",),
    "details.temperatures.gpu_max_tlimit_c": ("Temperature/GPU Max Operating T.Limit Temp",),
    "details.temperatures.memory_max_tlimit_c": ("Temperature/Memory Max Operating T.Limit Temp",),
    "details.temperatures.target_c": ("Temperature/GPU Target Temperature",),
    "details.temperatures.target_min_c": ("Supported GPU Target Temp/GPU Target Temp Min",),
    "details.temperatures.target_max_c": ("Supported GPU Target Temp/GPU Target Temp Max",),
    "details.power.memory_average_w": ("GPU Memory Power Readings/Average Power Draw=2f",),
    "details.power.memory_instant_w": ("GPU Memory Power Readings/Instantaneous Power Draw=2f",),
    "details.power.module_average_w": ("Module Power Readings/Average Power Draw=2f",),
    "details.power.module_instant_w": ("Module Power Readings/Instantaneous Power Draw=2f",),
    "details.power.module_current_limit_w": ("Module Power Readings/Current Power Limit=2f",),
    "details.power.module_requested_limit_w": ("Module Power Readings/Requested Power Limit=2f",),
    "details.power.module_default_limit_w": ("Module Power Readings/Default Power Limit=2f",),
    "details.power.module_min_limit_w": ("Module Power Readings/Min Power Limit=2f",),
    "details.power.module_max_limit_w": ("Module Power Readings/Max Power Limit=2f",),
    "details.power.smoothing": ("Power Smoothing=enabled",),
    "details.power.profiles_requested": ("Workload Power Profiles/Requested Profiles=profiles",),
    "details.power.profiles_enforced": ("Workload Power Profiles/Enforced Profiles=profiles",),
    "details.clocks.max_customer_boost_graphics": ("Max Customer Boost Clocks/Graphics",),
    "details.clocks.auto_boost": ("Clock Policy/Auto Boost=on",),
    "details.clocks.auto_boost_default": ("Clock Policy/Auto Boost Default=on",),
}
