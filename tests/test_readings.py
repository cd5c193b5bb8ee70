"""The declarations of gpudiag.readings against NVML's own (nvidia-ml-py's constants)."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pynvml

from gpudiag import readings
from gpudiag.model import FactGroup, Gpu, Reading, Reason


def test_clock_events_are_nvmls_bits_and_counter_fields() -> None:
    for event in readings.CLOCK_EVENTS:
        assert getattr(pynvml, f"nvmlClocksEventReason{event.name}") == event.bit, event.name
    counters = {
        "SwPowerCap": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
        "SyncBoost": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST,
        "SwThermalSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
        "HwThermalSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
        "HwPowerBrakeSlowdown": pynvml.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
    }
    assert {e.name: e.counter_field for e in readings.CLOCK_EVENTS if e.counter_field} == counters
    assert sum(e.bit for e in readings.CLOCK_EVENTS) == 0x1FF  # the H100's supported mask: every reason
    assert readings.clock_event_bits("HwSlowdown", "SwThermalSlowdown") == 0x28


def test_codes_are_nvmls() -> None:
    assert readings.COMPUTE_MODES[pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS].value == "Exclusive_Process"
    assert readings.TOPOLOGY_LEVELS[pynvml.NVML_TOPOLOGY_SYSTEM] == "SYS"
    assert readings.TOPOLOGY_LEVELS[pynvml.NVML_TOPOLOGY_NODE] == "NODE"
    assert readings.P2P_STATUS[pynvml.NVML_P2P_STATUS_OK] == "OK"
    assert pynvml.NVML_P2P_CAPS_INDEX_READ[0] == readings.P2P_READ and readings.P2P_NVLINK == 2
    assert readings.NVLINK_REMOTE_TYPES[pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH] == "switch"
    for name, fid in (
        ("MEMORY_TEMP", readings.FI_MEMORY_TEMP),
        ("GET_GPU_RECOVERY_ACTION", readings.FI_GPU_RECOVERY_ACTION),
        ("NVLINK_GET_SPEED", readings.FI_NVLINK_GET_SPEED),
        ("POWER_AVERAGE", readings.FI_POWER_AVERAGE),
        ("POWER_INSTANT", readings.FI_POWER_INSTANT),
        ("REMAPPED_ROWS_COR_INACTIVE", readings.FI_REMAPPED_COR_INACTIVE),
        ("REMAPPED_ROWS_UNC_INACTIVE", readings.FI_REMAPPED_UNC_INACTIVE),
    ):
        assert getattr(pynvml, f"NVML_FI_DEV_{name}") == fid, name


def test_dcgm_exporters_field_ids_are_nvmls() -> None:
    """The field values read for dcgm-exporter's fields: the perf-policy counters DCGM's *_VIOLATION
    fields read (dcgm_fields.cpp) and the NVLink data counters of DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL."""
    assert dict(readings.FI_PERF_POLICIES) == {
        policy: getattr(pynvml, f"NVML_FI_DEV_PERF_POLICY_{policy.upper()}")
        for policy in ("power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability")
    }
    assert readings.FI_NVLINK_THROUGHPUT_DATA_TX == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
    assert readings.FI_NVLINK_THROUGHPUT_DATA_RX == pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
    assert readings.FI_PCIE_COUNT_TX_BYTES == pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES
    assert readings.FI_PCIE_COUNT_RX_BYTES == pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES
    assert readings.ALL_LINKS == 2**32 - 1  # UINT_MAX: every link, summed
    assert readings.GRID_LICENSE_FEATURE_VGPU == pynvml.NVML_GRID_LICENSE_FEATURE_CODE_VGPU


def test_the_vgpu_license_status_is_dcgms() -> None:
    """1 only where vGPU licensing applies and its vGPU feature is licensed (DcgmCacheManager)."""
    from types import SimpleNamespace

    codec = readings.VGPU_LICENSE
    for status in (0, 1):
        assert codec.decode(SimpleNamespace(**codec.encode(status))) == status
    unlicensed = SimpleNamespace(
        isGridLicenseSupported=1,
        licensableFeaturesCount=2,
        gridLicensableFeatures=[
            SimpleNamespace(featureCode=2, featureState=1),  # another feature, licensed
            SimpleNamespace(featureCode=1, featureState=0),  # the vGPU feature, not
        ],
    )
    assert codec.decode(unlicensed) == 0


# --- the rows against the model and nvidia-ml-py -------------------------------------------


def _all_rows() -> tuple[readings.Spec, ...]:
    from gpudiag.details import DETAIL_READINGS

    return (*readings.GPU_READINGS, *DETAIL_READINGS)


def _leaves(cls: Any, prefix: str) -> list[str]:
    """The keys of every reading of a model Struct: a Reading field, a tuple field (a composite), or
    the (name, reading) pairs of a tuple of pairs (``field[``)."""
    out = []
    for name, kind in readings.field_types(cls).items():
        key = f"{prefix}{name}"
        if typing.get_origin(kind) is Reading or typing.get_origin(kind) is tuple:
            pairs = typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else None
            out.append(f"{key}[" if typing.get_origin(pairs) is tuple else key)
        elif isinstance(kind, type) and issubclass(kind, msgspec.Struct):
            out += _leaves(kind, f"{key}.")
    return out


def test_every_reading_of_the_model_has_exactly_one_row_and_every_row_a_reading() -> None:
    from gpudiag.details import GpuDetails

    keys = [row.key for row in _all_rows()]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    fields = [k for k in _leaves(Gpu, "") if k != "details"] + _leaves(GpuDetails, "details.")
    covered = {k.split("[")[0] + "[" if "[" in k else k for k in keys}
    assert sorted(set(fields) - covered) == []  # a model reading no row declares
    assert sorted(covered - set(fields)) == []  # a row naming no model reading


def test_every_row_names_calls_and_constants_nvidia_ml_py_has() -> None:
    for row in _all_rows():
        assert row.call or row.field, row.key
        for name in filter(None, (row.call, row.fallback)):
            assert callable(getattr(pynvml, name, None)), (row.key, name)
        for arg in row.args:
            assert isinstance(arg, int) or isinstance(getattr(pynvml, arg), int), (row.key, arg)


def test_every_fact_group_but_the_details_is_read_by_rows() -> None:
    grouped = {row.group for row in readings.GPU_READINGS}
    assert grouped == set(FactGroup) - {FactGroup.DETAILS, FactGroup.LINKS} | {None}
    assert {row.group for row in _all_rows()} - grouped == {FactGroup.DETAILS}


def test_a_composite_row_has_its_reader() -> None:
    """Rows read by hand: the probe's readers, and nothing else is custom."""
    from gpudiag.probe.nvml import _CUSTOM_READERS

    gpu_custom = {row.key for row in readings.GPU_READINGS if row.custom}
    assert gpu_custom == set(_CUSTOM_READERS)


def test_field_types_resolves_every_model_struct_as_typing_does() -> None:
    """readings.field_types evaluates each distinct annotation once, not through typing.get_type_hints."""
    import importlib
    import pkgutil

    from gpudiag import details, model, values

    modules = [values, model, readings, details]
    modules += [importlib.import_module(m.name) for m in pkgutil.iter_modules(details.__path__, "gpudiag.details.")]
    structs = {
        v
        for module in modules
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, msgspec.Struct) and v.__module__ == module.__name__
    }
    assert len(structs) > 30
    for struct in structs:
        hints = typing.get_type_hints(struct, localns={"GpuDetails": object})
        assert readings.field_types(struct) == hints, struct
        assert list(readings.field_types(struct)) == list(hints), struct


