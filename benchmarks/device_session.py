"""Everything a lent GPU machine should record for issue 35, in one command (docs/hardware/README.md).

    python3 benchmarks/device_session.py OUTDIR [--archive FILE.tgz] [--only STEP,...] [--dry-run]

The steps, in order, each a child process with its own time limit (killed with its children when
it runs over, so a hang in one leaves the others' results), each one's output in ``OUTDIR/STEP.log``:

1. ``preflight`` (15 s): the versions gpudiag runs with (Python, torch, nvidia-ml-py, msgspec,
   typer), ``nvidia-smi -L``; an import that fails here is said before any time is spent.
2. ``acceptance`` (330 s; about 4 minutes on one H200, at most 6 by its own budget):
   ``python -m tests.acceptance OUTDIR/acceptance``, the capture and the comparison with nvidia-smi
   and CUDA, ``check --level 2`` and the deep tests.
3. ``targets`` (120 s; about 75 s): ``benchmarks/bench_gpu_targets.py OUTDIR/targets`` (12 rounds,
   4 of them heavy), gpudiag against nvidia-smi and torch's CUDA start (``targets/gpu-targets.md``).
4. ``call-costs`` (45 s; seconds): ``benchmarks/nvml_call_costs.py``, each NVML C function's CPU
   per call on this driver: the table for ``gpudiag/replay/call_costs.py``.
5. ``exporter`` (60 s; about 20 s): ``benchmarks/bench_exporter.py --live``, a scrape's CPU on
   this machine's GPUs, in process and in a running exporter.

The limits add up to 570 s: the whole session ends inside the device tool's 600 s limit on a
command, with about 6 minutes expected. ``--archive FILE`` writes OUTDIR as a .tgz after every
step (what a killed run leaves is still there); ``OUTDIR/summary.md`` says each step's exit,
time and figures, and is printed at the end. Exit 0: every step exited 0; 1: one did not (a target
missed, a difference, a timeout); 3: no GPU here (nothing run). ``--dry-run`` prints the steps'
commands and limits and runs nothing; ``--replay NAME`` runs the steps that have a replay form on an
example machine (acceptance offline), to try the session without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from bench_gpu_targets import NO_GPU, gpu_absent  # noqa: E402  (a script beside this one)

PREFLIGHT = """
import importlib, importlib.metadata, platform, subprocess, sys
print("python", platform.python_version(), sys.executable)
for name, dist in (("gpudiag", ""), ("pynvml", "nvidia-ml-py"), ("msgspec", "msgspec"), ("typer", "typer"),
                   ("rich", "rich"), ("psutil", "psutil"), ("prometheus_client", "prometheus-client"),
                   ("torch", "torch")):
    try:
        module = importlib.import_module(name)
        version = importlib.metadata.version(dist) if dist else getattr(module, "__version__", "")
        print(name, version, getattr(module, "__file__", ""))
    except Exception as exc:  # a missing wheel: said here, before the steps that need it
        print(name, "NOT IMPORTABLE:", type(exc).__name__, exc)
try:
    import torch
    print("torch.version.cuda", torch.version.cuda, "cuda available", torch.cuda.is_available())
except Exception as exc:
    print("torch: no CUDA check:", exc)
try:
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout.strip())
except (OSError, subprocess.TimeoutExpired) as exc:
    print("nvidia-smi -L:", exc)
