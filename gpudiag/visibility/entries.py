"""Reading one entry of CUDA_VISIBLE_DEVICES as CUDA does: C's strtoul, UUID and MIG forms."""

from __future__ import annotations

import re

from gpudiag.visibility.result import C_BLANKS, Token, TokenKind

_MAX_DIGITS = 20  # more digits than an unsigned long holds: strtoul saturates, out of range anyway


def _strtoul(text: str) -> tuple[int | None, int, str]:
    """C's ``strtoul(text, &end, 10)``: blanks skipped, an optional sign, ASCII digits.

    Returns (value, end, sign); value None when no digits start the text. Python's ``\\d`` and
    ``str.isdigit`` accept non-ASCII digits and ``str.strip`` other blanks; C does not.
    """
    i = 0
    while i < len(text) and text[i] in C_BLANKS:
        i += 1
    sign = ""
    if i < len(text) and text[i] in "+-":
        sign = text[i]
        i += 1
    start = i
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    if i == start:
        return None, 0, sign
    digits = text[start:i].lstrip("0") or "0"
    value = int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS
    return value, i, sign


def parse_token(text: str) -> Token:
    """How CUDA reads one entry of the list. Never raises: anything unreadable is INVALID."""
    stripped = text.strip(C_BLANKS)
    padded = stripped != text
    if stripped.startswith("MIG-"):
        legacy = re.fullmatch(r"MIG-(GPU-[^/]*)/([0-9]{1,9})/([0-9]{1,9})", stripped, re.ASCII)
        if legacy:
            return Token(
                text,
                TokenKind.MIG_LEGACY,
                uuid=legacy.group(1),
                gpu_instance_id=int(legacy.group(2)),
                compute_instance_id=int(legacy.group(3)),
                padded=padded,
            )
        return Token(text, TokenKind.MIG_UUID, uuid=stripped, padded=padded)
    if stripped.startswith("GPU-"):
        return Token(text, TokenKind.GPU_UUID, uuid=stripped, padded=padded)
    value, end, sign = _strtoul(text)
    if value is None:
        return Token(text, TokenKind.INVALID, problem=_unreadable(text, stripped, sign))
    if sign == "-" and value != 0:
        return Token(text, TokenKind.INVALID, problem="negative: strtoul wraps it to a huge number, out of range")
    return Token(text, TokenKind.INDEX, number=value, ignored=text[end:], signed=bool(sign))


def _unreadable(text: str, stripped: str, sign: str) -> str:
    if stripped == "":
        return "empty entry"
    first = stripped[0]
    if not first.isascii():
        return f"starts with {first!r} (U+{ord(first):04X}), which C's strtoul does not read"
    if stripped.lower().startswith(("gpu-", "mig-")):
        return f"{stripped[:4]!r} is not {stripped[:4].upper()!r}: UUIDs are written as nvidia-smi -L prints them"
    if sign:
        return f"{sign!r} without digits"
    return "not a number or a GPU-/MIG- UUID"


def parse_value(value: str) -> tuple[Token, ...]:
    """Every entry of a set (non-None) value. An empty value has no entries: it means no device."""
    if value == "":
        return ()
    return tuple(parse_token(t) for t in value.split(","))