def test_reading_at_passes_a_missing_reading_on() -> None:
    from gpudiag.replay import fixtures

    gpu = fixtures.load("h100x8-healthy")[0].gpus[0]
    assert readings.reading_at(gpu, "pcie.gen_max") == Reading.of(5)
    assert readings.reading_at(gpu, "details.power.average_w").reason is Reason.NOT_READ
    busy = fixtures.load("h100-driver580-busy")[0].gpus[0]
    assert readings.reading_at(busy, "details.clocks.event_reason_counters_us[sync_boost]") == Reading.of(0)


def test_every_query_name_a_row_answers_is_nvidia_smis_and_answered_once() -> None:
    from gpudiag.query import gpu_fields

    known = {f.name for f in gpu_fields.fields()} | set(gpu_fields.own_names())
    named = [n.name for n in gpu_fields.named()]
    assert sorted(set(named) - known) == []
    assert len(named) == len(set(named))


def test_every_presentation_table_is_keyed_by_readings() -> None:
    """An output's table names readings a row declares: a key spelled wrong, or a reading since
    removed, fails here rather than at run time."""
    from gpudiag.query.reading_names import QUERY_NAMES
    from gpudiag.render.details_lines import Q_LINES

    keys = {row.key for row in _all_rows()}
    for table in (QUERY_NAMES, Q_LINES):
        assert sorted(set(table) - keys) == []
        assert all(table.values())


