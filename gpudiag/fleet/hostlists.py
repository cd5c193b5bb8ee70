"""Slurm hostlist syntax (``gpu[003,017-019]``), via python-hostlist, behind gpudiag's errors."""

from __future__ import annotations

import re
from collections.abc import Iterable

import hostlist

from gpudiag.errors import UsageError

_NUMBERED = re.compile(r"^(.*?)(\d+)$")
# One Slurm node name as data: a host name's letters, digits, '-', '.', and '_' (which some sites
# use). Nothing that Slurm would read as syntax: no hostlist brackets or commas, no blanks, no
# '=' (scontrol's key=value), no quotes, no control characters.
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def is_node_name(name: str) -> bool:
    """Whether ``name`` is exactly one node name that scontrol and hostlists take literally."""
    return _NODE_NAME.fullmatch(name) is not None


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
    return str(hostlist.collect_hostlist(names)) if names else ""


def sort_key(host: str) -> tuple[str, int, str]:
    """node2 before node10: prefix, then number, then the name itself to break ties."""
    match = _NUMBERED.match(host)
    return (match.group(1), int(match.group(2)), host) if match else (host, -1, host)
