"""Hardware acceptance in one command: gpudiag against the machine itself, every field and label.

    python -m tests.acceptance OUTDIR            # on a machine with NVIDIA GPUs: capture, then compare
    python -m tests.acceptance OUTDIR --offline  # anywhere: against every capture in docs/hardware

On a GPU machine it runs ``tests/hardware/capture.sh OUTDIR`` (a capture bundle in the layout of
``docs/hardware/h100-80gb-hbm3-driver580/``: nvidia-smi's views, every ``--query-gpu`` field, the raw
NVML getters with platform info, structs and GPM samples, and gpudiag's output of the same moment
beside each), then holds gpudiag to it:

- every ``--query-gpu`` field, every ``-q`` label (in order) and value, ``-q -x``'s elements and
  values, the ``nvidia-smi`` table's cells, ``-L``; ``dmon`` / ``pmon`` columns;
- ``visible`` against what CUDA enumerates in a child for each CUDA_VISIBLE_DEVICES value;
- ``bench-transfer`` against a plain copy loop (``benchmarks/reference_copy.py``: within 5 %);
- ``check`` and the deep level (``check --level 2`` once, its result shared with
  ``tests/test_deep_gpu.py``, which adds the stress).

A part that cannot run there (a gpudiag output that crashed, a reference or child that crashes, a
deep test that skips for any reason but one GPU's missing peer) is a FAIL with its error, and the
whole run must take at most 6 minutes on one GPU (:data:`BUDGET_S`, each part's share in
:data:`PART_BUDGETS_S`).

Offline (CI, no GPU) it does the same for every capture folder in ``docs/hardware`` (:data:`CAPTURES`),
against gpudiag's replays of the example machines built from it, skipping what needs a GPU.
Either way it writes ``OUTDIR/acceptance-summary.txt``: each check's counts and every difference
with its class (``moment``: a reading that changes from one moment to the next, with why; ``not in
NVML``; offline only, ``board`` / ``not recorded``: the H100 captures mix boards of one kind) and
exits 1 when any difference is unexplained (``DIFF``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.hardware import compare as cmp

ROOT = Path(__file__).resolve().parent.parent
HARDWARE = ROOT / "docs" / "hardware"

# What CUDA did with each CUDA_VISIBLE_DEVICES value on the captured H100 (NVML index 0): the
# devices it enumerated (docs/hardware/h100-80gb-hbm3-driver580/README.md, "What CUDA itself did");
# later captures hold it as cuda-visible-devices-truth.tsv.
_UUID = "GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e"
CUDA_TRUTH_H100 = {
    "0": 1,
    "0,1": 1,
    " 0": 1,
    "0abc": 1,
    "+0": 1,
    "00": 1,
    "0,-1": 1,
    "GPU-9f8b": 1,
    _UUID: 1,
    f"{_UUID},0": 1,
    "1": 0,
    "1,0": 0,
    "1x": 0,
    "-1": 0,
    "": 0,
    "GPU-ffff": 0,
    "GPU-": 0,
    "0,0": 0,  # cuInit 101: a repeated device empties the list
}


@dataclass(frozen=True)
class Capture:
    """A capture folder in docs/hardware and the example machines built from its two moments."""

    folder: str
    idle: str
    busy: str
    cuda_truth: dict[str, int] | None = None  # None: the folder's cuda-visible-devices-truth.tsv
    # --query-gpu fields a capture of several boards of one kind cannot hold to one board (compare.OFFLINE_ONLY).
    offline_only: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return HARDWARE / self.folder


# Every capture folder in docs/hardware (tests/test_acceptance.py fails on a folder not listed here).
CAPTURES = (
    Capture(
        "h100-80gb-hbm3-driver580",
        "h100-driver580-idle",
        "h100-driver580-busy",
        CUDA_TRUTH_H100,
        cmp.OFFLINE_ONLY,
    ),
    Capture("h200-driver580", "h200-driver580-idle", "h200-driver580-busy"),
)
CAPTURE = CAPTURES[0].path  # the first capture: the model of a bundle's layout
IDLE, BUSY = CAPTURES[0].idle, CAPTURES[0].busy

# The whole acceptance on a machine with one GPU, and each part's share, in seconds. Estimates from the
# H200's figures (docs/hardware/h200-driver580): capture.sh about 85 s (214 one-field nvidia-smi calls of
# ~33 ms, two 3-sample dmons, `check` 6 s, bench-transfer 10 s, the reference with a default bench run
# ~20 s, the busy workload's start ~10 s, 17 CUDA start-ups); the comparisons ~10 s; `check` 6 s;
# `check --level 2` 50 s measured; the deep tests without level 2 about 92 s (143 s with it).
BUDGET_S = 360.0
PART_BUDGETS_S = {
    "capture.sh": 120.0,
    "comparisons": 20.0,
    "check": 15.0,
    "check --level 2 (deep)": 85.0,
    "tests/test_deep_gpu.py": 120.0,
}
# The one run of `check --level 2` the acceptance makes, shared with tests/test_deep_gpu.py: the
# path of a JSON file {"exit": code, "seconds": s, "stdout": check's --json output}.
LEVEL2_RESULT_ENV = "GPUDIAG_ACCEPTANCE_LEVEL2"
# The only skip a deep test may take on a GPU machine: the all-reduce needs two GPUs.
DEEP_SKIPS_ALLOWED = ("one GPU: nothing to all-reduce across",)


def shared_level_2() -> tuple[int, dict[str, object], float] | None:
    """The acceptance's run of `check --level 2` (exit status, its JSON, seconds), or None when
    this process was not started by the acceptance."""
    path = os.environ.get(LEVEL2_RESULT_ENV)
    if not path:
        return None
    run = json.loads(Path(path).read_text())
    return int(run["exit"]), json.loads(run["stdout"]), float(run["seconds"])


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": os.environ.get("COLUMNS", "160"), "NO_COLOR": "1"}


def gpudiag(
    *args: str, replay: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    head = [sys.executable, "-m", "gpudiag", *(["--replay", replay] if replay else [])]
    return subprocess.run([*head, *args], capture_output=True, text=True, env=env or _env(), cwd=ROOT, timeout=900)


class Bundle:
    """Where each side's output comes from: the files of a capture bundle (online), or a kept
    capture and gpudiag's replays of its example machines, written into OUTDIR (offline)."""

    def __init__(self, out: Path, offline: bool, capture: Capture | None = None) -> None:
        self.out, self.offline = out, offline
        self.capture = capture or CAPTURES[0]
        self.smi_dir = self.capture.path if offline else out
        self.idle, self.busy = (self.capture.idle, self.capture.busy) if offline else (None, None)

    def smi(self, name: str) -> str | None:
        path = self.smi_dir / name
        return path.read_text(errors="replace") if path.exists() else None

    def ours(self, name: str, *args: str, busy: bool = False) -> str:
        """gpudiag's output: captured beside nvidia-smi's (online), or of the replay (offline)."""
        path = self.out / name
        if not self.offline:
            return path.read_text(errors="replace") if path.exists() else ""
        text = gpudiag(*args, replay=self.busy if busy else self.idle).stdout
        path.write_text(text)
        return text


