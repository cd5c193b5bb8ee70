"""Which node an output is about, in the scheduler's own words."""

from __future__ import annotations

import os


def slurm_node() -> str | None:
    """Slurm's name for this node (``SLURMD_NODENAME``, set for jobs, steps and Prologs), or None.

    `scontrol` wants this name, which can differ from the hostname (an FQDN, a replayed machine).
    """
    return os.environ.get("SLURMD_NODENAME") or None
