"""What `gpudiag snapshot` was asked for: where the machine file goes, the line that says what the
machine is, and whether torch's runtime view is recorded with it.

The command hands over its options as a :class:`Request` (``cli.common.request_of``); :func:`prepare`
parses them once into the :class:`Snapshot` to take.
"""

from __future__ import annotations

from pathlib import Path

import msgspec


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """Every option of `gpudiag snapshot`, as given (see the command for what each one means)."""

    output: Path | None = None
    description: str = ""
    no_torch: bool = False


class Snapshot(msgspec.Struct, frozen=True):
    output: Path | None  # None: stdout
    description: str
    torch: bool  # record torch's runtime view (a torch import, ~2 s), so `check` on the replay can judge it


def prepare(r: Request, replay: str | None) -> Snapshot:
    """The snapshot ``r`` asks for; a replayed machine records the torch view it was recorded with."""
    return Snapshot(r.output, r.description, torch=not replay and not r.no_torch)
