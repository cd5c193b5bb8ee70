"""Which GPUs a CUDA program will see, and as which ``cuda:N`` — computed, not probed.

A pure function of the machine (NVML facts) and the two variables CUDA reads once, when it
initialises: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. The rules are NVIDIA's documented
ones:

- CUDA Programming Guide, "CUDA Environment Variables": unset means every device, empty means
  none; a comma-separated list of integer indices or ``GPU-`` UUIDs (abbreviated to any unique
  prefix), enumerated in the order of the list; at an invalid index only the devices before it
  are visible (``0,2,-1,1`` → 0 and 2); ``CUDA_DEVICE_ORDER`` is ``FASTEST_FIRST`` (the default,
  "a simple heuristic") or ``PCI_BUS_ID`` (ascending PCI bus id).
- MIG User Guide, "CUDA Device Enumeration": ``MIG-<uuid>`` (R470+) or
  ``MIG-GPU-<uuid>/<GI>/<CI>``; a process enumerates one MIG instance ("the first one available")
  and no non-MIG GPU once an instance is enumerated; NVIDIA says future drivers may relax this.

Where CUDA's behaviour is not documented (how a token is read character by character, repeated
devices, blanks and case in UUIDs, lost GPUs, the FASTEST_FIRST heuristic) the result says so in
``Resolution.undocumented`` instead of guessing silently, and ``gpudiag visible --probe`` asks the
real runtime.

PyTorch reads the variable itself too (``torch.cuda._parse_visible_devices`` and friends, used by
``torch.cuda.device_count()`` before CUDA initialises and by its NVML-based queries), and not
always as CUDA does: :func:`pytorch_view` reproduces its reading so the differences can be shown.
"""

from gpudiag.visibility.entries import parse_token, parse_value
from gpudiag.visibility.exports import Target, export_line, export_lines, select_targets
from gpudiag.visibility.hints import code_hints
from gpudiag.visibility.order import enumeration_order
from gpudiag.visibility.probe_report import ProbedDevice, ProbeReport, ProbeSource, probe_failed, probe_report
from gpudiag.visibility.pytorch import pytorch_view
from gpudiag.visibility.result import (
    C_BLANKS,
    DEFAULT_ORDER,
    NARROWING_NOTES,
    ORDER_VAR,
    ORDERS,
    SUMMARY_KIND,
    VISIBLE_VAR,
    Entry,
    Outcome,
    PytorchView,
    Resolution,
    Token,
    TokenKind,
    TorchNvmlIndex,
    VisibleDevice,
    shown_value,
)
from gpudiag.visibility.rules import resolve

__all__ = [
    "C_BLANKS",
    "DEFAULT_ORDER",
    "NARROWING_NOTES",
    "ORDERS",
    "ORDER_VAR",
    "SUMMARY_KIND",
    "VISIBLE_VAR",
    "Entry",
    "Outcome",
    "ProbeReport",
    "ProbeSource",
    "ProbedDevice",
    "PytorchView",
    "Resolution",
    "Target",
    "Token",
    "TokenKind",
    "TorchNvmlIndex",
    "VisibleDevice",
    "code_hints",
    "enumeration_order",
    "export_line",
    "export_lines",
    "parse_token",
    "parse_value",
    "probe_failed",
    "probe_report",
    "pytorch_view",
    "resolve",
    "select_targets",
    "shown_value",
]
