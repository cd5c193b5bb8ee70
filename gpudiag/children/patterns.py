"""The memory test's patterns, after memtest86's, written and verified with torch kernels.

Standard library only: torch and the memory under test are handed in. Memory is a list of int64
chunks; a *sweep* visits every chunk (ascending or descending), and per chunk verifies what it
should hold (every block compared on the GPU, the mismatches counted on the GPU, one
synchronisation per chunk) and then writes the next value. Mismatches are located (address,
expected, read) before the chunk is overwritten.

- ``address``: every word holds its own address, then its complement (memtest86's "address test,
  own address");
- ``ones_zeros``, ``checkerboard``, ``random``: moving inversions (memtest86's tests of that name):
  fill with a pattern; ascending, verify it and write its complement; descending, verify the
  complement and write the pattern; verify it once more. ``random`` draws a different 64-bit value
  for every word (a hash of its address and the pass's seed);
- ``walking_ones``, ``walking_zeros``: every word holds one set (cleared) bit, walked through all 64
  positions, each verified before the next is written: a data bit stuck at 0 or 1 fails.

The order *within* a chunk is the GPU's (thousands of threads at once), not address order:
coupling faults that need a strict address order are not targeted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WORD_BYTES = 8
BLOCK_WORDS = 16 << 20  # 128 MiB: the largest temporary (an expected block) allocated beside the chunks
SAMPLES = 4  # mismatches located per pattern and device

SHORT = ("address", "ones_zeros", "random", "walking_ones", "walking_zeros")
LONG = ("address", "ones_zeros", "checkerboard", "random", "walking_ones", "walking_zeros")
SWEEPS = {"address": 3, "ones_zeros": 4, "checkerboard": 4, "random": 4, "walking_ones": 65, "walking_zeros": 65}

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed 64-bit word (splitmix64's increment)
_MIX1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MIX2 = -7723592293110705685  # 0x94D049BB133111EB


def signed(value: int) -> int:
    """A 64-bit pattern as the signed word torch stores."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


