"""Prometheus text format 0.0.4 for the exporter's scrapes, with each series' name and labels
formatted once and reused while the series lives.

prometheus-client's ``generate_latest`` validates and escapes every label of every sample on
every scrape: for a busy 8-GPU node that is most of the scrape's CPU. The families are the same
prometheus-client objects either way; OpenMetrics requests still go to prometheus-client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}
_MAX_CACHED = 20_000  # series; beyond this (PID churn) the cache starts afresh


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _number(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


class TextRenderer:
    """Renders metric families; remembers each series' ``name{labels}`` prefix."""

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def _prefix(self, name: str, labels: dict[str, str]) -> str:
        key = (name, tuple(labels.items()))
        prefix = self._prefixes.get(key)
        if prefix is None:
            if len(self._prefixes) >= _MAX_CACHED:
                self._prefixes.clear()
            inner = ",".join(f'{k}="{_escape_value(v)}"' for k, v in labels.items())
            prefix = f"{name}{{{inner}}} " if inner else f"{name} "
            self._prefixes[key] = prefix
        return prefix

    def render(self, families: Iterable[Any]) -> bytes:
        out: list[str] = []
        for family in families:
            name = family.name + "_total" if family.type == "counter" else family.name
            out.append(f"# HELP {name} {_escape_help(family.documentation)}\n")
            out.append(f"# TYPE {name} {_TYPES.get(family.type, 'untyped')}\n")
            for sample in family.samples:
                out.append(self._prefix(sample.name, sample.labels) + _number(sample.value) + "\n")
        return "".join(out).encode()