"""

PREFLIGHT_SHOWN = "<the versions and nvidia-smi -L>"
# A warm-up round, 8 quick rounds (~1.5 s each on the H200) and 4 with `check` and the torch start
# (~12.5 s each): ~75 s; no round starts after 90 s.
TARGET_ROUNDS = ["--rounds", "12", "--heavy-rounds", "4", "--budget-s", "90"]


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    limit_s: float
    digest: Callable[[str], list[str]]  # the lines of its output the summary keeps


def _last(count: int) -> Callable[[str], list[str]]:
    return lambda text: [line for line in text.splitlines() if line.strip()][-count:]


def _matching(*marks: str) -> Callable[[str], list[str]]:
    return lambda text: [line for line in text.splitlines() if any(mark in line for mark in marks)]


def steps(out: Path, replay: str | None = None) -> list[Step]:
    py = sys.executable
    try_out = ["--replay", replay] if replay else []
    return [
        Step("preflight", [py, "-c", PREFLIGHT], 15, _last(12)),
        Step(
            "acceptance",
            [py, "-m", "tests.acceptance", str(out / "acceptance"), *(["--offline"] if replay else [])],
            330,
            _matching("PASS ", "FAIL ", "SKIP ", "[note]"),
        ),
        Step(
            "targets",
            [py, str(BENCHMARKS / "bench_gpu_targets.py"), str(out / "targets"), *TARGET_ROUNDS, *try_out],
            120,
            _matching("| "),
        ),
        Step(
            "call-costs",
            [py, str(BENCHMARKS / "nvml_call_costs.py"), "--scrapes", "50", *try_out],
            45,
            _matching("mean CPU per call", "nvmlDeviceValidateInforom ", "field-value call of"),
        ),
        Step(
            "exporter",
            [py, str(BENCHMARKS / "bench_exporter.py"), "--live", "--scrapes", "100", *try_out],
            60,
            _last(12),
        ),
    ]


def run_step(step: Step, out: Path) -> tuple[int, float, str]:
    """The step's exit status (124: killed at its limit), seconds and output (also in OUTDIR/NAME.log)."""
    log = out / f"{step.name}.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env["PYTHONUNBUFFERED"] = "1"
    begun = time.monotonic()
    with log.open("w") as sink:
        proc = subprocess.Popen(
            step.argv, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
        try:
            code = proc.wait(step.limit_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its children too: the acceptance's workloads
            proc.wait()
            code = 124
    seconds = time.monotonic() - begun
    text = log.read_text(errors="replace")
    if code == 124:
        with log.open("a") as sink:
            sink.write(f"\ndevice_session: killed at its limit of {step.limit_s:g} s\n")
    return code, seconds, text


def summary_of(results: list[tuple[Step, int, float, str]]) -> str:
    lines = ["# GPU session (`benchmarks/device_session.py`)", ""]
    lines += ["| step | exit | seconds | limit |", "|---|---:|---:|---:|"]
    lines += [f"| {s.name} | {code} | {sec:.0f} | {s.limit_s:g} |" for s, code, sec, _ in results]
    for step, code, _, text in results:
        said = "killed at its limit" if code == 124 else f"exit {code}"
        lines += ["", f"## {step.name} ({said}; all of it in {step.name}.log)", "", "```"]
        lines += step.digest(text) or ["(nothing)"]
        lines += ["```"]
    return "\n".join(lines) + "\n"


def archive(out: Path, path: Path) -> None:
    """OUTDIR as one .tgz (the device tool brings back a few files, two folders deep at most)."""
    partial = path.with_name(path.name + ".part")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    partial.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="device_session.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--archive", type=Path, help="write OUTDIR as this .tgz after every step")
    parser.add_argument("--only", default="", help="comma-separated steps (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps' commands; run nothing")
    parser.add_argument("--replay", help="the steps' replay forms, on this example machine (no GPU needed)")
    args = parser.parse_args(argv)
    todo = steps(args.outdir.resolve(), args.replay)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s.name for s in todo}
        if unknown:
            parser.error(f"no step {', '.join(sorted(unknown))}; the steps: {', '.join(s.name for s in todo)}")
        todo = [s for s in todo if s.name in wanted]
    if args.dry_run:
        for step in todo:
            shown = [PREFLIGHT_SHOWN if arg == PREFLIGHT else arg for arg in step.argv]
            print(f"{step.name} (at most {step.limit_s:g} s): {shlex.join(shown)}")
        print(f"at most {sum(s.limit_s for s in todo):g} s in all")
        return 0
    if not args.replay:
        why = gpu_absent()
        if why is not None:
            print(f"device_session: no GPU here ({why}): nothing run", file=sys.stderr)
            return NO_GPU
    out = args.outdir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for step in todo:
        print(f"device_session: {step.name} (at most {step.limit_s:g} s)", flush=True)
        code, seconds, text = run_step(step, out)
        results.append((step, code, seconds, text))
        (out / "summary.md").write_text(summary_of(results))
        if args.archive:
            archive(out, args.archive)
    sys.stdout.write(summary_of(results))
    return 0 if all(code == 0 for _, code, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