def check_q(b: Bundle) -> list[cmp.Result]:
    results = []
    smi = b.smi("nvidia-smi-q.txt")
    if smi is not None:
        results.append(cmp.compare_q(smi, b.ours("gpudiag-list-q.txt", "list", "-q")))
    for smi_name, ours_name, busy in (
        ("nvidia-smi-q.xml", "gpudiag-list-q.xml", False),
        ("nvidia-smi-q-busy.xml", "gpudiag-list-q-busy.xml", True),
    ):
        smi = b.smi(smi_name)
        if smi is not None:
            result = cmp.compare_xml(smi, b.ours(ours_name, "list", "-q", "-x", busy=busy))
            result.check += f" [{smi_name}]"
            results.append(result)
    return results


def check_query(b: Bundle) -> cmp.Result:
    """Every field: offline, the one-field-at-a-time capture against one gpudiag call; online, one
    nvidia-smi call with every field against one gpudiag call, a moment apart."""
    if b.offline:
        rows = (b.smi_dir / "nvidia-smi-query-gpu-each-field.tsv").read_text().splitlines()
        smi = [tuple(row.split("\t", 1)) for row in rows]
        names = ",".join(name for name, _ in smi)
        ours = cmp.csv_rows(b.ours("gpudiag-query-gpu-all.csv", "list", "--query", names, "--format", "csv,noheader"))
        pairs = [(n, v, o) for (n, v), o in zip(smi, ours[0], strict=True)]
        return cmp.compare_query(pairs, offline=True, exempt=b.capture.offline_only)
    theirs, ours_rows = (
        cmp.csv_rows(b.smi("nvidia-smi-query-gpu-all.csv") or ""),
        cmp.csv_rows(b.ours("gpudiag-query-gpu-all.csv")),
    )
    if len(theirs) < 2 or len(ours_rows) < 2:
        return cmp.Result("--query-gpu (every field)", skipped="a side printed no rows (see the bundle's files)")
    names = [h.split(" [")[0] for h in theirs[0]]
    pairs = [
        (n, t, o)
        for row_t, row_o in zip(theirs[1:], ours_rows[1:], strict=False)
        for n, t, o in zip(names, row_t, row_o, strict=False)
    ]
    return cmp.compare_query(pairs, offline=False)


