"""Hardware acceptance in one command: gpudiag against the machine itself, every field and label.

    python -m tests.acceptance OUTDIR            # on a machine with NVIDIA GPUs: capture, then compare
    python -m tests.acceptance OUTDIR --offline  # anywhere: against the captures in docs/hardware

On a GPU machine it runs ``tests/hardware/capture.sh OUTDIR`` (a capture bundle in the layout of
``docs/hardware/h100-80gb-hbm3-driver580/``: nvidia-smi's views, every ``--query-gpu`` field, the raw
NVML getters with platform info, structs and GPM samples, and gpudiag's output of the same moment
beside each), then holds gpudiag to it:

- every ``--query-gpu`` field, every ``-q`` label (in order) and value, ``-q -x``'s elements and
  values, the ``nvidia-smi`` table's cells, ``-L``; ``dmon`` / ``pmon`` columns when this gpudiag has
  those commands (else skipped, saying so);
- ``visible`` against what CUDA enumerates in a child for each CUDA_VISIBLE_DEVICES value;
- ``bench-transfer`` against a plain copy loop (``benchmarks/reference_copy.py``: within 5 %);
- ``check`` and the deep levels (``check --level 2``, ``tests/test_deep_gpu.py``).

Offline (CI, no GPU) it does the same against the H100 captures kept in ``docs/hardware`` and
gpudiag's replays of them (the example machines built from them), skipping what needs a GPU.
Either way it writes ``OUTDIR/acceptance-summary.txt``: each check's counts and every difference
with its class (``moment``: a reading that changes from one moment to the next, with why; ``not in
NVML``; offline only, ``board`` / ``not recorded``: the captures mix boards of one kind) and exits 1
when any difference is unexplained (``DIFF``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.hardware import compare as cmp

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "docs" / "hardware" / "h100-80gb-hbm3-driver580"
IDLE, BUSY = "h100-driver580-idle", "h100-driver580-busy"

# What CUDA did with each CUDA_VISIBLE_DEVICES value on the captured H100 (NVML index 0): the
# devices it enumerated (docs/hardware/h100-80gb-hbm3-driver580/README.md, "What CUDA itself did").
_UUID = "GPU-9f8b87f0-d2d8-bbd9-c100-7ce275f01e3e"
CUDA_TRUTH_OFFLINE = {
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


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": os.environ.get("COLUMNS", "160"), "NO_COLOR": "1"}


def gpudiag(
    *args: str, replay: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    head = [sys.executable, "-m", "gpudiag", *(["--replay", replay] if replay else [])]
    return subprocess.run([*head, *args], capture_output=True, text=True, env=env or _env(), cwd=ROOT, timeout=900)


def has_command(name: str) -> bool:
    return gpudiag(name, "--help").returncode == 0


class Bundle:
    """Where each side's output comes from: the files of a capture bundle (online), or the kept
    captures and gpudiag's replays of them written into OUTDIR (offline)."""

    def __init__(self, out: Path, offline: bool) -> None:
        self.out, self.offline = out, offline
        self.smi_dir = CAPTURE if offline else out

    def smi(self, name: str) -> str | None:
        path = self.smi_dir / name
        return path.read_text(errors="replace") if path.exists() else None

    def ours(self, name: str, *args: str, replay: str = IDLE) -> str:
        """gpudiag's output: captured beside nvidia-smi's (online), or of the replay (offline)."""
        path = self.out / name
        if not self.offline:
            return path.read_text(errors="replace") if path.exists() else ""
        text = gpudiag(*args, replay=replay).stdout
        path.write_text(text)
        return text


def check_q(b: Bundle) -> list[cmp.Result]:
    results = []
    smi = b.smi("nvidia-smi-q.txt")
    if smi is not None:
        results.append(cmp.compare_q(smi, b.ours("gpudiag-list-q.txt", "list", "-q")))
    for smi_name, ours_name, replay in (
        ("nvidia-smi-q.xml", "gpudiag-list-q.xml", IDLE),
        ("nvidia-smi-q-busy.xml", "gpudiag-list-q-busy.xml", BUSY),
    ):
        smi = b.smi(smi_name)
        if smi is not None:
            result = cmp.compare_xml(smi, b.ours(ours_name, "list", "-q", "-x", replay=replay))
            result.check += f" [{smi_name}]"
            results.append(result)
    return results


