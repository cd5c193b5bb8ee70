"""A detail reading's row: what every section's rows share."""

from __future__ import annotations

from typing import Any

from gpudiag.spec import Spec
from gpudiag.values import FactGroup


def detail(key: str, **kw: Any) -> Spec:
    """A detail row, ``key`` dotted from the GPU's details: read with the details (fact group DETAILS);
    the fake answers a MIG device's handle with its GPU's details."""
    return Spec(key=f"details.{key}", group=FactGroup.DETAILS, whole_gpu=False, **kw)