_CELLS = re.compile(r"(\d+W\s*/\s*\d+W)|(\d+MiB\s*/\s*\d+MiB)|(\d+C)\b|\b(P\d+)\b")


def check_table(b: Bundle) -> cmp.Result:
    """The summary table: the power, memory, temperature and performance cells nvidia-smi shows
    appear, written the same way, in gpudiag's table of the same GPU."""
    result = cmp.Result("list (nvidia-smi's table cells)")
    smi = b.smi("nvidia-smi.txt")
    if smi is None:
        result.skipped = "no nvidia-smi.txt"
        return result
    ours = b.ours("gpudiag-list.txt", "list")
    for match in _CELLS.finditer(smi):
        cell = re.sub(r"\s+", "", match.group())
        result.compared += 1
        if cell not in re.sub(r"\s+", "", ours):
            kind = cmp.MOMENT if cell.endswith("C") or "W" in cell else cmp.DIFF
            reason = "temperature and power change from moment to moment" if kind == cmp.MOMENT else ""
            result.differences.append(cmp.Difference(result.check, "cell", cell, "absent", kind, reason))
    return result


def check_views(b: Bundle) -> list[cmp.Result]:
    out = []
    for command, smi_name, busy in (
        ("dmon", "nvidia-smi-dmon.txt", False),
        ("pmon", "nvidia-smi-pmon-busy.txt", True),
    ):
        check = f"{command} (columns)"
        smi = b.smi(smi_name)
        if smi is None:
            out.append(cmp.Result(check, skipped=f"no {smi_name}"))
        else:
            ours_name = smi_name.replace("nvidia-smi", "gpudiag")
            out.append(cmp.compare_headers(check, smi, b.ours(ours_name, command, "-c", "1", busy=busy)))
    return out


def cuda_truth(path: Path) -> dict[str, int]:
    """What CUDA enumerated for each CUDA_VISIBLE_DEVICES value (cuda-visible-devices-truth.tsv):
    a device count, 0 where cuInit or the count failed."""
    truth = {}
    for line in path.read_text().splitlines():
        value, _, answer = line.partition("\t")
        try:
            found = json.loads(answer)
        except ValueError:
            continue
        truth[value] = int(found.get("count", 0)) if found.get("cuInit") == 0 and found.get("getcount_rc") == 0 else 0
    return truth


