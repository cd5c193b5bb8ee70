"""Child: the devices CUDA really enumerates under this process's CUDA_VISIBLE_DEVICES.

Run by path with the environment being evaluated (gpudiag itself never initialises CUDA);
standard library and :mod:`protocol` only. First the driver API through ctypes (no torch
needed), then torch: its device_count() before CUDA initialises (PyTorch's own parser) and
its devices after. ``GPUDIAG_LIBCUDA`` names another libcuda (tests use a fake one).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import protocol

CUDA_SUCCESS = 0


def _uuid(raw: Any) -> str:
    h = bytes(raw).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class _Driver:
    """The few driver API calls the probe needs, each answering its CUresult."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def call(self, name: str, argtypes: list[Any], *args: Any) -> int:
        fn = getattr(self.lib, name)
        fn.argtypes = argtypes
        return int(fn(*args))

    def error_name(self, rc: int) -> str:
        text = ctypes.c_char_p()
        try:
            if self.call("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)], rc, ctypes.byref(text)):
                return "CUDA error"
        except AttributeError:
            return "CUDA error"
        return text.value.decode(errors="replace") if text.value else "CUDA error"

    def device(self, ordinal: int) -> dict[str, Any]:
        c_int, byref = ctypes.c_int, ctypes.byref
        entry: dict[str, Any] = {"name": "", "uuid": "", "pci_bus_id": ""}
        dev = c_int(0)
        if self.call("cuDeviceGet", [ctypes.POINTER(c_int), c_int], byref(dev), ordinal) != CUDA_SUCCESS:
            return entry
        buf = ctypes.create_string_buffer(256)
        if self.call("cuDeviceGetName", [ctypes.c_char_p, c_int, c_int], buf, 256, dev.value) == CUDA_SUCCESS:
            entry["name"] = buf.value.decode(errors="replace")
        for name in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
            if hasattr(self.lib, name):
                raw = (ctypes.c_ubyte * 16)()
                if self.call(name, [ctypes.POINTER(ctypes.c_ubyte * 16), c_int], byref(raw), dev.value) == 0:
                    entry["uuid"] = _uuid(raw)
                break
        bus = ctypes.create_string_buffer(64)
        if self.call("cuDeviceGetPCIBusId", [ctypes.c_char_p, c_int, c_int], bus, 64, dev.value) == CUDA_SUCCESS:
            entry["pci_bus_id"] = bus.value.decode(errors="replace")
        for name in ("cuDeviceTotalMem_v2", "cuDeviceTotalMem"):
            if hasattr(self.lib, name):
                size = ctypes.c_size_t(0)
                if self.call(name, [ctypes.POINTER(ctypes.c_size_t), c_int], byref(size), dev.value) == 0:
                    entry["total_memory_bytes"] = int(size.value)
                break
        return entry


def driver_probe() -> dict[str, Any]:
    """cuInit + cuDeviceGetCount. A cuInit error is CUDA's answer for this setting: no device,
    with the error (``cuinit_error``); only a missing driver means the driver could not be asked."""
    name = os.environ.get("GPUDIAG_LIBCUDA") or "libcuda.so.1"
    out: dict[str, Any] = {"label": "CUDA driver API (cuInit in a child process)"}
    try:
        driver = _Driver(ctypes.CDLL(name))
    except OSError as exc:
        out["error"] = f"no NVIDIA driver here: {name} cannot be loaded ({protocol.first_line(exc)})"
        return out
    try:
        rc = driver.call("cuInit", [ctypes.c_uint], 0)
        if rc != CUDA_SUCCESS:
            out["devices"] = []
            out["cuinit_error"] = f"cuInit: {driver.error_name(rc)} ({rc})"
            out["cuinit_code"] = rc
            out["detail"] = out["cuinit_error"]
            return out
        count = ctypes.c_int(0)
        rc = driver.call("cuDeviceGetCount", [ctypes.POINTER(ctypes.c_int)], ctypes.byref(count))
        if rc != CUDA_SUCCESS:
            out["error"] = f"cuDeviceGetCount failed: {driver.error_name(rc)} ({rc})"
            return out
        out["devices"] = [driver.device(i) for i in range(count.value)]
    except Exception as exc:
        out["error"] = protocol.first_line(exc)
    return out


def torch_probe() -> dict[str, Any]:
    out: dict[str, Any] = {"label": "torch"}
    try:
        torch: Any = importlib.import_module("torch")  # Any: the child runs whatever torch it finds
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            out["error"] = f"torch is not installed for {sys.executable}"
        else:
            out["error"] = f"torch cannot be imported: {protocol.first_line(exc)}"
        return out
    except Exception as exc:
        out["error"] = f"torch cannot be imported: {protocol.first_line(exc)}"
        return out
    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["label"] = f"torch {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else "")
    if torch.version.cuda is None:
        out["error"] = f"this torch ({torch.__version__}) is a CPU-only build: it cannot see CUDA devices"
        return out
    try:
        out["count_before_init"] = int(torch.cuda.device_count())
    except Exception as exc:
        out["count_before_init_error"] = protocol.first_line(exc)
    try:
        torch.cuda.init()
    except Exception as exc:
        text = protocol.first_line(exc)
        if "No CUDA GPUs are available" in text:
            out["devices"] = []
            out["detail"] = text
        elif "Error 101" in text or "invalid device ordinal" in text:
            out["devices"] = []  # CUDA's own answer for this setting (cuInit failed), as the driver gives it
            out["cuinit_error"] = text
            out["detail"] = text
        else:
            out["error"] = text
        return out
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        entry = {"name": p.name, "uuid": str(getattr(p, "uuid", "") or ""), "total_memory_bytes": int(p.total_memory)}
        if hasattr(p, "pci_bus_id") and hasattr(p, "pci_domain_id") and hasattr(p, "pci_device_id"):
            entry["pci_bus_id"] = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        devices.append(entry)
    out["devices"] = devices
    return out


def main() -> None:
    protocol.emit(
        {
            "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")},
            "driver": driver_probe(),
            "torch": torch_probe(),
        }
    )


if __name__ == "__main__":
    main()
