"""CPU cost of one `gpudiag exporter` scrape, measured as `bench_memory_watch.py` measures a refresh.

One scrape = what Prometheus's GET /metrics costs the exporter: read every GPU through the NVML
source (the fake NVML replaying the 8-GPU / 64-process example, handles kept as in the running
exporter), the session's validity check, the memory view with the tracker's entries, the
NVML-only health checks, the attribution of every process, and the text exposition of every
family (prometheus-client's generate_latest). Both families; then with psutil and /proc
attribution over 64 real processes of this machine (what a live exporter pays per PID).
CPU time (time.process_time) per scrape: median and p90 after 5 warm-up scrapes, in each of
--rounds interleaved rounds; the round with the lowest median is shown (on a shared machine other
jobs only ever add time). The rows read once a minute (exporter.SLOW_KEYS) are read by the first
scrape of a run; "with the slow rows" is a scrape that reads them too (every 4th at a 15 s scrape
interval). Target: <= 5 ms of CPU per scrape.

``--nvml-costs h200``: each NVML call of the fake costs what it cost on the H200
(gpudiag.replay.call_costs: ~0.31 ms of CPU a call), so the figures are what the real driver charges.

``--live`` (on a GPU machine): the machine's own GPUs and processes, not the example. The same
scrape in this process (native and dcgm, /proc attribution as a running exporter's, medians of the
best round; and one with the slow rows), then a running ``gpudiag exporter`` scraped over HTTP
--scrapes times after 5 warm-up scrapes, its CPU read from /proc/PID/stat before and after (how the
H200's 12.2 ms a scrape was taken: runs/exporter-cpu.txt beside its capture). The target is the
issue's, for 8 GPUs and 64 processes: a machine with fewer is measured as it is, with the figure per
GPU; over the target there is over (exit 1), under it is not decided (exit 4), as a node of 8 GPUs
costs more. Without a GPU it says so in one line, exit 3.
``--live --replay NAME`` runs the same steps on an example machine (to try them without a GPU: the
figures are then the fake's).

Usage: python benchmarks/bench_exporter.py [--scrapes N] [--rounds N] [--nvml-costs h200 | --live [--replay NAME]]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry, generate_latest

from gpudiag.export.attribution import ProcReader
from gpudiag.export.exporter import Attributor, Exporter
from gpudiag.model import FactGroup, Machine, Reading
from gpudiag.probe.collect import MachineSource
from gpudiag.probe.host import PsutilHost
from gpudiag.replay.call_costs import ENV as COSTS_ENV
from gpudiag.replay.fake_nvml import FakeNvml
from gpudiag.replay.fixtures import load
from gpudiag.sources import open_source

TARGET_MS = 5.0
FULL_GPUS, FULL_PROCS = 8, 64  # the node issue 35's target is set for
LIVE_UNDECIDED = 4  # --live under the target on fewer GPUs or processes than that: not a pass
EXAMPLE = "h100x8-training-64procs"


def _cpu_ms(costs: list[float]) -> tuple[float, float]:
    body = sorted(costs[5:])  # after warm-up
    return statistics.median(body) * 1000, body[int(len(body) * 0.9)] * 1000


def _scrapes(exporter: Exporter, scrapes: int) -> tuple[list[float], int]:
    costs = []
    size = 0
    for _ in range(scrapes):
        start = time.process_time()
        size = len(exporter.render_text())  # what GET /metrics runs
        costs.append(time.process_time() - start)
    return costs, size


def _reference(exporter: Exporter, scrapes: int) -> list[float]:
    """The same scrape rendered by prometheus-client's generate_latest (OpenMetrics-less path)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    costs = []
    for _ in range(scrapes):
        start = time.process_time()
        generate_latest(registry)
        costs.append(time.process_time() - start)
    return costs


def _slow_scrapes(exporter: Exporter, scrapes: int) -> float:
    """Median CPU ms of a scrape that also reads the rows kept for a minute (exporter.SLOW_KEYS)."""
    costs = []
    for _ in range(scrapes):
        exporter.source.session.forget_slow()
        start = time.process_time()
        exporter.render_text()
        costs.append(time.process_time() - start)
    return statistics.median(costs) * 1000


def _steady_calls(compat: str) -> int:
    """NVML calls of a steady scrape, as the fake counts them: the first asks what cannot change while
    the driver is loaded, the next few allocate GPM's samples (a fresh source: the fake keeps only its
    latest calls)."""
    with open_source(EXAMPLE) as counted:
        exporter = Exporter(counted, compat=compat, hostname="bench")
        for _ in range(5):
            exporter.render_text()
        before = len(counted.lib.calls)
        exporter.render_text()
        return len(counted.lib.calls) - before