def check_visible(b: Bundle) -> cmp.Result:
    """gpudiag's prediction of the devices CUDA enumerates, against CUDA's own answer per value."""
    result = cmp.Result("visible (against CUDA)")
    if b.offline and b.capture.cuda_truth is not None:
        truth = dict(b.capture.cuda_truth)
    else:
        path = b.smi_dir / "cuda-visible-devices-truth.tsv"
        if not path.exists():
            result.skipped = "no cuda-visible-devices-truth.tsv"
            return result
        truth = cuda_truth(path)
    for value, count in truth.items():
        done = gpudiag("visible", "--value", value, "--json", replay=b.idle)
        try:
            predicted = len(json.loads(done.stdout)["devices"])
        except (ValueError, KeyError):
            predicted = -1
        result.compared += 1
        if predicted != count:
            result.differences.append(
                cmp.Difference(result.check, repr(value), f"{count} device(s)", f"{predicted}", cmp.DIFF)
            )
    return result


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def check_bench(b: Bundle) -> cmp.Result:
    """bench-transfer within 5 % of raw cudaMemcpyAsync on the same buffers (reference_copy.py). On a
    GPU machine a reference that gives no figures failed: it is a FAIL with what it said last."""
    result = cmp.Result("bench-transfer (against a plain copy loop)")
    text = b.smi("reference-copy.txt")
    found = re.search(r"largest difference ([\d.]+)%", text or "")
    if found is None:
        said = last_line(text) if text is not None else "reference-copy.txt was not written"
        if b.offline:  # a record of a past run: nothing here can run it again
            result.skipped = f"the capture holds no figures: reference_copy.py said {said!r} (needs a GPU)"
        else:
            result.compared = 1
            result.differences.append(
                cmp.Difference(result.check, "benchmarks/reference_copy.py", "figures", "none", cmp.DIFF, said)
            )
        return result
    result.compared = 1
    if float(found.group(1)) > 5.0:
        result.differences.append(
            cmp.Difference(result.check, "largest difference", "<= 5%", f"{found.group(1)}%", cmp.DIFF)
        )
    return result


_CRASH = re.compile(r"^(gpudiag: internal error: .*|Traceback \(most recent call last\):)$", re.M)


def check_outputs(b: Bundle) -> cmp.Result:
    """No output of gpudiag's in the bundle is a crash: on the H200 every detail view ended in
    ``gpudiag: internal error`` (exit 70), and a comparison of that output is no comparison."""
    result = cmp.Result("gpudiag's own outputs (none crashed)")
    for path in sorted(b.out.glob("gpudiag-*")):
        if not path.is_file():
            continue
        result.compared += 1
        text = path.read_text(errors="replace")
        found = _CRASH.search(text)
        if found is not None:
            said = found.group() if found.group().startswith("gpudiag:") else last_line(text)
            result.differences.append(cmp.Difference(result.check, path.name, "output", "crashed", cmp.DIFF, said))
    return result


def _exit_result(name: str, done: subprocess.CompletedProcess[str]) -> cmp.Result:
    result = cmp.Result(name, compared=1)
    if done.returncode != 0:
        result.differences.append(
            cmp.Difference(
                name, "exit status", "0", str(done.returncode), cmp.DIFF, last_line(done.stderr or done.stdout)
            )
        )
    return result


def run_level_2(out: Path) -> tuple[cmp.Result, Path]:
    """`check --level 2 --json`, once: its result, and the file that shares it with the deep tests."""
    begun = time.monotonic()
    done = gpudiag("check", "--level", "2", "--json")
    seconds = time.monotonic() - begun
    (out / "acceptance-check-level2.log").write_text(done.stdout + done.stderr)
    shared = out / "acceptance-check-level2.json"
    shared.write_text(json.dumps({"exit": done.returncode, "seconds": seconds, "stdout": done.stdout}))
    return _exit_result("check --level 2 (deep)", done), shared


def deep_tests(shared: Path) -> subprocess.CompletedProcess[str]:
    """tests/test_deep_gpu.py with the acceptance's level 2 run given to it (not run again)."""
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        "tests/test_deep_gpu.py",
    ]
    env = {**_env(), LEVEL2_RESULT_ENV: str(shared)}
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)


_SKIPPED = re.compile(r"^SKIPPED \[\d+\] [^:]+:\d+: (?P<why>.*)$", re.M)


