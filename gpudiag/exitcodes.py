"""The one table of exit codes. Documented in the README; schedulers rely on it.

NVML failures reuse nvidia-smi's codes (which are NVML's error numbers), so scripts
written for nvidia-smi read ours the same way.
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
    GPU_BUSY = 7  # `check --level 2-4`: other processes use the GPUs; the deep tests did not start
    NVML_DRIVER_NOT_LOADED = 9
    NVML_LIBRARY_NOT_FOUND = 12
    GPU_LOST = 15  # at least one GPU is lost; the others were still shown
    NVML_VERSION_MISMATCH = 18
    INTERNAL = 70  # a bug in gpudiag (EX_SOFTWARE); --debug shows the traceback
    OUTPUT_ERROR = 74  # output could not be written: disk full, I/O error (EX_IOERR)
    INTERRUPTED = 130
    NVML_ERROR = 255  # any other NVML failure


NVML_EXIT = {
    NvmlStatus.OK: ExitCode.OK,
    NvmlStatus.LIBRARY_NOT_FOUND: ExitCode.NVML_LIBRARY_NOT_FOUND,
    NvmlStatus.DRIVER_NOT_LOADED: ExitCode.NVML_DRIVER_NOT_LOADED,
    NvmlStatus.VERSION_MISMATCH: ExitCode.NVML_VERSION_MISMATCH,
    NvmlStatus.NO_PERMISSION: ExitCode.NVML_NO_PERMISSION,
    NvmlStatus.ERROR: ExitCode.NVML_ERROR,
}

DESCRIPTIONS = {
    ExitCode.OK: "success (for `check`: every check passed or was skipped)",
    ExitCode.FAILED: "`check` found a failure (or a warning with `--strict`); `report`: a node is not ready or missing",
    ExitCode.USAGE: "usage error: unknown option, bad value, size without a unit, unknown GPU id, a `check` selection "
    "that selects nothing, an unusable or impossible replay file, standard output closed",
    ExitCode.NO_CUDA_DEVICE: "the command needs a usable CUDA device and has none (no torch, CPU-only torch, no GPU); "
    "`visible --probe` when CUDA could not be asked, even where NVML cannot start either",
    ExitCode.NVML_NO_PERMISSION: "NVML: no permission to open /dev/nvidia*",
    ExitCode.CHECK_INCOMPLETE: "`check` could not run a requested check (e.g. the functional test's child could not "
    "start) and nothing failed; the rest is reported",
    ExitCode.REPORT_UNREADABLE: "`report`: a node's file is empty, truncated, malformed or of another schema, and "
    "no node failed or is missing (`report` exits 1 when one did)",
    ExitCode.GPU_BUSY: "`check --level 2`, `3` or `4`: other processes use the GPUs, so nothing was run (the deep "
    "tests would take their memory and compute); `--force` runs them anyway",
    ExitCode.NVML_DRIVER_NOT_LOADED: "NVML: NVIDIA driver not loaded",
    ExitCode.NVML_LIBRARY_NOT_FOUND: "NVML: libnvidia-ml.so.1 not found (no driver installed)",
    ExitCode.GPU_LOST: "a GPU is lost (fallen off the bus): `list`, `memory` and `visible` still print everything, "
    "then one line on stderr names the lost GPU (`check` reports it as a failing check, exit 1; `snapshot` "
    "records it, exit 0)",
    ExitCode.NVML_VERSION_MISMATCH: "NVML: driver/library version mismatch (reboot or reload the modules)",
    ExitCode.INTERNAL: "internal error in gpudiag (a bug: please report it with `--debug` output)",
    ExitCode.OUTPUT_ERROR: "output could not be written (standard output or a file named by an option): disk "
    "full, quota, I/O error; a reader that goes away early (e.g. `head`) is not an error",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C), at any moment, without a traceback (`memory --watch` ends with 0)",
    ExitCode.NVML_ERROR: "any other NVML failure",
}


def markdown_table() -> str:
    """The README's exit-code table; tests/test_docs.py keeps the README in step with it."""
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [f"| {int(code)} | {DESCRIPTIONS[code]} |" for code in ExitCode]
    return "\n".join(rows)
