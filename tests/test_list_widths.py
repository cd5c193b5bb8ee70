"""`gpudiag list` on every example machine at every common width: key columns stay whole.

Detail columns go first, then the GPU name and the command are cut; the GPU index, its memory
and utilization, and each process's GPU, MIG instance, PID and memory are never cut.
"""

from __future__ import annotations

import pytest

from gpudiag.model import GpuState
from gpudiag.render.format import mib_text
from gpudiag.sources import collect
from tests.conftest import Cli, every_example

WIDTHS = (60, 80, 100, 120, 200)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", every_example())
def test_key_columns_are_whole_at_every_width(cli: Cli, name: str, width: int) -> None:
    machine = collect(name)
    _, out, _ = cli.replay(name, "list", width=width)
    if machine.nvml.status.value != "ok":
        return  # one line on stderr, nothing to lay out
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    assert "…" not in "".join(line for line in lines if "GPU " in line and "Name" in line)  # GPU table header
    for gpu in machine.gpus:
        if gpu.state is not GpuState.OK:
            continue
        memory = gpu.memory.value
        assert memory is not None
        used = f"{mib_text(memory.used_bytes)} / {mib_text(memory.total_bytes)}"
        util = gpu.utilization.value
        cells = [str(gpu.index), *([f"{util.gpu_percent}%"] if util is not None else [])]
        assert any(used in line and all(c in line.split() for c in cells) for line in lines), (gpu.index, used)
    processes = [(g, p) for g in machine.gpus for p in g.processes.get(())]
    if not processes:
        return
    section = lines[lines.index("Processes") + 1 :]
    header = section[0].split()
    mig = any(p.gpu_instance_id is not None for _, p in processes)
    assert header[:2] == ["GPU", *(["GI"] if mig else ["PID"])], section[0]
    assert "PID" in header and "Memory" in header and "…" not in section[0]
    for gpu, proc in processes:
        cells = [str(gpu.index), str(proc.pid)]
        if proc.used_memory_bytes.value is not None:
            cells.append(mib_text(proc.used_memory_bytes.value))
        assert any(all(cell in line.split() for cell in cells) for line in section), (width, cells)
