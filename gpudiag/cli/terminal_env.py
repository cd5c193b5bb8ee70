"""Environment values that size output (COLUMNS, LINES, typer's TERMINAL_WIDTH), made sane once.

rich and typer take them as they are: ``COLUMNS=99999999 gpudiag --help`` padded every line to
a hundred million cells (a hang), ``COLUMNS=0`` printed nothing and exited 0, ``COLUMNS=²``
(a digit to ``str.isdigit``, not to ``int``) and ``TERMINAL_WIDTH=abc`` raised. POSIX reads a
value that is not a positive decimal number as unset; a number is clamped into a range every
view can be laid out in. The environment itself is rewritten, before rich or typer read it.
"""

from __future__ import annotations

from collections.abc import MutableMapping

# 40: the narrowest width at which `list` and `memory` still show each GPU's index and memory and
# each process's GPU, PID and memory whole; 1000: what output into a pipe gets (every column).
COLUMNS_RANGE = (40, 1000)
LINES_RANGE = (10, 1000)
_SIZES = {"COLUMNS": COLUMNS_RANGE, "TERMINAL_WIDTH": COLUMNS_RANGE, "LINES": LINES_RANGE}


def terminal_size(value: str | None, bounds: tuple[int, int]) -> int | None:
    """A size from the environment within ``bounds``, or None when the value means nothing."""
    if value is None:
        return None
    digits = value.strip()
    if not (digits.isascii() and digits.isdigit()):
        return None
    low, high = bounds
    if len(digits) > 9:  # no int() of a 5000-digit string: it is just too big
        return high
    number = int(digits)
    return None if number == 0 else min(max(number, low), high)


def sanitize(environ: MutableMapping[str, str]) -> None:
    """Clamp COLUMNS, LINES and TERMINAL_WIDTH in ``environ``; drop those that mean nothing."""
    for name, bounds in _SIZES.items():
        value = environ.get(name)
        if value is None:
            continue
        size = terminal_size(value, bounds)
        if size is None:
            del environ[name]
        elif str(size) != value:
            environ[name] = str(size)