def test_every_q_line_of_a_row_has_its_place_in_the_skeleton() -> None:
    from gpudiag.render import details_view

    layout = details_view.layout()
    headings = {e.path.rsplit("/", 1)[0] for e in layout if "/" in e.path and not e.block}
    places = {e.path for e in layout if not e.block} - headings
    assert sorted(set(details_view.shown_lines()) - places) == []
    # Every line is a reading's, or says why NVML cannot give it (driver 580's nvidia-smi -q has no other).
    unfilled = places - set(details_view.shown_lines()) - {e.path for e in layout if e.reason}
    assert sorted(unfilled) == []
    assert len([e for e in layout if e.reason]) <= 8  # the labels NVML has no call for, each with its reason
    blocks = {e.block for e in layout if e.block}
    assert blocks == set(details_view._BLOCKS)


def test_every_format_a_table_names_exists() -> None:
    """The query package names its formats and the CSV renderer resolves them: each name is there.
    (-q's lines resolve theirs as their table is parsed: a name not there raises.)"""
    from gpudiag.query import gpu_fields
    from gpudiag.query.list_fields import LISTS
    from gpudiag.render import details_view
    from gpudiag.render.format import VALUE_FORMATS

    named = {f.answer.format for f in gpu_fields.spellings().values() if f.answer is not None}
    named |= {f.format for query in LISTS.values() for f in query.fields}
    assert sorted(named - set(VALUE_FORMATS)) == []
    assert {"timestamp", "active", "int", "mib", "hex16", "fabric_state"} <= named  # every kind of answer seen
    assert details_view.shown_lines()


def test_every_exporter_sample_reads_a_declared_reading() -> None:
    """The exporter's table names readings a row declares (a struct's part, one its value has)."""
    from gpudiag.export.gpu_families import GPU_FAMILIES

    keys = {row.key: row for row in readings.GPU_READINGS}
    for family in GPU_FAMILIES:
        for sample in family.samples:
            assert sample.key in keys, (family.name, sample.key)
            assert len(sample.labels) == len(family.labels), family.name
    named = {s.key for f in GPU_FAMILIES for s in f.samples}
    assert len(named) >= 30


def test_every_dcgm_field_reads_a_declared_reading() -> None:
    from gpudiag.export import metrics_dcgm

    keys = {row.key for row in readings.GPU_READINGS}
    assert sorted(set(metrics_dcgm.READS) - keys) == []
    assert len(metrics_dcgm.FIELDS) >= 40


def _owner(root: Any, key: str) -> Any:
    """The Struct whose field a row's key names (``clocks.current.sm``: ClockSet)."""
    cls = root
    *path, _ = key.split("[")[0].split(".")
    for name in path:
        kind = readings.field_types(cls)[name]
        cls = typing.get_args(kind)[0] if typing.get_origin(kind) is Reading else kind
    return cls


def test_each_reading_is_its_field_and_its_row_in_one_module() -> None:
    """A reading's spec is one module: the row stands where the Struct holding its field is defined."""
    import gpudiag.details as details
    from gpudiag.details import clocks, encoders, identity, memory_health, pcie, power, temperatures

    where = {row.key: readings for row in readings.GPU_READINGS}
    for section in (clocks, encoders, identity, memory_health, pcie, power, temperatures):
        where |= {row.key: section for row in section.ROWS}
    where |= {row.key: details for row in details.DETAIL_READINGS if row.key not in where}
    misplaced = [
        (key, module.__name__, owner.__module__)
        for key, module in where.items()
        for owner in [
            _owner(details.GpuDetails, key[len("details.") :]) if key.startswith("details.") else _owner(Gpu, key)
        ]
        if owner.__module__ != module.__name__
    ]
    assert misplaced == []
