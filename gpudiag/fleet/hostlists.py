"""Slurm hostlist syntax (``gpu[003,017-019]``), via python-hostlist, behind gpudiag's errors."""

from __future__ import annotations

import re
from collections.abc import Iterable

import hostlist

from gpudiag.errors import UsageError

_NUMBERED = re.compile(r"^(.*?)([0-9]{1,18})$")  # ASCII, and never a 5000-digit int()


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
    names = sorted(set(hosts), key=sort_key)
    if not names:
        return ""
    try:
        return str(hostlist.collect_hostlist(names))
    except hostlist.BadHostlist:  # a name hostlist syntax cannot hold (a blank, a control): data, listed as it is
        return ",".join(names)


def sort_key(host: str) -> tuple[str, int, str]:
    """node2 before node10: prefix, then number, then the name itself to break ties."""
    match = _NUMBERED.match(host)
    return (match.group(1), int(match.group(2)), host) if match else (host, -1, host)
