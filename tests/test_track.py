"""The allocator tracker: file format, permissions, atomic writes, staleness, foreign entries, launcher."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudiag import track
from gpudiag.track import entries
from tests.conftest import skip_without_torch


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An XDG runtime directory of our own; the tracker's directory under it."""
    monkeypatch.delenv(entries.DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "gpudiag"


def entry(pid: int, updated_at: float, **fields: Any) -> dict[str, Any]:
    dev = {
        "torch_index": 0,
        "uuid": "8e1f2a6c-4b7d-4c1e-9a3f-1d0c5e7b2000",
        "pci_bus_id": "00000000:18:00.0",
        "name": "x",
        "allocated_bytes": 100,
        "reserved_bytes": 300,
        "peak_allocated_bytes": 200,
        "peak_reserved_bytes": 400,
        "alloc_retries": 0,
        "ooms": 0,
    }
    data: dict[str, Any] = {
        "schema": entries.SCHEMA,
        "pid": pid,
        "start_ticks": entries.start_ticks(pid),
        "pid_namespace": entries.pid_namespace(),
        "command": "python train.py",
        "interval_s": 2.0,
        "updated_at": updated_at,
        "devices": [dev],
    }
    data.update(fields)
    return data


def put(directory: Path, data: dict[str, Any], name: str | None = None) -> Path:
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / (name or f"{data['pid']}.json")
    path.write_text(json.dumps(data))
    return path


def wait_for(path: Path, present: bool = True, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while path.exists() != present and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists() == present


# --- writing -------------------------------------------------------------------------


def test_start_writes_a_private_atomic_entry_and_stop_removes_it(runtime: Path) -> None:
    assert track.start(interval=0.2)
    path = runtime / f"{os.getpid()}.json"
    try:
        wait_for(path)
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        data = json.loads(path.read_text())
        assert data["schema"] == entries.SCHEMA and data["pid"] == os.getpid()
        assert data["interval_s"] == track.MIN_INTERVAL_S and data["start_ticks"] == entries.start_ticks(os.getpid())
        assert not list(runtime.glob(".tmp-*"))  # temp files are renamed into place
        assert track.start() and track.running()  # idempotent: still one thread
        assert [t.name for t in threading.enumerate()].count("gpudiag-track") == 1
        assert os.getpid() in entries.read_entries()  # what it writes, the reader accepts
    finally:
        track.stop()
    assert not path.exists() and not track.running()
    track.stop()  # a second stop is harmless


def test_entries_are_replaced_whole_while_being_read(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers racing the writer always parse a complete entry: os.replace is atomic."""
    monkeypatch.setattr(track, "MIN_INTERVAL_S", 0.02)  # the tracker thread writes ~15 times while we read
    assert track.start(interval=0.02)
    path = runtime / f"{os.getpid()}.json"
    try:
        wait_for(path)
        stop = time.monotonic() + 0.3
        reads = 0
        while time.monotonic() < stop:
            track.write_entry(path, track.snapshot(interval=0.02))  # a second writer, as fast as it goes
            data = json.loads(path.read_text())  # never half a file
            assert data["schema"] == entries.SCHEMA
            reads += 1
        assert reads > 10
    finally:
        track.stop()


def test_publishing_survives_its_directory_being_removed(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A /tmp cleaner, or the user's runtime directory removed at logout while training goes on."""
    import shutil

    monkeypatch.setattr(track, "MIN_INTERVAL_S", 0.05)  # the next publication comes at once, not in a second
    assert track.start(interval=0.05)
    path = runtime / f"{os.getpid()}.json"
    try:
        wait_for(path)
        shutil.rmtree(runtime)
        wait_for(path, seconds=10)
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    finally:
        track.stop()


def test_a_directory_others_can_use_is_refused_and_the_next_one_used(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime.mkdir(mode=0o777)
    runtime.chmod(0o777)  # e.g. made by a careless script: anyone could plant or read entries
    fallback = tmp_path / "fallback"
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(fallback))
    fallback.mkdir()
    assert track.start(interval=0.2)
    try:
        wait_for(fallback / f"gpudiag-{os.getuid()}" / f"{os.getpid()}.json")
        assert not list(runtime.glob("*.json"))
    finally:
        track.stop()
    assert not (fallback / f"gpudiag-{os.getuid()}" / f"{os.getpid()}.json").exists()


def test_start_never_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(entries.DIR_ENV, str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a directory")
    assert track.start() is False  # cannot make the directory: untracked, not an exception

    def no_threads(*_a: object, **_k: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setenv(entries.DIR_ENV, str(tmp_path / "ok"))
    monkeypatch.setattr(threading.Thread, "start", no_threads)
    assert track.start() is False


@pytest.mark.parametrize("interval", [float("nan"), -1.0, 0.0, float("inf"), "soon"])
def test_a_bad_interval_falls_back_to_the_default(interval: Any) -> None:
    assert track._checked_interval(interval) == entries.DEFAULT_INTERVAL_S


def test_a_failing_device_does_not_hide_the_others() -> None:
    stats = {"allocated_bytes.all.current": 5, "reserved_bytes.all.current": 9, "num_ooms": 1}

    def memory_stats(index: int) -> dict[str, int]:
        if index == 0:
            raise RuntimeError("pluggable allocator has no stats")
        return stats

    props = SimpleNamespace(name="NVIDIA H100", uuid="8e1f2a6c-4b7d", pci_domain_id=0, pci_bus_id=0x18, pci_device_id=0)
    cuda = SimpleNamespace(
        is_initialized=lambda: True,
        device_count=lambda: 2,
        memory_stats=memory_stats,
        get_device_properties=lambda i: props,
    )
    devices = track._device_stats(SimpleNamespace(cuda=cuda, __version__="2.13.0"))
    assert [d["torch_index"] for d in devices] == [1]
    assert devices[0]["pci_bus_id"] == "00000000:18:00.0"
    assert devices[0]["reserved_bytes"] == 9 and devices[0]["ooms"] == 1


@pytest.mark.slow
def test_with_the_real_cpu_torch_it_publishes_no_devices_and_initialises_nothing() -> None:
    torch = pytest.importorskip("torch")
    data = track.snapshot(torch)
    assert data["devices"] == [] and data["torch_version"] == torch.__version__
    assert not torch.cuda.is_initialized()


@pytest.mark.slow
def test_snapshot_never_imports_torch() -> None:
    code = "import sys, gpudiag.track as t; t.snapshot(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_a_cpu_training_loop_runs_unchanged_with_the_tracker_on(tmp_path: Path) -> None:
    """The real CPU torch: the tracker thread runs beside a training loop that never notices."""
    skip_without_torch()
    script = tmp_path / "train.py"
    script.write_text(
        "import json, os, sys, torch\n"
        "import gpudiag.track\n"
        "assert gpudiag.track.start(interval=0.2)\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Linear(32, 4)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x, y = torch.randn(256, 32), torch.randn(256, 4)\n"
        "for _ in range(300):\n"
        "    opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(x), y); loss.backward(); opt.step()\n"
        "d = gpudiag.track.entries.runtime_dirs()[0]\n"
        "print(json.dumps({'entry': json.load(open(d / f'{os.getpid()}.json')), 'loss': loss.item(),\n"
        "                  'cuda_initialized': torch.cuda.is_initialized()}))\n"
    )
    env = {**os.environ, entries.DIR_ENV: str(tmp_path / "track")}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr
    out = json.loads(result.stdout)
    assert out["entry"]["devices"] == [] and out["entry"]["torch_version"]
    assert out["cuda_initialized"] is False
    assert not list((tmp_path / "track").glob("*.json"))  # removed at exit


# --- reading -------------------------------------------------------------------------


def test_reader_keeps_fresh_live_entries_and_ignores_the_rest(runtime: Path) -> None:
    now = time.time()
    put(runtime, entry(os.getpid(), now))
    put(runtime, entry(999_999_999, now, start_ticks=None))  # no such process
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        put(runtime, entry(child.pid, now - 120))  # stale: its writer stopped two minutes ago
        (runtime / "garbage.json").write_text("{not json")
        (runtime / "777.json").write_text(json.dumps({"schema": "something/9", "pid": 777}))
        (runtime / "778.json").write_text(json.dumps({"schema": entries.SCHEMA, "pid": 778}))  # fields missing
        found = entries.read_entries(runtime, now)
    finally:
        child.kill()
        child.wait()
    assert list(found) == [os.getpid()]
    assert found[os.getpid()].devices[0].reserved_bytes == 300
    assert found[os.getpid()].devices[0].pci_bus_id == "00000000:18:00.0"


def test_staleness_follows_the_writers_interval(runtime: Path) -> None:
    now = time.time()
    put(runtime, entry(os.getpid(), now - 100, interval_s=60.0))  # slow writer: 100 s is < 5 intervals
    assert os.getpid() in entries.read_entries(runtime, now)
    put(runtime, entry(os.getpid(), now - 100, interval_s=2.0))
    assert entries.read_entries(runtime, now) == {}


def test_a_reused_pid_is_not_the_tracked_process(runtime: Path) -> None:
    ticks = entries.start_ticks(os.getpid())
    if ticks is None:
        pytest.skip("no /proc here")
    put(runtime, entry(os.getpid(), time.time(), start_ticks=ticks - 1))  # the writer started earlier: not us
    assert entries.read_entries(runtime) == {}


def test_an_entry_from_another_pid_namespace_is_foreign(runtime: Path) -> None:
    put(runtime, entry(os.getpid(), time.time(), pid_namespace="pid:[1]"))  # written inside a container
    assert entries.read_entries(runtime) == {}


def test_a_file_whose_name_is_not_its_pid_is_foreign(runtime: Path) -> None:
    put(runtime, entry(os.getpid(), time.time()), name="12345.json")
    assert entries.read_entries(runtime) == {}


def test_reader_distrusts_a_directory_others_can_use(runtime: Path) -> None:
    put(runtime, entry(os.getpid(), time.time()))
    runtime.chmod(0o755)
    assert entries.read_entries(runtime) == {}
    runtime.chmod(0o700)
    assert os.getpid() in entries.read_entries(runtime)


def test_reader_ignores_symlinks(runtime: Path, tmp_path: Path) -> None:
    outside = tmp_path / "planted.json"
    outside.write_text(json.dumps(entry(os.getpid(), time.time())))
    runtime.mkdir(mode=0o700)
    (runtime / f"{os.getpid()}.json").symlink_to(outside)
    assert entries.read_entries(runtime) == {}


def test_reader_looks_in_both_runtime_locations(runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training started from a login shell (XDG set), monitor from cron or su (not set), or the reverse."""
    fallback = tmp_path / "tmp"
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(fallback))
    put(fallback / f"gpudiag-{os.getuid()}", entry(os.getpid(), time.time()))
    assert entries.runtime_dirs() == [runtime, fallback / f"gpudiag-{os.getuid()}"]
    assert os.getpid() in entries.read_entries()


def test_recorded_entries_are_read_without_asking_the_host(runtime: Path) -> None:
    put(runtime, entry(31337, 0.0, start_ticks=1, pid_namespace="pid:[1]"))  # a replayed machine's process
    assert entries.read_entries(runtime) == {}
    assert list(entries.read_entries(runtime, live=False)) == [31337]


# --- the launcher --------------------------------------------------------------------


def _launch(args: list[str], directory: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, entries.DIR_ENV: str(directory)}
    return subprocess.run(
        # Absolute: the child may run elsewhere (cwd), and sys.executable is relative when python was
        # found through a relative PATH entry.
        [os.path.abspath(sys.executable), "-m", "gpudiag.track", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


@pytest.mark.slow
def test_launcher_runs_a_script_with_its_arguments(tmp_path: Path) -> None:
    directory = tmp_path / "track"
    script = tmp_path / "train.py"
    script.write_text(
        "import os, sys, json, time\n"
        "import helper\n"  # a module next to the script: sys.path[0] is the script's directory
        "p = os.path.join(os.environ['GPUDIAG_TRACK_DIR'], str(os.getpid()) + '.json')\n"
        "deadline = time.time() + 10\n"
        "while not os.path.exists(p) and time.time() < deadline: time.sleep(0.02)\n"
        "print(json.dumps([sys.argv, __name__, os.path.exists(p), helper.VALUE]))\n"
        "sys.exit(3)\n"
    )
    (tmp_path / "helper.py").write_text("VALUE = 42\n")
    result = _launch(["--interval", "0.2", str(script), "--epochs", "3"], directory, cwd="/")
    assert result.returncode == 3, result.stderr  # the program's own exit status
    argv, name, published, value = json.loads(result.stdout)
    assert argv == [str(script), "--epochs", "3"] and name == "__main__" and published and value == 42
    assert not list(directory.glob("*.json"))  # cleaned up at exit


@pytest.mark.slow
def test_launcher_runs_a_module(tmp_path: Path) -> None:
    (tmp_path / "trainmod.py").write_text("import sys\nprint(__name__, sys.argv[1:])\n")
    result = _launch(["-m", "trainmod", "--lr", "0.1"], tmp_path / "track", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "__main__ ['--lr', '0.1']"


@pytest.mark.slow
def test_launcher_keeps_the_programs_traceback_its_own(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('bad batch')\n")
    result = _launch([str(script)], tmp_path / "track")
    assert result.returncode == 1 and "ValueError: bad batch" in result.stderr
    assert not list((tmp_path / "track").glob("*.json"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "usage"),
        (["-m"], 2, "usage"),
        (["--help"], 0, "usage"),
        (["no-such-script.py"], 2, "can't open file"),
        (["--interval", "nan", "x.py"], 2, "positive number"),
        (["--interval", "-1", "x.py"], 2, "positive number"),
    ],
)
def test_launcher_usage(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    result = _launch(args, tmp_path / "track")
    assert result.returncode == code and message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_memory_view_spells_the_tracker_directory_variable_as_the_tracker_does() -> None:
    # memory.tracked names it itself so that a replay without a recording need not import the tracker.
    from gpudiag.memory import tracked

    assert tracked.TRACK_DIR_ENV == entries.DIR_ENV