def check_deep_tests(done: subprocess.CompletedProcess[str]) -> cmp.Result:
    """The deep tests pass, and none skipped but for a reason :data:`DEEP_SKIPS_ALLOWED` names: on a
    GPU machine a skip (torch without CUDA, a busy GPU) is a test that did not run."""
    result = _exit_result("tests/test_deep_gpu.py", done)
    for why in _SKIPPED.findall(done.stdout):
        result.compared += 1
        if why.strip() not in DEEP_SKIPS_ALLOWED:
            result.differences.append(cmp.Difference(result.check, "skipped", "run", "skipped", cmp.DIFF, why.strip()))
    return result


def check_commands(b: Bundle, timings: dict[str, float] | None = None) -> list[cmp.Result]:
    """`check` (and, on a GPU, the deep level and the deep tests) passes on a healthy machine."""
    timings = {} if timings is None else timings
    begun = time.monotonic()
    done = gpudiag("check", "--quick", replay=b.idle) if b.offline else gpudiag("check")
    timings["check"] = time.monotonic() - begun
    (b.out / "acceptance-check.log").write_text(done.stdout + done.stderr)
    out = [_exit_result("check", done)]
    if b.offline:
        out.append(cmp.Result("check --level 2 (deep)", skipped="needs a GPU"))
        return out
    begun = time.monotonic()
    level2, shared = run_level_2(b.out)
    timings["check --level 2 (deep)"] = time.monotonic() - begun
    begun = time.monotonic()
    done = deep_tests(shared)
    timings["tests/test_deep_gpu.py"] = time.monotonic() - begun
    (b.out / "acceptance-tests_test_deep_gpu.py.log").write_text(done.stdout + done.stderr)
    return [*out, level2, check_deep_tests(done)]


def compare_bundle(b: Bundle, timings: dict[str, float] | None = None) -> list[cmp.Result]:
    b.out.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    results = [*check_q(b), check_query(b), check_table(b), *check_views(b), check_visible(b), check_bench(b)]
    results.append(check_outputs(b))  # online: what capture.sh recorded; offline: the replays just written
    if timings is not None:
        timings["comparisons"] = time.monotonic() - begun
    results += check_commands(b, timings)
    if b.offline:
        for result in results:
            result.check = f"{b.capture.folder}: {result.check}"
            for difference in result.differences:
                difference.check = result.check
    return results


def check_time(timings: dict[str, float]) -> cmp.Result:
    """The whole run within :data:`BUDGET_S`; each part's time beside its share, in the notes."""
    total = sum(timings.values())
    result = cmp.Result(f"time (at most {BUDGET_S:.0f} s on one GPU)", compared=1)
    for part, seconds in timings.items():
        share = PART_BUDGETS_S.get(part)
        over = " (over its share)" if share is not None and seconds > share else ""
        result.notes.append(f"{part} {seconds:.0f} s of its {share or 0:.0f} s{over}")
    if total > BUDGET_S:
        result.differences.append(
            cmp.Difference(result.check, "whole run", f"<= {BUDGET_S:.0f} s", f"{total:.0f} s", cmp.DIFF, "too slow")
        )
    return result


def run(out: Path, offline: bool) -> list[cmp.Result]:
    out.mkdir(parents=True, exist_ok=True)
    if offline:
        results = [r for capture in CAPTURES for r in compare_bundle(Bundle(out / capture.folder, True, capture))]
    else:
        timings: dict[str, float] = {}
        begun = time.monotonic()
        done = subprocess.run(
            ["bash", str(ROOT / "tests" / "hardware" / "capture.sh"), str(out)], cwd=ROOT, env=_env(), timeout=900
        )
        timings["capture.sh"] = time.monotonic() - begun
        if done.returncode != 0:
            print(f"capture.sh exited {done.returncode}; comparing what it wrote", file=sys.stderr)
        results = compare_bundle(Bundle(out, False), timings)
        results.append(check_time(timings))
    (out / "acceptance-summary.txt").write_text(cmp.summary(results))
    return results


def has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.acceptance", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument(
        "--offline", action="store_true", help="against docs/hardware's captures (the default without a GPU)"
    )
    args = parser.parse_args(argv)
    offline = args.offline or not has_gpu()
    results = run(args.outdir, offline)
    sys.stdout.write(cmp.summary(results))
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    raise SystemExit(main(sys.argv[1:]))
