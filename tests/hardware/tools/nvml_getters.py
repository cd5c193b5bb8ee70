"""Call every simple NVML getter on GPU 0 and record the result or the error, as JSON.

Run by ``tests/hardware/capture.sh`` on a machine with an NVIDIA driver (nvidia-ml-py only; no
gpudiag). Besides every ``nvmlSystemGet*`` / ``nvmlDeviceGet*`` that takes no argument, it makes
the calls gpudiag reads with arguments (clocks, thresholds, ECC counters, field values with their
scopes, each memory clock's graphics clocks) and those that fill a struct passed by reference
(platform info, capabilities, fabric, power profiles, SRAM ECC status, PCI class codes), and takes
two GPM samples a second apart, so the capture answers every call gpudiag's probe makes.
Struct members that are byte arrays are recorded as hex (they hold binary: GUIDs, UUIDs).
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from typing import Any

import pynvml as nvml


def plain(value: Any, depth: int = 0) -> Any:
    if depth > 4:
        return repr(value)
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list | tuple | ctypes.Array):
        return [plain(x, depth + 1) for x in value]
    if hasattr(value, "_fields_"):
        out = {}
        for name, kind in value._fields_:
            if isinstance(kind, type) and issubclass(kind, ctypes.Array) and kind._type_ is ctypes.c_char:
                raw = ctypes.string_at(ctypes.addressof(value) + getattr(type(value), name).offset, ctypes.sizeof(kind))
                out[name] = {"hex": raw.hex()}
            else:
                out[name] = plain(getattr(value, name), depth + 1)
        return out
    if hasattr(value, "__dict__"):
        return {k: plain(x, depth + 1) for k, x in vars(value).items() if not k.startswith("_")}
    return repr(value)


def _fields() -> list[Any]:
    """The field values gpudiag reads: by id, and the power ones of each scope (module 1, memory 2)."""
    ids = [82, 83, 94, 95, 185, 186, 193, 194, 195, 196, 228, 229, 230, 251, 301, 302, 74, 76, 269, 270, 271]
    scoped = [(field, scope) for field in (185, 186, 187, 188, 189, 190, 192) for scope in (1, 2)]
    return [*ids, *scoped]


EXTRA: dict[str, list[tuple[Any, ...]]] = {
    "nvmlDeviceGetTemperature": [(0,)],
    "nvmlDeviceGetTemperatureThreshold": [(i,) for i in range(8)],
    "nvmlDeviceGetClockInfo": [(i,) for i in range(4)],
    "nvmlDeviceGetMaxClockInfo": [(i,) for i in range(4)],
    "nvmlDeviceGetApplicationsClock": [(i,) for i in range(4)],
    "nvmlDeviceGetDefaultApplicationsClock": [(i,) for i in range(4)],
    "nvmlDeviceGetClock": [(i, j) for i in range(4) for j in range(3)],
    "nvmlDeviceGetMaxCustomerBoostClock": [(i,) for i in range(4)],
    "nvmlDeviceGetTotalEccErrors": [(e, c) for e in (0, 1) for c in (0, 1)],
    "nvmlDeviceGetMemoryErrorCounter": [(e, c, loc) for e in (0, 1) for c in (0, 1) for loc in range(8)],
    "nvmlDeviceGetRetiredPages": [(c,) for c in (0, 1)],
    "nvmlDeviceGetPcieThroughput": [(0,), (1,)],
    "nvmlDeviceGetNvLinkState": [(i,) for i in range(18)],
    "nvmlDeviceGetInforomVersion": [(i,) for i in range(3)],
    "nvmlDeviceGetEncoderCapacity": [(0,)],
    "nvmlDeviceGetSupportedMemoryClocks": [()],
    "nvmlDeviceGetProcessUtilization": [(0,)],
    "nvmlDeviceGetMemoryInfo": [(), (nvml.nvmlMemory_v2,)] if hasattr(nvml, "nvmlMemory_v2") else [()],
    "nvmlDeviceGetFieldValues": [(_fields(),)],
}
# Calls that fill a struct the caller passes (nvidia-ml-py's class, made with its version set).
STRUCTS = {
    "nvmlDeviceGetPlatformInfo": "c_nvmlPlatformInfo_v2_t",
    "nvmlDeviceGetCapabilities": "c_nvmlDeviceCapabilities_v1_t",
    "nvmlDeviceGetGpuFabricInfoV": "c_nvmlGpuFabricInfo_v3_t",
    "nvmlDeviceWorkloadPowerProfileGetCurrentProfiles": "c_nvmlWorkloadPowerProfileCurrentProfiles_v1_t",
    "nvmlDeviceGetSramEccErrorStatus": "c_nvmlEccSramErrorStatus_v1_t",
    "nvmlDeviceGetPciInfoExt": "nvmlPciInfoExt_v1_t",
}


def _record(target: dict[str, Any], key: str, call: Any) -> None:
    try:
        target[key] = {"ok": plain(call())}
    except nvml.NVMLError as exc:
        target[key] = {"error": type(exc).__name__}
    except TypeError as exc:
        target[key] = {"signature": str(exc)[:120]}
    except Exception as exc:
        target[key] = {"exception": f"{type(exc).__name__}: {str(exc)[:120]}"}


def _struct_call(name: str, handle: Any) -> Any:
    struct = getattr(nvml, STRUCTS[name])()
    if hasattr(struct, "version") and STRUCTS[name] == "nvmlPciInfoExt_v1_t":
        struct.version = nvml.nvmlPciInfoExt_v1
    getattr(nvml, name)(handle, ctypes.byref(struct))
    return struct


def _gpm(handle: Any) -> Any:
    """Two GPM samples a second apart and the metrics nvmlGpmMetricsGet derives from them (Hopper+)."""
    if not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
        return {"supported": False}
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    try:
        nvml.nvmlGpmSampleGet(handle, first)
        time.sleep(1.0)
        nvml.nvmlGpmSampleGet(handle, second)
        metrics = nvml.c_nvmlGpmMetricsGet_t()
        metrics.version = nvml.NVML_GPM_METRICS_GET_VERSION
        metrics.sample1, metrics.sample2 = first, second
        wanted = [1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]
        metrics.numMetrics = len(wanted)
        for i, metric_id in enumerate(wanted):
            metrics.metrics[i].metricId = metric_id
        nvml.nvmlGpmMetricsGet(metrics)
        return {
            "supported": True,
            "metrics": {
                str(metrics.metrics[i].metricId): {
                    "value": metrics.metrics[i].value,
                    "status": metrics.metrics[i].nvmlReturn,
                }
                for i in range(len(wanted))
            },
        }
    finally:
        nvml.nvmlGpmSampleFree(first)
        nvml.nvmlGpmSampleFree(second)


def main() -> None:
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    out: dict[str, dict[str, Any]] = {"system": {}, "device0": {}}
    for name in sorted(dir(nvml)):
        fn = getattr(nvml, name)
        if not callable(fn) or not name.startswith(("nvmlSystemGet", "nvmlDeviceGet", "nvmlDeviceIs", "nvmlGet")):
            continue
        if name.startswith("nvmlDeviceGetHandle") or name in ("nvmlDeviceGetCount",) or name in STRUCTS:
            continue
        system = name.startswith(("nvmlSystem", "nvmlGet"))
        target = out["system"] if system else out["device0"]
        for args in EXTRA.get(name, [()]):
            key = name + (repr(args) if args else "")
            _record(target, key, (lambda f=fn, a=args: f(*a)) if system else (lambda f=fn, a=args: f(handle, *a)))
    for name in STRUCTS:
        _record(out["device0"], name, lambda n=name: _struct_call(n, handle))
    memory = out["device0"].get("nvmlDeviceGetSupportedMemoryClocks", {}).get("ok") or []
    for clock in memory:
        key = f"nvmlDeviceGetSupportedGraphicsClocks({clock},)"
        _record(out["device0"], key, lambda c=clock: nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, c))
    _record(out["device0"], "gpm", lambda: _gpm(handle))
    out["system"]["nvmlDeviceGetCount"] = nvml.nvmlDeviceGetCount()
    json.dump(out, sys.stdout, indent=1, default=repr)


if __name__ == "__main__":
    main()
