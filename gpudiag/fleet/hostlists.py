"""Slurm hostlist syntax (``gpu[003,017-019]``), via python-hostlist, behind gpudiag's errors."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import hostlist

from gpudiag.errors import UsageError

_NUMBERED = re.compile(r"^(.*?)([0-9]{1,18})$")  # ASCII, and never a 5000-digit int()
# One Slurm node name as data: a host name's letters, digits, '-', '.', and '_' (which some sites
# use). Nothing that Slurm would read as syntax: no hostlist brackets or commas, no blanks, no
# '=' (scontrol's key=value), no quotes, no control characters.
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
# Words scontrol and slurm.conf read as more than one node, in any case: `NodeName=ALL` updates
# every node; `DEFAULT` sets defaults for the nodes after it.
_KEYWORDS = frozenset({"all", "default"})


def is_node_name(name: str) -> bool:
    """Whether ``name`` is exactly one node name that scontrol and hostlists take literally."""
    return _NODE_NAME.fullmatch(name) is not None and name.lower() not in _KEYWORDS


def expand(expression: str, option: str = "--expect") -> list[str]:
    """Every host an expression names, in order, without duplicates; a bad one is a usage error."""
    try:
        hosts: list[str] = hostlist.expand_hostlist(expression.strip())
    except hostlist.BadHostlist as exc:
        raise UsageError(f"{option} {expression!r}: not a hostlist ({exc}); e.g. 'node[001-128]'") from None
    if not hosts:
        raise UsageError(f"{option} {expression!r}: names no host")
    return list(dict.fromkeys(hosts))


def collect(hosts: Iterable[str]) -> str:
    """The shortest hostlist for these hosts (``gpu[003,017-019]``); "" for none."""
    return _collect(tuple(sorted(set(hosts), key=sort_key)))


@functools.lru_cache(maxsize=16)
def _collect(names: tuple[str, ...]) -> str:
    # Remembered: python-hostlist takes ~30 µs a name (1.5 s for 50,000), and a report asks for
    # the same large sets more than once (the ready nodes, the majority of every version field).
    if not names:
        return ""
    try:
        return str(hostlist.collect_hostlist(names))
    except hostlist.BadHostlist:  # a name hostlist syntax cannot hold (a blank, a control): data, listed as it is
        return ",".join(names)


def collect_within(hosts: Iterable[str], limit: int) -> tuple[str, int]:
    """A hostlist of at most ``limit`` characters (about: a range is never cut), of all the hosts if it
    fits, else of the first ones (in hostlist order); and how many hosts it leaves out."""
    names = tuple(sorted(set(hosts), key=sort_key))
    whole = _collect(names)
    if len(whole) <= limit:
        return whole, 0
    cut = _cut(whole, limit)
    shown = len(hostlist.expand_hostlist(cut)) if cut else 0
    return cut, len(names) - shown


def _cut(text: str, limit: int) -> str:
    """The start of hostlist ``text``, cut at a comma (inside an item's only bracket, or between items)."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    out: list[str] = []
    for item in items:
        room = limit - len(",".join(out)) - (1 if out else 0)
        if len(item) <= room:
            out.append(item)
            continue
        if item.count("[") == 1 and item.endswith("]"):  # gpu[001-004,007]: keep the ranges that fit
            head, ranges = item[:-1].split("[", 1)
            taken: list[str] = []
            for part in ranges.split(","):
                if len(head) + 2 + len(",".join([*taken, part])) > room:
                    break
                taken.append(part)
            if taken:
                out.append(f"{head}[{','.join(taken)}]")
        break
    return ",".join(out)


def sort_key(host: str) -> tuple[str, int, str]:
    """node2 before node10: prefix, then number, then the name itself to break ties."""
    match = _NUMBERED.match(host)
    return (match.group(1), int(match.group(2)), host) if match else (host, -1, host)
