"""`gpudiag stat`: one line per GPU, as gpustat prints it: a header (host, time, driver), then
``[0] NAME | 35°C,   0 % | 12815 / 81559 MB | user(12806M)``.

gpustat's layout (its `print_formatted`), with gpudiag's figures: memory in MiB rounded up as
nvidia-smi rounds it (gpustat rounds down), "N/A" where NVML has no value (gpustat prints "??"), every
name, user and command escaped (render.printable).
"""

from __future__ import annotations

import time
from typing import Any

from gpudiag.model import Gpu, GpuProcess, GpuState, Machine, Reading
from gpudiag.render.printable import printable
from gpudiag.serialize import to_data
from gpudiag.units import mib

SCHEMA = "gpudiag.stat/1"
NA = "N/A"
# gpustat's header time: the C locale's date and time (its locale.nl_langinfo(D_T_FMT)).
TIME_FORMAT = "%a %b %e %H:%M:%S %Y"


def _shown(reading: Reading[Any], fmt: str = "{}") -> str:
    return NA if reading.value is None else fmt.format(reading.value)


def _process(p: GpuProcess, show_cmd: bool, show_pid: bool) -> str:
    who = printable(p.host.user.get("--"))
    if show_cmd:
        who += ":" + printable(p.host.name.get("--"))
    if show_pid:
        who += f"/{p.pid}"
    used = p.used_memory_bytes.value
    return f"{who}({mib(used) if used is not None else '?'}M)"


def _name(gpu: Gpu) -> str:
    return printable(gpu.name.get(NA))


def header(machine: Machine, gpus: tuple[Gpu, ...]) -> str:
    width = max((len(_name(g)) for g in gpus), default=16) + 3  # len("[?]")
    # An example machine records no moment (collected_at 0): N/A, not 1970.
    stamp = time.strftime(TIME_FORMAT, time.localtime(machine.collected_at)) if machine.collected_at > 0 else NA
    driver = machine.nvml.driver_version.get(NA)
    return f"{printable(machine.host.hostname):{width}}  {stamp}  {printable(driver)}".strip()


def line(
    gpu: Gpu,
    width: int,
    show_cmd: bool = False,
    show_pid: bool = False,
    show_power: bool = False,
    processes: bool = True,
) -> str:
    """One GPU's line; a GPU NVML cannot read says so in place of its figures."""
    head = f"[{gpu.index}] {_name(gpu):{width}} |"
    if gpu.state is not GpuState.OK:
        return f"{head} {printable(gpu.state_detail or gpu.state.value)}"
    util = gpu.utilization.map(lambda u: u.gpu_percent)
    text = f"{head}{_shown(gpu.temperature_c):>3}°C, {_shown(util):>3} %"
    if show_power:
        text += f",  {_shown(gpu.power_draw_w.map(int)):>3} / {_shown(gpu.power_limit_w.map(int)):>3} W"
    memory = gpu.memory.value
    used, total = (str(mib(memory.used_bytes)), str(mib(memory.total_bytes))) if memory else (NA, NA)
    text += f" | {used:>5} / {total:>5} MB"
    if not processes:
        return text
    text += " |"
    procs = gpu.processes
    if procs.value is None:
        return text + " (Not Supported)" if procs.reason is not None else text
    return text + "".join(" " + _process(p, show_cmd, show_pid) for p in procs.value)


def block(machine: Machine, gpus: tuple[Gpu, ...], **options: bool) -> str:
    width = max((len(_name(g)) for g in gpus), default=16)
    return "\n".join([header(machine, gpus), *(line(g, width, **options) for g in gpus)]) + "\n"


def to_json(machine: Machine, gpus: tuple[Gpu, ...]) -> dict[str, Any]:
    entries = []
    for gpu in gpus:
        entry: dict[str, Any] = {"index": gpu.index, "state": gpu.state.value, "name": to_data(gpu.name)}
        if gpu.state is GpuState.OK:
            entry.update(
                {
                    "temperature_c": to_data(gpu.temperature_c),
                    "utilization_percent": to_data(gpu.utilization.map(lambda u: u.gpu_percent)),
                    "memory_used_mib": to_data(gpu.memory.map(lambda m: mib(m.used_bytes))),
                    "memory_total_mib": to_data(gpu.memory.map(lambda m: mib(m.total_bytes))),
                    "power_draw_w": to_data(gpu.power_draw_w),
                    "power_limit_w": to_data(gpu.power_limit_w),
                    "processes": to_data(
                        gpu.processes.map(
                            lambda procs: [
                                {
                                    "pid": p.pid,
                                    "user": to_data(p.host.user),
                                    "command": to_data(p.host.name),
                                    "gpu_memory_mib": to_data(p.used_memory_bytes.map(mib)),
                                }
                                for p in procs
                            ]
                        )
                    ),
                }
            )
        entries.append(entry)
    return {
        "schema": SCHEMA,
        "hostname": machine.host.hostname,
        "driver_version": to_data(machine.nvml.driver_version),
        "time": round(machine.collected_at, 3) if machine.collected_at > 0 else None,  # None: not recorded
        "gpus": entries,
    }
