"""What the child measured, plus what NVML says about each GPU -> judged rows and findings.

Pure: the command gives it the child's :class:`~gpudiag.bench.runner.Outcome` and the NVML
GPUs; the renderers take its rows.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudiag.bench.link import NONE as NO_EXPECTATION
from gpudiag.bench.link import Judgement, Link, Verdict, judge_d2d, judge_pageable, judge_peer, judge_pinned
from gpudiag.bench.placement import Placed
from gpudiag.bench.plan import DeviceInfo, Mode, Task, size_text
from gpudiag.bench.runner import Outcome
from gpudiag.bench.stats import GB, Bandwidth, bandwidth
from gpudiag.model import Gpu


@dataclass(frozen=True)
class Row:
    task: Task
    device: DeviceInfo | None
    gpu: Gpu | None  # NVML's view of task.device
    peer_gpu: Gpu | None
    bandwidth: Bandwidth | None  # None when the task failed
    verified: bool | None
    error: str
    link: Link | None  # read from NVML right after the warm-up
    max_link: Link | None  # the lower of GPU and slot
    judgement: Judgement
    cause: str  # the likely cause when below expected
    placement: Placed | None
    peer_access: bool | None
    spin_short: int

    @property
    def label(self) -> str:
        return device_label(self.task.device, self.gpu)

    @property
    def peer_label(self) -> str:
        return "" if self.task.peer is None else device_label(self.task.peer, self.peer_gpu)

    @property
    def failed(self) -> bool:
        return self.verified is False


def device_label(ordinal: int, gpu: Gpu | None) -> str:
    """'cuda:0 (GPU 3)': torch's ordinal, then nvidia-smi's index."""
    return f"cuda:{ordinal}" + (f" (GPU {gpu.index})" if gpu is not None else "")


def link_of(gen: int | None, width: int | None) -> Link | None:
    return Link(gen, width) if gen and width else None


def max_link(gpu: Gpu | None) -> Link | None:
    return None if gpu is None else link_of(gpu.pcie.gen_max.value, gpu.pcie.width_max.value)


def slower(current: Link | None, best: Link | None) -> bool:
    return current is not None and best is not None and (current.gen < best.gen or current.width < best.width)


def rows(outcome: Outcome, gpus: Mapping[int, Gpu | None]) -> list[Row]:
    """One judged row per task, in the child's order."""
    devices = {d.ordinal: d for d in outcome.devices}
    rates: dict[int, Bandwidth] = {}
    for task in outcome.tasks:
        result = outcome.results.get(task.index)
        if result is not None and not result.error and result.seconds_per_copy:
            try:
                rates[task.index] = bandwidth(task.counted_bytes, result.seconds_per_copy)
            except ValueError:
                continue
    # Pageable figures are judged as a share of pinned: the blocking pinned figure of the same
    # GPU, direction and size (the like-for-like call), else the asynchronous one.
    pinned_blocking: dict[tuple[int, str, int], float] = {}
    for t in sorted(outcome.tasks, key=lambda t: t.mode.timed_with_events, reverse=True):
        if t.mode.is_host and t.mode.pinned and t.index in rates:
            pinned_blocking[(t.device, t.mode.direction, t.nbytes)] = rates[t.index].median
    out = []
    for task in outcome.tasks:
        result = outcome.results.get(task.index)
        gpu = gpus.get(task.device)
        best = max_link(gpu)
        link = outcome.links.get(task.index)
        bw = rates.get(task.index)
        error = result.error if result is not None else "not measured: the benchmark stopped before this task"
        if result is not None and not result.error and bw is None:
            error = "the clock did not advance: use larger --sizes"
        peer_access = outcome.peer_access.get((task.device, task.peer)) if task.peer is not None else None
        judgement = Judgement(Verdict.NOT_JUDGED, NO_EXPECTATION)
        if bw is not None:
            judgement = judge(task, bw.median, devices.get(task.device), best, link, peer_access, pinned_blocking)
        placement = result.placement if result is not None else None
        out.append(
            Row(
                task=task,
                device=devices.get(task.device),
                gpu=gpu,
                peer_gpu=gpus.get(task.peer) if task.peer is not None else None,
                bandwidth=bw,
                verified=result.verified if result is not None and not result.error else None,
                error=error,
                link=link,
                max_link=best,
                judgement=judgement,
                cause=likely_cause(task.mode, judgement, link, best, placement),
                placement=placement,
                peer_access=peer_access,
                spin_short=result.spin_short if result is not None else 0,
            )
        )
    return out