def check_query(b: Bundle) -> cmp.Result:
    """Every field: offline, the one-field-at-a-time capture against one gpudiag call; online, one
    nvidia-smi call with every field against one gpudiag call, a moment apart."""
    if b.offline:
        rows = (CAPTURE / "nvidia-smi-query-gpu-each-field.tsv").read_text().splitlines()
        smi = [tuple(row.split("\t", 1)) for row in rows]
        names = ",".join(name for name, _ in smi)
        ours = cmp.csv_rows(b.ours("gpudiag-query-gpu-all.csv", "list", "--query", names, "--format", "csv,noheader"))
        return cmp.compare_query([(n, v, o) for (n, v), o in zip(smi, ours[0], strict=True)], offline=True)
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
    for command, smi_name, replay in (
        ("dmon", "nvidia-smi-dmon.txt", IDLE),
        ("pmon", "nvidia-smi-pmon-busy.txt", BUSY),
    ):
        check = f"{command} (columns)"
        smi = b.smi(smi_name)
        if not has_command(command):
            out.append(
                cmp.Result(check, skipped=f"`gpudiag {command}` is not in this build (the views branch adds it)")
            )
        elif smi is None:
            out.append(cmp.Result(check, skipped=f"no {smi_name}"))
        else:
            ours_name = smi_name.replace("nvidia-smi", "gpudiag")
            out.append(cmp.compare_headers(check, smi, b.ours(ours_name, command, "-c", "1", replay=replay)))
    return out


def check_visible(b: Bundle) -> cmp.Result:
    """gpudiag's prediction of the devices CUDA enumerates, against CUDA's own answer per value."""
    result = cmp.Result("visible (against CUDA)")
    if b.offline:
        truth = dict(CUDA_TRUTH_OFFLINE)
    else:
        path = b.out / "cuda-visible-devices-truth.tsv"
        if not path.exists():
            result.skipped = "no cuda-visible-devices-truth.tsv"
            return result
        truth = {}
        for line in path.read_text().splitlines():
            value, _, answer = line.partition("\t")
            try:
                found = json.loads(answer)
            except ValueError:
                continue
            truth[value] = (
                int(found.get("count", 0)) if found.get("cuInit") == 0 and found.get("getcount_rc") == 0 else 0
            )
    for value, count in truth.items():
        done = gpudiag("visible", "--value", value, "--json", replay=IDLE if b.offline else None)
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


def check_bench(b: Bundle) -> cmp.Result:
    """bench-transfer within 5 % of raw cudaMemcpyAsync on the same buffers (reference_copy.py)."""
    result = cmp.Result("bench-transfer (against a plain copy loop)")
    text = b.smi("reference-copy.txt")
    found = re.search(r"largest difference ([\d.]+)%", text or "")
    if found is None:
        result.skipped = "reference_copy.py gave no figures (no CUDA device, or no CuPy/libcudart)"
        return result
    result.compared = 1
    if float(found.group(1)) > 5.0:
        result.differences.append(
            cmp.Difference(result.check, "largest difference", "<= 5%", f"{found.group(1)}%", cmp.DIFF)
        )
    return result


def check_commands(b: Bundle) -> list[cmp.Result]:
    """`check` (and, on a GPU, the deep levels) passes on a healthy machine."""
    out = []
    runs: list[tuple[str, Callable[[], subprocess.CompletedProcess[str]]]] = [
        ("check", lambda: gpudiag("check", "--quick", replay=IDLE) if b.offline else gpudiag("check")),
    ]
    if b.offline:
        out.append(cmp.Result("check --level 2 (deep)", skipped="needs a GPU"))
    else:
        runs.append(("check --level 2 (deep)", lambda: gpudiag("check", "--level", "2")))
        runs.append(
            (
                "tests/test_deep_gpu.py",
                lambda: subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-m",
                        "gpu",
                        "-p",
                        "no:cacheprovider",
                        "tests/test_deep_gpu.py",
                    ],
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                    env=_env(),
                    timeout=1800,
                ),
            )
        )
    for name, run in runs:
        done = run()
        (b.out / f"acceptance-{name.split()[0].replace('/', '_')}.log").write_text(done.stdout + done.stderr)
        result = cmp.Result(name, compared=1)
        if done.returncode != 0:
            result.differences.append(
                cmp.Difference(name, "exit status", "0", str(done.returncode), cmp.DIFF, done.stderr.strip()[-200:])
            )
        out.append(result)
    return out


def run(out: Path, offline: bool) -> list[cmp.Result]:
    out.mkdir(parents=True, exist_ok=True)
    if not offline:
        done = subprocess.run(
            ["bash", str(ROOT / "tests" / "hardware" / "capture.sh"), str(out)], cwd=ROOT, env=_env(), timeout=1800
        )
        if done.returncode != 0:
            print(f"capture.sh exited {done.returncode}; comparing what it wrote", file=sys.stderr)
    b = Bundle(out, offline)
    results = [
        *check_q(b),
        check_query(b),
        check_table(b),
        *check_views(b),
        check_visible(b),
        check_bench(b),
        *check_commands(b),
    ]
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
