"""The one table of exit codes. Documented in docs/exit-codes.md; schedulers rely on it.

NVML failures reuse nvidia-smi's codes (which are NVML's error numbers), so scripts
written for nvidia-smi read ours the same way. A signal N ends every command with 128 + N,
as a shell reports a process the signal killed (gpudiag.edge gives them; it cannot import
this module, so a test keeps its numbers equal to these).
"""

from __future__ import annotations

import enum

from gpudiag.model import NvmlStatus


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1  # a check failed, or a watched condition fired
    USAGE = 2  # bad option or input
    NO_CUDA_DEVICE = 3  # the command needs a usable CUDA device and there is none
    NVML_NO_PERMISSION = 4
    CHECK_INCOMPLETE = 5  # `check` could not run a requested check; the rest was reported
    REPORT_UNREADABLE = 6  # `report`: a node file could not be read, and every readable node is ready
    NOT_FOUND = 6  # the nvidia-smi views: no GPU (or no MIG-enabled GPU, no instance) to show: nvidia-smi's 6
    NOTHING_CHECKED = 7  # `check`: every selected check was skipped; nothing was verified
    GPU_BUSY = 8  # `check --level 2-4`: other processes use the GPUs; the deep tests did not start
    NVML_DRIVER_NOT_LOADED = 9
    NVML_LIBRARY_NOT_FOUND = 12
    GPU_LOST = 15  # at least one GPU is lost; the others were still shown
    NVML_VERSION_MISMATCH = 18
    INTERNAL = 70  # a bug in gpudiag (EX_SOFTWARE); --debug shows the traceback
    OUTPUT_ERROR = 74  # output could not be written: disk full, I/O error (EX_IOERR)
    HANGUP = 129  # 128 + SIGHUP
    INTERRUPTED = 130  # 128 + SIGINT
    TERMINATED = 143  # 128 + SIGTERM
    NVML_ERROR = 255  # any other NVML failure


# `check`'s verdict for each exit status it ends a run with.
CHECK_VERDICTS = {
    ExitCode.OK: "READY",
    ExitCode.FAILED: "NOT READY",
    ExitCode.CHECK_INCOMPLETE: "UNKNOWN",
    ExitCode.NOTHING_CHECKED: "UNKNOWN",
}


def check_code(failed: bool, could_not_run: bool, verified: bool) -> ExitCode:
    """`check`'s verdict as its exit status: the one rule wherever a verdict is read (`check`, a
    node file in `report` and `drain`). A failure is FAILED; else what could not run is
    CHECK_INCOMPLETE; else a run that verified nothing (every check skipped, or none) is
    NOTHING_CHECKED, never OK."""
    if failed:
        return ExitCode.FAILED
    if could_not_run:
        return ExitCode.CHECK_INCOMPLETE
    return ExitCode.OK if verified else ExitCode.NOTHING_CHECKED


NVML_EXIT = {
    NvmlStatus.OK: ExitCode.OK,
    NvmlStatus.LIBRARY_NOT_FOUND: ExitCode.NVML_LIBRARY_NOT_FOUND,
    NvmlStatus.DRIVER_NOT_LOADED: ExitCode.NVML_DRIVER_NOT_LOADED,
    NvmlStatus.VERSION_MISMATCH: ExitCode.NVML_VERSION_MISMATCH,
    NvmlStatus.NO_PERMISSION: ExitCode.NVML_NO_PERMISSION,
    NvmlStatus.ERROR: ExitCode.NVML_ERROR,
}