HOST_PLATEAU = 32 * 1024 * 1024  # below this, host copies are latency-bound: not judged


def judge(
    task: Task,
    rate: float,
    device: DeviceInfo | None,
    best: Link | None,
    link: Link | None,
    peer_access: bool | None,
    pinned_blocking: Mapping[tuple[int, str, int], float],
) -> Judgement:
    mode = task.mode
    name = device.name if device is not None else ""
    if mode.is_host:
        if task.nbytes < HOST_PLATEAU:
            return Judgement(Verdict.NOT_JUDGED, NO_EXPECTATION, note="below the plateau: latency-bound")
        if mode.pinned:
            return judge_pinned(rate, best, link)
        return judge_pageable(rate, pinned_blocking.get((task.device, mode.direction, task.nbytes)))
    if mode is Mode.D2D:
        return judge_d2d(rate, name, task.nbytes, device.l2_bytes if device is not None else 0)
    if task.nbytes < HOST_PLATEAU:
        return Judgement(Verdict.NOT_JUDGED, NO_EXPECTATION, note="below the plateau: latency-bound")
    return judge_peer(rate / mode.byte_factor, name, peer_access, best)


def likely_cause(
    mode: Mode, judgement: Judgement, link: Link | None, best: Link | None, placement: Placed | None
) -> str:
    """Name the likely cause of a figure below expected, from what the numbers point to."""
    if judgement.verdict is not Verdict.BELOW:
        return ""
    remote = placement is not None and placement.placement.may_be_remote
    if mode.is_host:
        if slower(link, best):
            return f"the link runs at {link} under load (capable of {best}): it trained down"
        if remote and placement is not None:
            return f"host memory may be on a remote NUMA node ({placement.detail})"
        return "the link runs at full speed and host memory is local: a shared PCIe switch, IOMMU/ACS, or other traffic"
    if mode is Mode.D2D:
        return "memory clocks held down (power or thermal), another process on the GPU, or faulty memory"
    return "an NVLink down or degraded (`nvidia-smi nvlink -s`), or the copy went over PCIe"


class Severity(str, enum.Enum):
    FAILURE = "failure"  # data did not verify
    WARNING = "warning"  # below expected, a task failed, the run was cut short
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    severity: Severity
    device: int | None  # CUDA ordinal
    message: str


def findings(table: Sequence[Row], outcome: Outcome) -> list[Finding]:
    """What the figures mean, per GPU: data errors, a degraded link, a remote NUMA node."""
    out: list[Finding] = []
    for row in table:
        if row.failed:
            out.append(
                Finding(
                    Severity.FAILURE,
                    row.task.device,
                    f"{row.label}: {row.task.label()} copied wrong data: the GPU, its memory or the link corrupts "
                    "data; run `gpudiag check` and look for Xid errors in `dmesg`",
                )
            )
    by_device: dict[int, list[Row]] = {}
    for row in table:
        by_device.setdefault(row.task.device, []).append(row)
    for device, device_rows in by_device.items():
        below = [r for r in device_rows if r.judgement.verdict is Verdict.BELOW]
        host = [r for r in below if r.task.mode.is_host]
        if host:
            worst = min(host, key=lambda r: r.bandwidth.median if r.bandwidth else 0.0)
            floor = worst.judgement.expectation.floor
            like = f", behaves like {worst.judgement.behaves_like}" if worst.judgement.behaves_like else ""
            expected = f" (at least {floor / GB:.1f} expected on {worst.max_link})" if floor and worst.max_link else ""
            rate = worst.bandwidth.median / GB if worst.bandwidth else 0.0
            out.append(
                Finding(
                    Severity.WARNING,
                    device,
                    f"{worst.label}: host copies below expected: {worst.task.mode.value} {rate:.1f} GB/s{expected}"
                    f"{like}. Likely cause: {worst.cause}." + _advice(worst),
                )
            )
        for row in below:
            if row.task.mode.is_host:
                continue
            rate = row.bandwidth.median / GB if row.bandwidth else 0.0
            target = f" -> {row.peer_label}" if row.peer_label else ""
            out.append(
                Finding(
                    Severity.WARNING,
                    device,
                    f"{row.label}{target}: {row.task.mode.value} {rate:.1f} GB/s is below expected. "
                    f"Likely cause: {row.cause}.",
                )
            )
        pageable = _pageable_finding(device, device_rows)
        if pageable is not None:
            out.append(pageable)
        first = device_rows[0]
        gpu = first.gpu
        if gpu is not None:
            gen_gpu, gen_max = gpu.pcie.gen_gpu_max.value, gpu.pcie.gen_max.value
            if gen_gpu and gen_max and gen_max < gen_gpu:
                out.append(
                    Finding(
                        Severity.INFO,
                        device,
                        f"{first.label}: the GPU supports PCIe Gen{gen_gpu} but its slot allows Gen{gen_max}: "
                        f"figures are judged against Gen{gen_max}",
                    )
                )
    for row in table:
        if row.error and not row.error.startswith("not measured"):
            out.append(Finding(Severity.WARNING, row.task.device, f"{row.task.label()}: {row.error}"))
    if outcome.failure:
        out.append(Finding(Severity.WARNING, None, outcome.failure))
    return out


