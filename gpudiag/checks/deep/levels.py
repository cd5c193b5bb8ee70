"""What each `check --level` runs, how long it normally takes, and how its budget is shared.

After DCGM Diagnostics' run levels (``dcgmi diag -r 1..4``: quick, medium, long, extended):
level 1 is `check` as it always was (seconds); 2 adds the memory test, PCIe host copies, the peer
matrix and an all-reduce (like DCGM's level 2 of memory and PCIe tests); 3 adds a sustained GEMM
stress on every GPU at once (DCGM's level 3 of targeted stress and power and its GEMM
"diagnostic"); 4 makes the memory test long, adds device memory bandwidth and a longer stress
(DCGM's level 4 of memtest, memory bandwidth and pulse). Each level's time says whether it was
measured (level 2: 50 s, READY, on one H200, docs/hardware/h200-driver580/runs/level2.json) or is
still an estimate (levels 3 and 4: level 2's measured parts plus the stress and the long memory
test they add; no run of them was timed yet).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpudiag.errors import UsageError

MAX_LEVEL = 4


class Level(msgspec.Struct, frozen=True):
    """One `check --level`: what it runs and how long that normally takes. The option becomes one
    (:func:`parse`) where the command's options are checked, and travels as it is from there."""

    number: int
    name: str
    takes: str  # how long it normally takes, for --help and the docs: measured, or "estimated" said
    budget: float | None  # default --budget, seconds (None: level 1 has none)
    memtest: str | None  # "short" or "long"
    memtest_seconds: float  # long: repeat whole passes this long (0: one pass)
    stress_seconds: float  # 0: no stress
    d2d: bool  # device memory bandwidth (mem.bandwidth)


LEVELS = {
    1: Level(1, "quick", "seconds", None, None, 0.0, 0.0, False),
    # 50 s on one H200 (141 GB, memory test 34 s, copies 10 s); the peer matrix and all-reduce of
    # several GPUs are not timed yet.
    2: Level(2, "medium", "50 s, measured on one H200", 600.0, "short", 0.0, 0.0, False),
    # Level 2's 50 s, the 600 s stress and its child's start (torch import and contexts, ~10 s).
    3: Level(3, "long", "about 11 min, estimated", 1800.0, "short", 0.0, 600.0, False),
    # Level 2's copies, 900 s of memory test passes (the last one finishing, ~35 s), device memory
    # bandwidth, the 1200 s stress, and the children's starts.
    4: Level(4, "extended", "about 36 min, estimated", 5400.0, "long", 900.0, 1200.0, True),
}

LEVEL_HELP = (
    "How deep: 1 the pre-job checks and functional test (seconds, the default); 2 + memory test, PCIe, peer matrix, "
    f"all-reduce ({LEVELS[2].takes}); 3 + 10 min GEMM stress on every GPU ({LEVELS[3].takes}); 4 + long memory "
    f"test, memory bandwidth, 20 min stress ({LEVELS[4].takes})."
)
BUDGET_HELP = (
    "With --level 2-4: the most the whole run may take, in seconds (default 600, 1800, 5400); the "
    "stress and the long memory test shrink to fit; what it cuts short is reported as not run (exit 5)."
)
FORCE_HELP = "With --level 2-4: run the deep tests even while other processes use the GPUs."

START_SECONDS = 120.0  # a deep child's torch import, CUDA start-up and contexts, before it must say anything
STALL_SECONDS = 120.0  # a deep child that says nothing for this long (it reports every second or so) is hung
LINKS_SECONDS = 90.0  # what the PCIe, peer and bandwidth copies normally take on 8 GPUs, start-up included
ALLREDUCE_SECONDS = 60.0
MIN_STRESS_SECONDS = 30.0
MIN_MEMTEST_SECONDS = 60.0


class DeepPlan(msgspec.Struct, frozen=True):
    """The deep tests a `check --level 2-4` run asks for."""

    level: Level
    checks: tuple[str, ...]  # the selected deep checks' ids
    budget: float  # seconds, for the whole `check` run: --budget, else the level's own
    force: bool = False  # run them even on GPUs that other processes use
    # Per phase, child settings that replace the level's own (tests run the children on the CPU).
    overrides: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


def parse(number: int) -> Level:
    """``--level N`` as the level it names, or a usage error."""
    if number not in LEVELS:
        raise UsageError(f"--level {number}: expected 1 to {MAX_LEVEL}")
    return LEVELS[number]


def usage(
    level: Level, budget: float | None, force: bool, quick: bool, no_torch: bool, mode: str | None, replay: bool
) -> None:
    """The options that go with ``level``, or a usage error."""
    if level.number == 1:
        if budget is not None:
            raise UsageError("--budget bounds the deep tests: it goes with --level 2, 3 or 4")
        if force:
            raise UsageError("--force lets the deep tests run on busy GPUs: it goes with --level 2, 3 or 4")
        return
    if budget is not None and not (budget == budget and 0 < budget < float("inf")):
        raise UsageError(f"--budget {budget}: must be a positive number of seconds")
    for clash, given in (("--quick", quick), ("--no-torch", no_torch), ("--mode", mode is not None)):
        if given:
            raise UsageError(f"--level {level.number} runs tests on the GPUs with torch: leave out {clash}")
    if replay:
        raise UsageError(f"--level {level.number} tests this machine's GPUs; a replay has none to test")


def shares(level: Level, remaining: float, phases: int) -> tuple[float, float]:
    """(memory test seconds, stress seconds) for a run with ``remaining`` seconds of budget:
    the level's own when they fit beside the fixed phases, else both shrunk alike, down to their
    minimum (the budget then cuts the run short, and says so)."""
    fixed = phases * START_SECONDS / 4 + LINKS_SECONDS + ALLREDUCE_SECONDS
    elastic = level.memtest_seconds + level.stress_seconds
    if elastic <= 0 or remaining - fixed >= elastic:
        return level.memtest_seconds, level.stress_seconds
    scale = max(0.0, remaining - fixed) / elastic
    memtest = max(MIN_MEMTEST_SECONDS, level.memtest_seconds * scale) if level.memtest_seconds else 0.0
    stress = max(MIN_STRESS_SECONDS, level.stress_seconds * scale) if level.stress_seconds else 0.0
    return memtest, stress
