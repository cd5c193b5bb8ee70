"""Shared by the deep diagnostics' children (``memtest``, ``stress``): events to the parent, the
devices to test, a thread per device, and an exit when gpudiag goes away.

Standard library and :mod:`protocol` only (another interpreter runs these children: ``check
--python``). Events are ``protocol.DIAG {json}`` lines with a ``kind``; the parent side is
:mod:`gpudiag.checks.deep.collect`. A child calls :func:`sync` through this module
(``diag.sync(...)``, never a copy of the name) so that tests can stand in for a slow, hung or
crashing device on the CPU.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import protocol

PARENT_GONE_EXIT = 4
_LOCK = threading.Lock()  # one line at a time from the devices' threads


def event(kind: str, **data: Any) -> None:
    with _LOCK:
        protocol.write(protocol.DIAG, json.dumps({"kind": kind, **data}))


def watch_parent(parent: int | None = None, interval: float = 0.5) -> None:
    """End this process when its parent (``parent``, else the one it has now) goes away (killed, or
    ended without reaping it): the GPUs' memory and contexts are freed with it, and a stress test
    never runs on unattended. A parent gone before this child even started counts too."""
    if parent is None:
        parent = os.getppid()
    if os.getppid() != parent:
        os._exit(PARENT_GONE_EXIT)

    def loop() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(PARENT_GONE_EXIT)

    threading.Thread(target=loop, name="gpudiag-parent-watch", daemon=True).start()


class NoCudaError(Exception):
    """torch cannot use CUDA here; the message says why, in one line."""


def start(settings: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """Import torch, start CUDA, and name the devices to test: ``{"index", "uuid", "name"}`` each.

    ``device_type`` "cpu" (tests on machines without a GPU) tests ``settings["devices"]`` stand-ins.
    """
    try:
        torch: Any = importlib.import_module("torch")  # Any: the child runs whatever torch it finds
    except BaseException as exc:
        raise NoCudaError(f"torch fails to import: {protocol.first_line(exc)}") from None
    if settings["device_type"] != "cuda":
        return torch, [{"index": i, "uuid": f"cpu-{i}", "name": "CPU"} for i in range(int(settings["devices"]))]
    try:
        torch.cuda.init()
        count = int(torch.cuda.device_count())
        devices = []
        for i in range(count):
            props = torch.cuda.get_device_properties(i)
            devices.append({"index": i, "uuid": str(getattr(props, "uuid", "")) or "-", "name": str(props.name)})
    except Exception as exc:
        raise NoCudaError(protocol.first_line(exc)) from None
    if not devices:
        raise NoCudaError("torch sees no CUDA device")
    return torch, devices


def device(torch: Any, settings: dict[str, Any], index: int) -> Any:
    return torch.device("cuda", index) if settings["device_type"] == "cuda" else torch.device("cpu")


def sync(torch: Any, dev: Any, index: int) -> None:
    """Wait for the device's work (tests replace this to fake a slow, hung or crashing device)."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def free_memory(torch: Any, dev: Any, settings: dict[str, Any]) -> tuple[int, int]:
    """(free, total) bytes as CUDA sees them; the configured stand-in on the CPU."""
    if dev.type == "cuda":
        free, total = torch.cuda.mem_get_info(dev)
        return int(free), int(total)
    size = int(settings["cpu_bytes"])
    return size, size


def release(torch: Any, dev: Any) -> None:
    """Give the memory back to the driver, not just to torch's cache."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()


def each_device(devices: list[dict[str, Any]], work: Callable[[dict[str, Any]], None]) -> None:
    """Run ``work`` for every device at once, a thread each (torch releases the GIL in its kernels),
    named after its device (``gpudiag-device-3``: in stacks, and for tests that fake one bad device)."""
    threads = [
        threading.Thread(target=work, args=(d,), name=f"gpudiag-device-{d['index']}", daemon=True) for d in devices
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main(run: Callable[[Any, list[dict[str, Any]], dict[str, Any]], None], argv: list[str]) -> None:
    """A deep child's whole life: settings from argv, torch and the devices, ``run``, one final result."""
    settings = json.loads(argv[1])
    watch_parent(settings.get("parent"))
    try:
        torch, devices = start(settings)
    except NoCudaError as exc:
        protocol.emit({"no_cuda": str(exc)})
        return
    event("devices", devices=devices)
    run(torch, devices, settings)
    protocol.emit({"done": True})
