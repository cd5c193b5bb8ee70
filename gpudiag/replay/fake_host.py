"""A host-process resolver that answers from a recorded machine instead of psutil."""

from __future__ import annotations

from gpudiag.model import HostProcess, HostState, Machine, Reading, Reason


class RecordedHost:
    """Returns each PID's recorded owner, name and command; unknown PIDs have vanished."""

    def __init__(self, machine: Machine) -> None:
        self.set_machine(machine)

    def set_machine(self, machine: Machine) -> None:
        self._by_pid: dict[int, HostProcess] = {}
        for gpu in machine.gpus:
            for proc in gpu.processes.get(()):
                self._by_pid[proc.pid] = proc.host

    def __call__(self, pid: int) -> HostProcess:
        if pid in self._by_pid:
            return self._by_pid[pid]
        gone: Reading[str] = Reading.missing(Reason.NOT_FOUND, "process exited")
        return HostProcess(HostState.VANISHED, gone, gone, gone)