def _pageable_finding(device: int, device_rows: Sequence[Row]) -> Finding | None:
    """Pageable figures with their share of pinned and the advice to pin: information, never a failure."""
    shown = [r for r in device_rows if r.task.mode.is_host and not r.task.mode.pinned and r.bandwidth is not None]
    if not shown:
        return None
    figures = ", ".join(
        f"{r.task.mode.value} {r.bandwidth.median / GB:.1f} GB/s"
        + (f" ({r.judgement.note})" if r.judgement.note.endswith("of pinned") else "")
        for r in shown
        if r.bandwidth is not None
    )
    return Finding(
        Severity.INFO,
        device,
        f"{shown[0].label}: pageable copies {figures}: they measure the host's memcpy through a staging buffer, "
        "not the link, and do not decide the verdict. Pin host memory for link speed "
        "(torch: tensor.pin_memory(), DataLoader(pin_memory=True)).",
    )


def failed(found: Sequence[Finding]) -> bool:
    """Exit 1 when something was found: wrong data, a link- or memory-bound figure below expected,
    a task that failed, a run cut short. Information alone (pageable figures, a slot-limited GPU)
    is not a failure."""
    return any(f.severity is not Severity.INFO for f in found)


def _advice(row: Row) -> str:
    if slower(row.link, row.max_link):
        return " Reseat the GPU or check its slot and riser; `nvidia-smi -q -d PCIE` shows the link."
    if row.placement is not None and row.placement.placement.may_be_remote and row.placement.gpu_node is not None:
        node = row.placement.gpu_node
        return f" Run bound to the GPU's node: `numactl --cpunodebind={node} --membind={node} gpudiag bench-transfer`."
    return ""


def notes(table: Sequence[Row], outcome: Outcome, launch_blocking: bool, requested_peer: bool) -> list[str]:
    """Caveats about the method on this run."""
    out: list[str] = []
    remote = sorted(
        {r.placement.detail for r in table if r.placement is not None and r.placement.placement.may_be_remote}
    )
    out.extend(remote)
    if not outcome.spin_kernel:
        out.append("no spin kernel in this torch: the host's enqueue cost is inside the CUDA-event windows")
    else:
        short = [r for r in table if r.spin_short]
        if short:
            out.append(f"{len(short)} figure(s) had samples whose enqueue outlasted the spin kernel: they may read low")
    if launch_blocking:
        out.append("CUDA_LAUNCH_BLOCKING=1: every copy is issued synchronously, asynchronous figures read low")
    if requested_peer and len(outcome.devices) < 2 and outcome.devices:
        out.append("peer modes need two or more GPUs: none measured")
    small = sorted({size_text(r.task.nbytes) for r in table if r.judgement.note.startswith(("below the", "under 8x"))})
    if small and len(small) < 6:
        out.append(f"not judged at {', '.join(small)}: below the bandwidth plateau or inside the L2 cache")
    return out


@dataclass(frozen=True)
class Judged:
    """A run judged: its rows, the NVML GPU behind each torch device, the findings and the notes."""

    rows: list[Row]
    gpus: dict[int, Gpu | None]
    findings: list[Finding]
    notes: list[str]


def judge_run(
    outcome: Outcome, machine_gpus: Sequence[Gpu], explicit_peer: bool, launch_blocking: bool = False
) -> Judged:
    """The whole judgement of a run (``explicit_peer``: peer modes were asked for by name)."""
    from gpudiag.bench.preflight import match_gpu

    gpus = {d.ordinal: match_gpu(d.uuid, d.pci_bus_id, machine_gpus) for d in outcome.devices}
    judged = rows(outcome, gpus)
    return Judged(judged, gpus, findings(judged, outcome), notes(judged, outcome, launch_blocking, explicit_peer))
