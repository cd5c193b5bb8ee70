"""Child: the memory test (``mem.test``, see gpudiag.checks.deep.memtest for the parent side).

``python memtest.py SETTINGS_JSON``. Standard library, :mod:`protocol`, :mod:`diag` and
:mod:`patterns` only; torch imported when the test runs. Every visible GPU at once, a thread each:

1. allocate most of the free memory in chunks (leaving ``reserve_bytes`` for the test's own
   temporaries, CUDA and cuBLAS), stopping at the first allocation that fails;
2. run every pattern over all chunks (:mod:`patterns`), ``passes`` times, or again and again until
   ``seconds`` have passed (each pass with a new seed for the random pattern);
3. free everything, back to the driver.

Events: ``start``, ``allocated``, ``progress`` (share done, at most twice a second), ``result``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import diag, patterns, protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import diag
    import patterns
    import protocol

DEFAULTS: dict[str, Any] = {
    "device_type": "cuda",
    "patterns": list(patterns.SHORT),
    "passes": 1,
    "seconds": 0.0,  # > 0: repeat whole passes until this much time has passed (at least one)
    "fraction": 0.95,  # of the free memory, at most
    "reserve_bytes": 1 << 30,  # left free in any case: the expected blocks, CUDA's and cuBLAS's own needs
    "chunk_bytes": 1 << 30,
    "block_words": patterns.BLOCK_WORDS,
}


def _allocate(torch: Any, dev: Any, target: int, chunk_bytes: int) -> tuple[list[Any], str]:
    """Chunks of int64 words adding up to ``target`` bytes, or fewer: why allocation stopped early."""
    chunks: list[Any] = []
    left = target
    while left >= patterns.WORD_BYTES:
        words = min(chunk_bytes, left) // patterns.WORD_BYTES
        try:
            chunks.append(torch.empty(words, dtype=torch.int64, device=dev))
        except Exception as exc:  # out of memory: test what we have
            return chunks, protocol.first_line(exc)
        left -= words * patterns.WORD_BYTES
    return chunks, ""


def _test(torch: Any, device: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    index = device["index"]
    r: dict[str, Any] = {"device": index, "uuid": device["uuid"], "ok": False, "error": "", "patterns": []}
    dev = diag.device(torch, s, index)
    chunks: list[Any] = []
    try:
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            torch.zeros(1, device=dev)  # the context, before measuring what is free
            free, total = diag.free_memory(torch, dev, s)
            target = max(0, min(int(free * s["fraction"]), free - int(s["reserve_bytes"])))
            chunks, stopped = _allocate(torch, dev, target, int(s["chunk_bytes"]))
            tested = sum(c.numel() for c in chunks) * patterns.WORD_BYTES
            r.update(free_bytes=free, total_bytes=total, tested_bytes=tested, allocation_stopped=stopped)
            diag.event("allocated", device=index, bytes=tested, free=free, total=total)
            if not chunks:
                raise RuntimeError(f"could not allocate any memory to test ({stopped or 'nothing free'})")
            _passes(torch, dev, index, chunks, s, r)
        r["ok"] = True
    except Exception as exc:
        r["error"] = protocol.first_line(exc)
    finally:
        chunks.clear()
        with contextlib.suppress(Exception):  # the device is gone: the process's end frees it
            diag.release(torch, dev)
    return r


def _passes(torch: Any, dev: Any, index: int, chunks: list[Any], s: dict[str, Any], r: dict[str, Any]) -> None:
    names = list(s["patterns"])
    sweeps_per_pass = sum(patterns.SWEEPS[n] for n in names)
    seconds, passes = float(s["seconds"]), int(s["passes"])
    done, last_said, begun = 0, 0.0, time.monotonic()

    def on_sweep() -> None:
        nonlocal done, last_said
        done += 1
        now = time.monotonic()
        if now - last_said >= 0.5:
            last_said = now
            share = min(1.0, (now - begun) / seconds) if seconds > 0 else done / (sweeps_per_pass * passes)
            diag.event("progress", device=index, done=share)

    tester = patterns.Tester(torch, chunks, lambda: diag.sync(torch, dev, index), on_sweep, int(s["block_words"]))
    found: dict[str, patterns.Found] = {}
    completed = 0
    while True:
        for name in names:
            result = tester.run(name, seed=completed)
            total = found.setdefault(name, patterns.Found(name))
            total.mismatches += result.mismatches
            for attr in ("first", "last"):
                mine, theirs = getattr(total, attr), getattr(result, attr)
                if theirs is not None:
                    pick = min if attr == "first" else max
                    setattr(total, attr, theirs if mine is None else pick(mine, theirs))
            total.samples = (total.samples + result.samples)[: patterns.SAMPLES]
            total.bits |= result.bits
        completed += 1
        elapsed = time.monotonic() - begun
        if (seconds > 0 and elapsed >= seconds) or (seconds <= 0 and completed >= passes):
            break
    r.update(
        passes=completed,
        seconds=time.monotonic() - begun,
        bytes_moved=tester.moved,
        patterns=[found[n].to_data() for n in names],
    )


def run(torch: Any, devices: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    s = {**DEFAULTS, **settings}

    def work(device: dict[str, Any]) -> None:
        diag.event("start", device=device["index"])
        diag.event("result", **_test(torch, device, s))

    diag.each_device(devices, work)


if __name__ == "__main__":
    diag.main(run, sys.argv)
    protocol.exit_now()