def _with_pids(machine: Machine, pids: list[int]) -> Machine:
    """The example with its 64 processes renamed to real PIDs of this machine."""
    it = iter(pids)
    gpus = []
    for gpu in machine.gpus:
        procs = tuple(msgspec.structs.replace(p, pid=next(it)) for p in gpu.processes.get(()))
        gpus.append(msgspec.structs.replace(gpu, processes=Reading.of(procs)))
    return msgspec.structs.replace(machine, gpus=tuple(gpus))


def _best(rounds: list[tuple[list[float], int]]) -> tuple[float, float, int]:
    """The round with the lowest median: (median ms, p90 ms, exposition bytes)."""
    figures = [(*_cpu_ms(costs), size) for costs, size in rounds]
    return min(figures)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nvml-costs", default="", help="charge each fake NVML call its cost on this driver (h200)")
    parser.add_argument("--live", action="store_true", help="this machine's GPUs (needs a GPU)")
    parser.add_argument("--replay", help="with --live: an example machine in place of this one's GPUs")
    args = parser.parse_args()
    if args.live:
        return live(args.scrapes, args.rounds, args.replay)
    if args.nvml_costs:
        os.environ[COSTS_ENV] = args.nvml_costs  # every fake made below reads it
    system = f"{platform.system()} {platform.release()}"
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {system}, python {platform.python_version()}")
    print(
        f"`gpudiag exporter`, {EXAMPLE} (8 GPUs, 64 processes), {args.scrapes} scrapes x {args.rounds} rounds, "
        "CPU time per scrape (best round):"
    )
    print(f"  NVML call costs: {args.nvml_costs or 'none (the fake answers in microseconds)'}")
    machine = load(EXAMPLE)[0]
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(64)]
    results: dict[str, list[tuple[list[float], int]]] = {}
    try:
        live_like = MachineSource(
            name="bench",
            lib=FakeNvml(_with_pids(machine, [c.pid for c in children])),
            host=PsutilHost(in_container=False),
            host_info=machine.host,
            env=machine.env,
            torch_build=machine.torch_build,
            kernel_module_version=machine.nvml.kernel_module_version,
        )
        with open_source(EXAMPLE) as source, open_source(EXAMPLE) as dcgm_source, live_like:
            exporters = {
                "native, recorded host": Exporter(source, hostname="bench"),
                "dcgm, recorded host": Exporter(dcgm_source, compat="dcgm", hostname="bench"),
                "native, psutil + /proc attribution, 64 real PIDs": Exporter(
                    live_like, attributor=Attributor(ProcReader(Path("/proc")), None), hostname="bench"
                ),
            }
            for _ in range(args.rounds):  # interleaved, so a disturbance spreads over every variant
                for label, exporter in exporters.items():
                    results.setdefault(label, []).append(_scrapes(exporter, args.scrapes))
            reference, _ = _cpu_ms(_reference(exporters["native, recorded host"], args.scrapes))
            slow = _slow_scrapes(exporters["native, recorded host"], max(20, args.scrapes // 10))
        calls = {compat: _steady_calls(compat) for compat in ("native", "dcgm")}
    finally:
        for child in children:
            child.kill()
            child.wait()
    ok = True
    for label, rounds in results.items():
        median, p90, size = _best(rounds)
        ok &= median <= TARGET_MS
        print(f"  {label:50s} median {median:5.2f} ms  p90 {p90:5.2f} ms  ({size / 1024:.0f} KiB exposition)")
    print(f"  (native rendered by prometheus-client's generate_latest instead: median {reference:5.2f} ms)")
    print(f"  native scrape with the slow rows (once a minute, and after an Xid): median {slow:5.2f} ms")
    print(
        f"  NVML calls per steady scrape: native {calls['native']}, dcgm {calls['dcgm']} "
        "(handles and fixed facts fetched once, at start; GPM's samples allocated)"
    )
    print(f"  target <= {TARGET_MS:g} ms of CPU per scrape: {'OK' if ok else 'OVER TARGET'}")
    return 0 if ok else 1


def live(scrapes: int, rounds: int, replay: str | None = None) -> int:
    """The scrape's CPU on this machine's own GPUs (or ``replay``'s): in this process, then a running exporter's."""
    from bench_gpu_targets import NO_GPU, gpu_absent

    why = None if replay else gpu_absent()
    if why is not None:
        print(f"bench_exporter --live: no GPU here ({why}): nothing measured", file=sys.stderr)
        return NO_GPU
    system = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.release()}"
    print(f"machine: {system}, python {platform.python_version()}; NVML: {f'replay of {replay}' if replay else 'live'}")
    attributor = Attributor(ProcReader(Path("/proc")), None)
    results: dict[str, list[tuple[list[float], int]]] = {}
    with open_source(replay, facts=frozenset({FactGroup.PROCESSES})) as counting:
        machine = counting.read()
    gpus = len(machine.gpus)
    procs = sum(len(g.processes.get(())) for g in machine.gpus)
    with open_source(replay) as source, open_source(replay) as dcgm_source:
        exporters = {
            "native": Exporter(source, hostname="bench", attributor=attributor),
            "dcgm": Exporter(dcgm_source, compat="dcgm", hostname="bench", attributor=attributor),
        }
        for _ in range(rounds):
            for label, exporter in exporters.items():
                results.setdefault(label, []).append(_scrapes(exporter, scrapes))
        slow = _slow_scrapes(exporters["native"], max(20, scrapes // 10))
    print(f"`gpudiag exporter` on this machine: {gpus} GPU(s), {procs} GPU process(es) when read; CPU per scrape")
    print(f"  in this process, {scrapes} scrapes x {rounds} rounds (best round):")
    for label, rounds_of in results.items():
        median, p90, size = _best(rounds_of)
        print(f"    {label:8s} median {median:6.2f} ms  p90 {p90:6.2f} ms  ({size / 1024:.0f} KiB exposition)")
    print(f"    native with the slow rows (once a minute): median {slow:6.2f} ms")
    print(f"  a running `gpudiag exporter`, {scrapes} scrapes over HTTP after 5 warm-up:")
    served = {compat: _served_cpu_ms(compat, scrapes, replay) for compat in ("native", "dcgm")}
    for compat, ms in served.items():
        print(f"    {compat:8s} {ms:6.2f} ms CPU per scrape")
    median = _best(results["native"])[0]
    verdict, code = live_verdict(max(median, served["native"]), gpus, procs)
    print(f"  per GPU: {median / max(gpus, 1):.2f} ms in process, {served['native'] / max(gpus, 1):.2f} ms running")
    print(f"  target <= {TARGET_MS:g} ms of CPU per scrape for {FULL_GPUS} GPUs and {FULL_PROCS} processes: {verdict}")
    return code


def live_verdict(ms: float, gpus: int, procs: int) -> tuple[str, int]:
    """The target is for a full node: over it on fewer GPUs is over (exit 1), under it on fewer is not a
    pass (exit 4, LIVE_UNDECIDED), met on a full node is (exit 0)."""
    if ms > TARGET_MS:
        return f"OVER TARGET ({ms:.2f} ms on {gpus} GPU(s), {procs} process(es))", 1
    if gpus < FULL_GPUS or procs < FULL_PROCS:
        return (
            f"not decided: {ms:.2f} ms on {gpus} GPU(s) and {procs} process(es), fewer than the target's",
            LIVE_UNDECIDED,
        )
    return f"OK ({ms:.2f} ms)", 0


def _served_cpu_ms(compat: str, scrapes: int, replay: str | None) -> float:
    """CPU ms per scrape of a running exporter (live NVML), from /proc/PID/stat around ``scrapes`` GETs."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entry = "import sys; from gpudiag.entry import main; sys.exit(main())"
    argv = [sys.executable, "-c", entry, *(["--replay", replay] if replay else []), "exporter", "--port", str(port)]
    argv += ["--no-kubelet", "--compat", compat]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(300):  # wait for it to listen (30 s at most)
            if proc.poll() is not None:
                raise SystemExit(f"bench_exporter: `gpudiag exporter --compat {compat}` exited {proc.returncode}")
            try:
                urllib.request.urlopen(url, timeout=10).read()
                break
            except OSError:
                time.sleep(0.1)
        for _ in range(5):
            urllib.request.urlopen(url, timeout=10).read()
        before = _proc_cpu_s(proc.pid)
        for _ in range(scrapes):
            urllib.request.urlopen(url, timeout=10).read()
        return (_proc_cpu_s(proc.pid) - before) / scrapes * 1000
    finally:
        proc.terminate()
        proc.wait()


def _proc_cpu_s(pid: int) -> float:
    """User + system seconds of a process, all its threads, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
