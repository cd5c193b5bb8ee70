"""The allocator tracker: file format, permissions, atomic writes, staleness, launcher."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudiag import track


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "gpudiag"


def entry(pid: int, updated_at: float, **device: int) -> dict[str, object]:
    dev = {
        "torch_index": 0,
        "uuid": "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2000",
        "name": "x",
        "allocated_bytes": 100,
        "reserved_bytes": 300,
        "peak_allocated_bytes": 200,
        "peak_reserved_bytes": 400,
        "alloc_retries": 0,
        "ooms": 0,
    }
    dev.update(device)
    return {
        "schema": track.SCHEMA,
        "pid": pid,
        "command": "python train.py",
        "updated_at": updated_at,
        "devices": [dev],
    }


def test_start_writes_a_private_atomic_entry_and_stop_removes_it(runtime: Path) -> None:
    assert track.start(interval=0.2)
    try:
        path = runtime / f"{os.getpid()}.json"
        deadline = time.time() + 5
        while not path.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        data = json.loads(path.read_text())
        assert data["schema"] == track.SCHEMA and data["pid"] == os.getpid()
        assert not list(runtime.glob(".tmp-*"))  # temp files are renamed into place
        assert track.start()  # idempotent
    finally:
        track.stop()
    assert not (runtime / f"{os.getpid()}.json").exists()


def test_with_the_real_cpu_torch_it_publishes_no_devices() -> None:
    torch = pytest.importorskip("torch")
    data = track.snapshot(torch)
    assert data["devices"] == []  # CUDA never initialised: nothing to report, nothing initialised by us
    assert not torch.cuda.is_initialized()


def test_snapshot_never_imports_torch(runtime: Path) -> None:
    code = "import sys, gpudiag.track as t; t.snapshot(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_reader_keeps_fresh_live_entries_and_ignores_the_rest(runtime: Path) -> None:
    runtime.mkdir(mode=0o700)
    now = time.time()
    (runtime / f"{os.getpid()}.json").write_text(json.dumps(entry(os.getpid(), now)))
    (runtime / "999999.json").write_text(json.dumps(entry(999999, now)))  # no such process
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        (runtime / f"{child.pid}.json").write_text(json.dumps(entry(child.pid, now - 120)))  # stale
        (runtime / "garbage.json").write_text("{not json")
        (runtime / "other.json").write_text(json.dumps({"schema": "something/9"}))
        found = track.read_entries(runtime, now)
    finally:
        child.kill()
        child.wait()
    assert list(found) == [os.getpid()]
    assert found[os.getpid()].devices[0].reserved_bytes == 300


def test_reader_distrusts_a_directory_others_can_write(runtime: Path) -> None:
    runtime.mkdir(mode=0o700)
    (runtime / f"{os.getpid()}.json").write_text(json.dumps(entry(os.getpid(), time.time())))
    runtime.chmod(0o777)
    assert track.read_entries(runtime) == {}


def test_launcher_runs_a_script_with_its_arguments(runtime: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    out = tmp_path / "out.txt"
    script.write_text(
        "import os, sys, json, time\n"
        "time.sleep(0.5)\n"
        f"p = os.path.join({str(runtime)!r}, str(os.getpid()) + '.json')\n"
        f"open({str(out)!r}, 'w').write(json.dumps([sys.argv, os.path.exists(p)]))\n"
    )
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime.parent)}
    subprocess.run(
        [sys.executable, "-m", "gpudiag.track", str(script), "--epochs", "3"], env=env, check=True, timeout=60
    )
    argv, published = json.loads(out.read_text())
    assert argv == [str(script), "--epochs", "3"]
    assert published is True
    assert not list(runtime.glob("*.json"))  # cleaned up at exit


def test_launcher_usage() -> None:
    result = subprocess.run([sys.executable, "-m", "gpudiag.track"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage" in result.stderr
