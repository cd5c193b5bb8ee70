"""Child: an all-reduce across every GPU of the node through torch.distributed (``link.nccl``).

``python allreduce.py SETTINGS_JSON`` is the launcher, standard library only: it starts one rank
per GPU (``python allreduce.py --rank R SETTINGS_JSON``) in its own process group, so that the
parent's timeout, which kills the group, ends every rank too; it relays their lines, ends them all
as soon as one fails (the others would wait in a collective until torch's own timeout), and
answers once all have ended.

A rank imports torch, binds GPU R and joins the group through a file in the temporary directory
the parent made (torch.distributed's FileStore: no network port to choose or collide on). Per
size: ``warmup`` untimed all-reduces, then ``iters`` timed between a barrier and a synchronisation;
then one all-reduce of known values (rank r contributes r + 1) checks the sum on every rank.
The parent applies nccl-tests' conventions: the time per all-reduce averaged over the ranks,
algbw = bytes / time, busbw = algbw × 2(n−1)/n.

Events (``protocol.DIAG``): ``rank`` (a rank's sizes and seconds, whether its sum was right),
``rank_failed`` (a rank's error); the final result ``{"done": true, "ranks": n}``.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:
    from gpudiag.children import diag, protocol
else:  # run by path (any interpreter, even with -P / PYTHONSAFEPATH): import the sibling modules
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import diag
    import protocol

DEFAULTS: dict[str, Any] = {
    "backend": "nccl",
    "device_type": "cuda",
    "ranks": 2,
    "sizes": [1 << 20, 1 << 24, 1 << 27, 1 << 29],  # bytes of float32: 1 MiB to 512 MiB
    "warmup": 5,
    "iters": 20,
    "timeout": 120.0,  # torch.distributed's own, for the rendezvous and each collective
    "store_dir": "",  # made (and removed) by the parent
}


# -- a rank -------------------------------------------------------------------------------


def rank_main(rank: int, s: dict[str, Any]) -> None:
    """One rank; an error is reported at once and the rank ends without torch's teardown, which
    would wait for the other ranks in a collective that can no longer complete."""
    diag.watch_parent()  # the launcher, which waits for it
    try:
        _rank(rank, s)
    except BaseException as exc:
        diag.event("rank_failed", rank=rank, error=protocol.first_line(exc))
        protocol.exit_now(1)


def _rank(rank: int, s: dict[str, Any]) -> None:
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")
    n = int(s["ranks"])
    if s["device_type"] == "cuda":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    else:
        dev = torch.device("cpu")
    dist.init_process_group(
        s["backend"],
        init_method="file://" + os.path.join(s["store_dir"], "store"),
        rank=rank,
        world_size=n,
        timeout=datetime.timedelta(seconds=float(s["timeout"])),
    )
    timed = []
    for nbytes in s["sizes"]:
        x = torch.zeros(int(nbytes) // 4, dtype=torch.float32, device=dev)  # zeros: the sum never overflows
        for _ in range(int(s["warmup"])):
            dist.all_reduce(x)
        diag.sync(torch, dev, rank)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(int(s["iters"])):
            dist.all_reduce(x)
        diag.sync(torch, dev, rank)
        timed.append([int(nbytes), (time.perf_counter() - t0) / int(s["iters"])])
        del x
    check = torch.full((1 << 20,), float(rank + 1), dtype=torch.float32, device=dev)
    dist.all_reduce(check)
    correct = bool((check == n * (n + 1) / 2).all())
    diag.event("rank", rank=rank, sizes=timed, correct=correct)
    dist.destroy_process_group()


# -- the launcher ----------------------------------------------------------------------------


class Launcher:
    def __init__(self, s: dict[str, Any], argv_settings: str) -> None:
        self.s, self.settings = s, argv_settings
        self.procs: list[subprocess.Popen[str]] = []
        self.errors: dict[int, list[str]] = {}
        self.relays: list[threading.Thread] = []
        self.said_why: set[int] = set()  # ranks that reported their own error
        self.stopping = False

    def start(self) -> None:
        for rank in range(int(self.s["ranks"])):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--rank", str(rank), self.settings],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for rank, proc in enumerate(self.procs):
            relay = threading.Thread(target=self._relay, args=(rank, proc), daemon=True)
            relay.start()
            self.relays.append(relay)
            threading.Thread(target=self._errors, args=(rank, proc), daemon=True).start()

    def _relay(self, rank: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(protocol.DIAG):
                if '"rank_failed"' in line:
                    self.said_why.add(rank)
                with diag._LOCK:
                    sys.stdout.write(line if line.endswith("\n") else line + "\n")
                    sys.stdout.flush()

    def _errors(self, rank: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.errors[rank] = proc.stderr.read().strip().splitlines()

    def wait(self) -> None:
        """Wait for every rank; the first that fails ends the others."""
        pending = dict(enumerate(self.procs))
        while pending:
            for rank, proc in list(pending.items()):
                code = proc.poll()
                if code is None:
                    continue
                del pending[rank]
                if code != 0 and not self.stopping:
                    self.relays[rank].join(timeout=2)  # its last lines, its own error among them
                    if rank not in self.said_why:
                        time.sleep(0.2)  # let its stderr arrive
                        diag.event("rank_failed", rank=rank, error=self._why(rank, code))
                    self.stop()
            time.sleep(0.05)

    def stop(self) -> None:
        self.stopping = True  # the ranks it ends now did not fail: one before them did
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait()  # reaped: none outlives the launcher

    def _why(self, rank: int, code: int) -> str:
        for line in reversed(self.errors.get(rank, [])):
            line = line.strip()
            if line and not line.startswith(("File ", "^", "~", "Traceback", "[")):
                return line[:300]
        return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"


def main(argv: list[str]) -> None:
    if len(argv) > 3 and argv[1] == "--rank":
        rank_main(int(argv[2]), {**DEFAULTS, **json.loads(argv[3])})
        return
    s = {**DEFAULTS, **json.loads(argv[1])}
    diag.watch_parent(s.get("parent"))
    launcher = Launcher(s, argv[1])
    try:
        launcher.start()
        launcher.wait()
    finally:
        launcher.stop()
    protocol.emit({"done": True, "ranks": int(s["ranks"])})


if __name__ == "__main__":
    main(sys.argv)
    protocol.exit_now()