DESCRIPTIONS = {
    ExitCode.OK: "success; for `check`: READY, no check failed (nor warned, with `--strict`) and at least one "
    "was not skipped",
    ExitCode.FAILED: "`check` found a failure (or a warning with `--strict`); `report`: a node is not ready or missing",
    ExitCode.USAGE: "usage error: unknown option; bad value (a size without a unit; seconds that are not a finite "
    "number above 0 and at most a year); a selection that matches nothing (`--id`, `--select`, `check --only`/"
    "`--skip`: the message names what exists); an unusable or impossible replay file, or a replay name too long to be "
    "a path; a file option's path that cannot be written (no such directory, permission denied); standard output "
    "closed",
    ExitCode.NO_CUDA_DEVICE: "the command needs a usable CUDA device and has none (no torch, CPU-only torch, no GPU); "
    "`visible --probe` when CUDA could not be asked, even where NVML cannot start either",
    ExitCode.NVML_NO_PERMISSION: "NVML: no permission to open /dev/nvidia*",
    ExitCode.CHECK_INCOMPLETE: "`check` could not run a requested check (e.g. the functional test's child could not "
    "start) and nothing failed; the rest is reported",
    ExitCode.REPORT_UNREADABLE: "`report`: a node's file is not exactly one valid gpudiag output (empty, truncated, "
    "two runs in one file, stderr mixed in, another schema, an invalid node name, not a regular file), and no node "
    "is not ready or missing (`report` exits 1 when one is); `dmon`, `pmon`, `topo`, `nvlink`, `mig`, `stat`: "
    'nothing to show, as nvidia-smi exits 6 for it: no GPU ("No devices were found"), no MIG-enabled GPU, no '
    "GPU or compute instance",
    ExitCode.NOTHING_CHECKED: "`check`: every selected check was skipped (e.g. `--only func` where CUDA cannot run, "
    "`--only compat.torch --no-torch`): nothing was verified, so the verdict is UNKNOWN, never READY (5 when a "
    "requested check could not run as well)",
    ExitCode.GPU_BUSY: "`check --level 2`, `3` or `4`: other processes use the GPUs, so nothing was run (the deep "
    "tests would take their memory and compute); `--force` runs them anyway",
    ExitCode.NVML_DRIVER_NOT_LOADED: "NVML: NVIDIA driver not loaded",
    ExitCode.NVML_LIBRARY_NOT_FOUND: "NVML: libnvidia-ml.so.1 not found (no driver installed)",
    ExitCode.GPU_LOST: "a GPU is lost (fallen off the bus): `list`, `memory` and `visible` still print everything, "
    "then one line on stderr names the lost GPU; the nvidia-smi views (`dmon`, `pmon`, `topo`, `nvlink`, `mig`, "
    "`stat`) first print nvidia-smi's line for it on stderr (\"Unable to determine the device handle for GPU2: "
    '…"), then the other GPUs (`check` reports it as a failing check, exit 1; `snapshot` records it, exit 0)',
    ExitCode.NVML_VERSION_MISMATCH: "NVML: driver/library version mismatch (reboot or reload the modules)",
    ExitCode.INTERNAL: "internal error in gpudiag (a bug: please report it with `--debug` output)",
    ExitCode.OUTPUT_ERROR: "output could not be written: standard output, or a file an option names (`snapshot -o`, "
    "`--junit`, `--textfile`, `memory --log`): disk full, quota, file too large, I/O error. The file is as it was "
    "(a log keeps its last whole sample) and no temporary file remains. A reader that goes away early (e.g. `head`) "
    "is not an error; standard error that cannot be written never changes the exit code",
    ExitCode.HANGUP: "SIGHUP (the terminal closed), at any moment; the same clean-up as for 130",
    ExitCode.INTERRUPTED: "SIGINT (Ctrl-C), at any moment, in every command, a watch or a wait (`memory "
    "--until-free`) included: children stopped, the terminal restored, partly written files removed, no traceback",
    ExitCode.TERMINATED: "SIGTERM (`kill`, `timeout`, systemd, the kubelet), at any moment, `exporter` included; the "
    "same clean-up as for 130",
    ExitCode.NVML_ERROR: "any other NVML failure",
}


def markdown_table() -> str:
    """The exit-code table of docs/exit-codes.md; tests/test_docs.py keeps that page in step with it."""
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [f"| {int(code)} | {DESCRIPTIONS[code]} |" for code in ExitCode]
    return "\n".join(rows)
