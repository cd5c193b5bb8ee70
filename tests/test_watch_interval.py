"""One minimum interval for every watch, through one option check (gpudiag.units.interval): below
it a watch spins a core on NVML calls (`list --watch --interval 1e-7` once did)."""

from __future__ import annotations

import pytest

from gpudiag.exitcodes import ExitCode
from gpudiag.units import MIN_INTERVAL, interval
from tests.conftest import Cli

WATCHES = {
    "list --watch": ["list", "--watch", "--count", "1", "--interval"],
    "list --watch --query": ["list", "--watch", "--count", "1", "--query", "index", "--interval"],
    "stat --watch": ["stat", "--watch", "--count", "1", "--interval"],
    "memory --watch": ["memory", "--watch", "--count", "1", "--interval"],
    "dmon": ["dmon", "--count", "1", "--delay"],
    "pmon": ["pmon", "--count", "1", "--delay"],
}


@pytest.mark.parametrize(("watch", "value"), [*((w, "1e-7") for w in sorted(WATCHES)), ("list --watch", "0.0999")])
def test_every_watch_refuses_an_interval_below_the_minimum(cli: Cli, watch: str, value: str) -> None:
    code, out, err = cli.replay("h100x8-healthy", *WATCHES[watch], value)
    option = WATCHES[watch][-1]
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == f"gpudiag: {option} {float(value):g}: use at least {MIN_INTERVAL:g} seconds\n"


def test_the_minimum_itself_is_taken() -> None:
    assert interval(MIN_INTERVAL, "--interval") == MIN_INTERVAL == 0.1