class Found:
    """What one pattern found on one device."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mismatches = 0
        self.first: int | None = None
        self.last: int | None = None
        self.samples: list[tuple[int, int, int]] = []
        self.bits = 0

    def to_data(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mismatches": self.mismatches,
            "first_address": self.first,
            "last_address": self.last,
            "samples": self.samples,
            "bits": self.bits,
        }


# A value every word should hold: a constant, or a function of (chunk, first word, words) -> the block.
Value = int | Callable[[Any, int, int], Any]


class Tester:
    """Runs patterns over one device's chunks. ``sync`` waits for the device (tests replace it);
    ``on_sweep`` is called after every sweep (progress, and the child's sense of time)."""

    def __init__(
        self,
        torch: Any,
        chunks: list[Any],
        sync: Callable[[], None],
        on_sweep: Callable[[], None] = lambda: None,
        block_words: int = BLOCK_WORDS,
    ) -> None:
        self.t, self.chunks, self.sync, self.on_sweep, self.block = torch, chunks, sync, on_sweep, block_words
        self.moved = 0  # bytes written or read, for the throughput figure

    def run(self, name: str, seed: int = 0) -> Found:
        found = Found(name)
        if name == "address":
            own, inverse = self._address(invert=False), self._address(invert=True)
            self._sweep(False, None, own, found)
            self._sweep(False, own, inverse, found)
            self._sweep(False, inverse, None, found)
        elif name in ("ones_zeros", "checkerboard"):
            value = 0 if name == "ones_zeros" else signed(0x5555555555555555)
            self._moving_inversions(value, ~value, found)
        elif name == "random":
            self._moving_inversions(self._random(seed, invert=False), self._random(seed, invert=True), found)
        elif name in ("walking_ones", "walking_zeros"):
            previous: Value | None = None
            for bit in range(64):
                value = signed(1 << bit)
                value = value if name == "walking_ones" else ~value
                self._sweep(False, previous, value, found)
                previous = value
            self._sweep(False, previous, None, found)
        else:
            raise ValueError(f"unknown pattern {name!r}")
        return found

    def _moving_inversions(self, pattern: Value, complement: Value, found: Found) -> None:
        self._sweep(False, None, pattern, found)
        self._sweep(False, pattern, complement, found)
        self._sweep(True, complement, pattern, found)
        self._sweep(False, pattern, None, found)

    # -- values ------------------------------------------------------------------------

    def _indices(self, chunk: Any, start: int, n: int) -> Any:
        return self.t.arange(start, start + n, dtype=self.t.int64, device=chunk.device)

    def _address(self, invert: bool) -> Value:
        def block(chunk: Any, start: int, n: int) -> Any:
            words = self._indices(chunk, start, n).mul_(WORD_BYTES).add_(chunk.data_ptr())
            return words.bitwise_not_() if invert else words

        return block

    def _random(self, seed: int, invert: bool) -> Value:
        """A 64-bit hash (splitmix64's finaliser) of each word's address and the seed."""

        def block(chunk: Any, start: int, n: int) -> Any:
            x = self._indices(chunk, start, n).add_(chunk.data_ptr() // WORD_BYTES)
            x.add_(signed(seed * 0x9E3779B97F4A7C15 + 1)).mul_(_GOLDEN)
            x.bitwise_xor_(x >> 30).mul_(_MIX1)
            x.bitwise_xor_(x >> 27).mul_(_MIX2)
            x.bitwise_xor_(x >> 31)
            return x.bitwise_not_() if invert else x

        return block

    # -- sweeps ------------------------------------------------------------------------

    def _blocks(self, chunk: Any) -> range:
        return range(0, chunk.numel(), self.block)

    def _expected(self, value: Value, chunk: Any, start: int, n: int) -> Any:
        return value if isinstance(value, int) else value(chunk, start, n)

    def _sweep(self, descending: bool, check: Value | None, write: Value | None, found: Found) -> None:
        order = list(reversed(self.chunks)) if descending else self.chunks
        for chunk in order:
            if check is not None:
                self._verify(chunk, check, found)
            if write is not None:
                for start in self._blocks(chunk):
                    view = chunk[start : start + self.block]
                    expected = self._expected(write, chunk, start, view.numel())
                    if isinstance(expected, int):
                        view.fill_(expected)
                    else:
                        view.copy_(expected)
                    self.moved += view.numel() * WORD_BYTES
        self.sync()
        self.on_sweep()

    def _verify(self, chunk: Any, value: Value, found: Found) -> None:
        """Count the chunk's mismatches on the GPU (one synchronisation), then locate them if any."""
        t = self.t
        count = t.zeros((), dtype=t.int64, device=chunk.device)
        for start in self._blocks(chunk):
            view = chunk[start : start + self.block]
            count += (view != self._expected(value, chunk, start, view.numel())).sum()
            self.moved += view.numel() * WORD_BYTES
        bad = int(count)
        if bad:
            found.mismatches += bad
            self._locate(chunk, value, found)

    def _locate(self, chunk: Any, value: Value, found: Found) -> None:
        t = self.t
        for start in self._blocks(chunk):
            view = chunk[start : start + self.block]
            expected = self._expected(value, chunk, start, view.numel())
            where = t.nonzero(view != expected).flatten()
            if where.numel() == 0:
                continue
            base = chunk.data_ptr() + start * WORD_BYTES
            first, last = base + int(where[0]) * WORD_BYTES, base + int(where[-1]) * WORD_BYTES
            found.first = first if found.first is None else min(found.first, first)
            found.last = last if found.last is None else max(found.last, last)
            for offset in where[: max(0, SAMPLES - len(found.samples))].tolist():
                want = expected if isinstance(expected, int) else int(expected[offset])
                got = int(view[offset])
                found.samples.append((base + offset * WORD_BYTES, want, got))
                found.bits |= (want ^ got) & ((1 << 64) - 1)
