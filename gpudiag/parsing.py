"""One rule for the whole numbers in GPU indices and versions, typed by users or read from data.

ASCII digits only (``str.isdigit`` also accepts '٣' and '²'), and at most ``MAX_DIGITS`` of
them: no GPU index or version component is longer, and Python refuses to convert strings of
more than 4300 digits (a ValueError that used to surface as an internal error).
"""

from __future__ import annotations

import re

MAX_DIGITS = 9
_DIGITS = r"[0-9]+"  # compiled where first used (re's cache): not every command parses a number


def parse_count(text: str) -> int | None:
    """``text`` as a non-negative whole number, or None when it is not one we can mean."""
    if re.fullmatch(_DIGITS, text) is None or len(text) > MAX_DIGITS:
        return None
    return int(text)


def parse_version(text: str) -> tuple[int, ...] | None:
    """'550.54.15' -> (550, 54, 15); None unless the whole text is dot-separated numbers."""
    parts = [parse_count(p) for p in text.strip().split(".")]
    if not parts or any(p is None for p in parts):
        return None
    return tuple(p for p in parts if p is not None)


def leading_version(text: str) -> tuple[int, ...]:
    """The numeric start of a version as drivers and wheels write it: '12.1a' -> (12, 1)."""
    parts = []
    for piece in text.strip().split("."):
        match = re.match(_DIGITS, piece)
        if match is None:
            break
        number = parse_count(match.group())
        if number is None:
            break
        parts.append(number)
    return tuple(parts)


def shorten(text: str, limit: int = 40) -> str:
    """Text quoted in an error message, cut so that hostile input cannot flood the terminal."""
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"
