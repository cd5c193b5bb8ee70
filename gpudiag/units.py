"""Sizes and durations as users write them (``20GiB``, ``512MB``, ``1.5G``, ``10m``), checked as options take
them, and sizes as nvidia-smi shows them."""

from __future__ import annotations

import math
import re

from gpudiag.errors import UsageError
from gpudiag.parsing import shorten

_UNITS = {
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
# Patterns compiled where first used (re's own cache): most commands parse no size nor duration,
# and compiling both costs what importing a small module does.
_SIZE = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$"


def parse_size(text: str) -> int:
    """Bytes from a size. Bare letters (``20G``) are binary, as nvidia-smi's MiB are.

    Strict on purpose: ``20GX``, ``-1G``, ``nan`` are errors, not zero; and a number needs its
    unit (``80`` is more likely 80 GiB than 80 bytes), except ``0``. Bytes are ``B``.
    """
    match = re.match(_SIZE, text)
    if not match:
        raise UsageError(f"invalid size {shorten(text)!r}: use a number and a unit, e.g. 20GiB, 512MiB, 1.5G")
    number, unit = match.groups()
    if not unit:
        if float(number) == 0:
            return 0
        raise UsageError(f"size {text.strip()!r} needs a unit, e.g. {number}GiB, {number}MiB (or {number}B for bytes)")
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise UsageError(
            f"invalid size unit {shorten(unit)!r} in {shorten(text)!r}: use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)"
        )
    value = float(number) * factor
    if not math.isfinite(value):
        raise UsageError(f"invalid size {shorten(text)!r}")
    return int(value)


def mib(n_bytes: int) -> int:
    """Whole MiB as nvidia-smi prints memory: rounded up, so any part of a MiB counts as one.

    On the H100 capture (docs/hardware/h100-80gb-hbm3-driver580) nvidia-smi -q shows
    13 437 304 832 B used as 12815 MiB (12814.81) and 71 580 188 672 B free as 68265 MiB
    (68264.19): neither floor nor nearest gives both.
    """
    return -(-n_bytes // (1024 * 1024))


def human_bytes(n_bytes: float) -> str:
    """Binary units with one decimal (``18.3 GiB``), via humanize."""
    import humanize

    return str(humanize.naturalsize(n_bytes, binary=True, format="%.1f"))


_DURATION = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(s|m|min|h)?\s*$"
_DURATION_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m``, ``1.5h`` (a bare number is seconds, as ``--timeout`` takes)."""
    match = re.match(_DURATION, text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"invalid duration {shorten(text)!r}: use a positive number of seconds or e.g. 90s, 10m, 1h")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


# What users give options: sizes, durations and seconds, checked, each error naming its option.

# The longest wait or interval any option takes: a year is beyond any real use, and far inside
# what time.sleep and the clocks accept (1e20 s overflowed them: an internal error).
MAX_SECONDS = 365 * 24 * 3600.0


def seconds(value: float | None, option: str, at_least: float = 0.0) -> float | None:
    """A number of seconds given to ``option``: finite, more than ``at_least`` (0: more than 0,
    else at least it) and at most a year. nan, inf, 0 and 1e20 are usage errors."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise UsageError(f"{option} {shorten(str(value))}: expected a number of seconds, more than 0, at most a year")
    if value < at_least:
        raise UsageError(f"{option} {value:g}: use at least {at_least:g} seconds")
    return value


# The shortest interval of every watch (list/stat --watch, memory --interval, dmon/pmon --delay).
# nvtop counts its delay in tenths of a second and nvitop refuses less than 0.25 s; NVML itself
# refreshes utilization every 1/6 s to 1 s. Faster sampling only burns the CPU it measures.
MIN_INTERVAL = 0.1


def interval(value: float, option: str) -> float:
    """A watch's sampling interval given to ``option``: at least :data:`MIN_INTERVAL`, at most a year."""
    checked = seconds(value, option, at_least=MIN_INTERVAL)
    assert checked is not None  # a float in, a float out
    return checked


def size(value: str | None, option: str) -> int | None:
    """Bytes from a size given to ``option`` (``20GiB``), or None when it was not given."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}") from None


def duration(value: str | None, option: str) -> float | None:
    """Seconds from a duration given to ``option`` (``10m``), or None when it was not given."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}") from None
