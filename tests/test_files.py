"""Files gpudiag writes are whole or not there (issue 23): snapshot -o, --junit, --textfile,
memory --log. A full disk is exit 74 with nothing partial left, not even the temporary file;
a path that cannot be written is exit 2.

A full disk is made real with RLIMIT_FSIZE: past the limit write(2) fails with EFBIG, as it
fails with ENOSPC on a full file system (Python ignores SIGXFSZ), on any machine, without root.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpudiag import files
from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from tests.conftest import Cli

GPUDIAG = [sys.executable, "-m", "gpudiag"]
EXAMPLE = "h100x8-healthy"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUDIAG_REPLAY"}
    return {**env, "COLUMNS": "120", "NO_COLOR": "1"}


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- the helper ----------------------------------------------------------------------------------


def test_write_atomic_replaces_the_file_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    files.write_atomic(target, "first\n")
    assert target.read_text() == "first\n"
    os.chmod(target, 0o640)
    files.write_atomic(target, b"second\n")
    assert target.read_bytes() == b"second\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _visible(tmp_path) == ["out.json"]


def test_write_atomic_writes_through_a_symlink_and_into_a_device(tmp_path: Path) -> None:
    real = tmp_path / "real.xml"
    real.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(real)
    files.write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    files.write_atomic(Path(os.devnull), "nothing to rename over /dev/null\n")
    assert Path(os.devnull).is_char_device()


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errno.ENOSPC, ExitCode.OUTPUT_ERROR),
        (errno.EDQUOT, ExitCode.OUTPUT_ERROR),
        (errno.EIO, ExitCode.OUTPUT_ERROR),
        (errno.EACCES, ExitCode.USAGE),
    ],
)
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int, code: ExitCode
) -> None:
    target = tmp_path / "junit.xml"
    target.write_text("old")

    def failing_fsync(_fd: int) -> None:
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(files.os, "fsync", failing_fsync)  # where a full NFS or ext4 says so
    with pytest.raises(GpudiagError) as caught:
        files.write_atomic(target, "new" * 1000)
    assert caught.value.code == code
    assert caught.value.message == f"cannot write {target}: {os.strerror(error)}"
    assert target.read_text() == "old" and _visible(tmp_path) == ["junit.xml"]


def test_an_interrupted_write_removes_the_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(_fd: int, _payload: bytes) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "_write_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(tmp_path / "x.prom", "x 1\n")
    assert _visible(tmp_path) == []
    assert files.edge._temporaries == set()


def test_a_directory_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(GpudiagError) as caught:
        files.write_atomic(tmp_path / "no" / "such.json", "{}")
    assert caught.value.code == ExitCode.USAGE and "No such file or directory" in caught.value.message


def test_the_log_cuts_a_record_it_could_not_write_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "memory.jsonl"
    log = files.AppendLog(path)
    assert log.empty
    log.append('{"sample": 1}\n')
    real_write = os.write

    def half_then_full(fd: int, data: Any) -> int:
        if len(data) > 4:
            return real_write(fd, bytes(data[:4]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", half_then_full)
    with pytest.raises(GpudiagError) as caught:
        log.append('{"sample": 2}\n')
    monkeypatch.undo()
    log.close()
    assert caught.value.code == ExitCode.OUTPUT_ERROR
    assert path.read_text() == '{"sample": 1}\n'


def test_a_log_created_and_never_written_is_removed_and_an_old_one_kept(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.csv"
    files.AppendLog(fresh).close()
    assert not fresh.exists()
    old = tmp_path / "old.csv"
    old.write_text("")
    files.AppendLog(old).close()
    assert old.exists()


# --- every command that writes a file, on a full disk --------------------------------------------


def _limit_file_size(limit: int) -> Any:
    def limit_it() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_it


WRITERS = {
    "snapshot -o": (["snapshot", "--no-torch", "-o", "OUT/snap.json"], "snap.json"),
    "check --junit": (["check", "--quick", "--no-torch", "--junit", "OUT/junit.xml"], "junit.xml"),
    "check --textfile": (["check", "--quick", "--no-torch", "--textfile", "OUT"], "gpudiag_check.prom"),
    "memory --textfile": (["memory", "--textfile", "OUT"], "gpudiag_memory.prom"),
    "report --junit": (["report", "NODES", "--junit", "OUT/fleet.xml"], "fleet.xml"),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(WRITERS))
def test_a_full_disk_is_exit_74_with_the_old_file_kept_and_nothing_else(tmp_path: Path, command: str) -> None:
    args, name = WRITERS[command]
    out, nodes = tmp_path / "out", tmp_path / "nodes"
    out.mkdir()
    nodes.mkdir()
    done = subprocess.run(
        [*GPUDIAG, "--replay", EXAMPLE, "check", "--quick", "--no-torch", "--json"],
        capture_output=True,
        env=_env(),
        timeout=60,
    )
    (nodes / "node1.json").write_bytes(done.stdout)
    (out / name).write_text("previous\n")
    argv = [a.replace("OUT", str(out)).replace("NODES", str(nodes)) for a in args]
    result = subprocess.run(
        [*GPUDIAG, "--replay", EXAMPLE, *argv],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        preexec_fn=_limit_file_size(64),  # every document is longer than 64 bytes
    )
    assert result.returncode == ExitCode.OUTPUT_ERROR, result.stderr
    assert result.stderr.splitlines()[-1] == f"gpudiag: cannot write {out / name}: File too large"
    assert _visible(out) == [name] and (out / name).read_text() == "previous\n"


@pytest.mark.slow
def test_a_full_disk_during_a_memory_log_keeps_the_whole_samples(tmp_path: Path) -> None:
    log = tmp_path / "memory.jsonl"
    result = subprocess.run(
        [*GPUDIAG, "--replay", EXAMPLE, "memory", "--log", str(log), "--count", "50", "--interval", "0.1"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        preexec_fn=_limit_file_size(20_000),  # a sample of 8 GPUs is ~5 kB of JSON: a few fit
    )
    assert result.returncode == ExitCode.OUTPUT_ERROR
    assert result.stderr.splitlines()[-1] == f"gpudiag: cannot write {log}: File too large"
    samples = [json.loads(line)["sample"] for line in log.read_text().splitlines()]
    assert samples == list(range(1, len(samples) + 1)) and samples  # whole samples only, in order


def test_a_log_in_a_missing_directory_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli.replay(EXAMPLE, "memory", "--count", "1", "--log", str(tmp_path / "no" / "m.csv"))
    assert (
        code == ExitCode.USAGE
        and err == f"gpudiag: cannot write {tmp_path / 'no' / 'm.csv'}: No such file or directory\n"
    )


# --- standard error that cannot be written never changes the exit code ----------------------------


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["list"], ExitCode.OK),
        (["list", "--id", "99"], ExitCode.USAGE),
        (["list", "--no-such-option"], ExitCode.USAGE),
        (["check", "--only", "func"], ExitCode.NOTHING_CHECKED),
        (["memory", "--until-free", "1GiB", "--count", "1"], ExitCode.OK),
        (["memory", "--alert-free-below", "1000TiB", "--count", "1"], ExitCode.FAILED),
    ],
)
def test_stderr_that_cannot_be_written_keeps_the_exit_code(args: list[str], code: ExitCode) -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*GPUDIAG, "--replay", EXAMPLE, *args], stdout=subprocess.DEVNULL, stderr=full, env=_env(), timeout=60
        )
    assert result.returncode == code


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_lost_gpu_keeps_its_code_with_stderr_full() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [*GPUDIAG, "--replay", "gpu-lost", "list"], stdout=subprocess.DEVNULL, stderr=full, env=_env(), timeout=60
        )
    assert result.returncode == ExitCode.GPU_LOST


# --- files an option names for gpudiag to read ------------------------------------------------------


@pytest.mark.parametrize("option", ["--postmortem", "--plot"])
def test_a_file_to_read_that_is_no_regular_file_is_refused_unread(cli: Cli, tmp_path: Path, option: str) -> None:
    """A FIFO blocked for ever, /dev/zero filled the memory, a deep document was exit 70."""
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "\n")
    code, _, err = cli("memory", option, str(deep))
    assert code == ExitCode.USAGE and "nested too deeply" in err, err
    # A regression blocks on the FIFO: a writer releases it (so the test fails, never hangs) before
    # /dev/zero, last, could fill the memory.
    threading.Thread(target=lambda: time.sleep(10) or fifo.open("wb").close(), daemon=True).start()
    cases = {
        "/proc/self/status": "empty (or a kernel file in /proc): not read",
        str(tmp_path / "none.jsonl"): "no such file",
        str(fifo): "not a regular file (a FIFO, a device or a directory): not read",
        "/dev/zero": "not a regular file (a FIFO, a device or a directory): not read",
    }
    for path, why in cases.items():
        code, out, err = cli("memory", option, path)
        assert (code, out, err) == (ExitCode.USAGE, "", f"gpudiag: {option} {path}: {why}\n")
