"""Environment values that size output (COLUMNS, LINES, typer's TERMINAL_WIDTH), made sane once;
and output streams that cannot encode every character (a Latin-1 locale, PYTHONIOENCODING=ascii).

rich and typer take them as they are: ``COLUMNS=99999999 gpudiag --help`` padded every line to
a hundred million cells (a hang), ``COLUMNS=0`` printed nothing and exited 0, ``COLUMNS=²``
(a digit to ``str.isdigit``, not to ``int``) and ``TERMINAL_WIDTH=abc`` raised. POSIX reads a
value that is not a positive decimal number as unset; a number is clamped into a range every
view can be laid out in. The environment itself is rewritten, before rich or typer read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import MutableMapping
from typing import IO, Any

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


def never_unencodable(*streams: IO[str] | Any) -> None:
    """A character the stream's encoding lacks (a table rule, a bar, a name in Latin-1 output) is
    written as its Python escape, as outside text is (render.printable), not raised as an
    internal error: ``PYTHONIOENCODING=ascii gpudiag memory`` exited 70."""
    for stream in streams:
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if stream is None or encoding in ("utf8", "utf16", "utf32") or not hasattr(stream, "reconfigure"):
            continue
        with contextlib.suppress(ValueError, OSError):  # a stream already closed or detached
            stream.reconfigure(errors="backslashreplace")
