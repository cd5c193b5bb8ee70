"""Small formatting rules shared by the renderers (nvidia-smi's conventions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gpudiag.model import Reading
from gpudiag.render.printable import printable
from gpudiag.units import mib

T = TypeVar("T")

NA = "N/A"


def text(reading: Reading[T], fmt: Callable[[T], str] = str) -> str:
    """The value formatted for a terminal (outside text escaped: render.printable), or ``N/A``
    (nvidia-smi's spelling) when it is missing."""
    return printable(fmt(reading.value)) if reading.value is not None else NA


def missing_note(reading: Reading[Any]) -> str:
    """Why a reading is missing, for footnotes: 'not supported', 'GPU lost', ... (a replay file's
    detail is outside text: escaped)."""
    if reading.reason is None:
        return ""
    return printable(reading.detail) if reading.detail else reading.reason.label


def mib_text(n_bytes: int) -> str:
    """``12815MiB``: whole MiB rounded as nvidia-smi rounds them (see :func:`gpudiag.units.mib`)."""
    return f"{mib(n_bytes)}MiB"


def percent_style(percent: float, warn: float = 70.0, high: float = 90.0) -> str:
    """Colour thresholds for memory/utilization bars and cells."""
    if percent >= high:
        return "red"
    if percent >= warn:
        return "yellow"
    return "green"


def temperature_style(celsius: int, slowdown: int | None) -> str:
    """Red within 5 °C of the GPU's own slowdown threshold, yellow from 80 °C."""
    if slowdown is not None and celsius >= slowdown - 5:
        return "red"
    if celsius >= 80:
        return "yellow"
    return ""
