"""`gpudiag check` starts its torch child before the CLI is imported (issue 16), and never leaves it behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpudiag import entry
from gpudiag.checks import gather
from gpudiag.probe import torch_runtime
from tests.conftest import skip_without_torch


@pytest.mark.parametrize(
    ("argv", "early"),
    [
        (["check"], True),
        (["check", "--quick", "--json"], True),
        (["--debug", "check", "--quick"], True),
        (["--color", "never", "check"], True),
        (["check", "--skip", "compat"], True),  # torch may still be wanted: check drops it if not
        (["check", "--no-torch"], False),
        (["check", "--python", "/venv/bin/python"], False),
        (["check", "--python=/venv/bin/python"], False),
        (["check", "--only", "health"], False),
        (["check", "--mode", "prolog"], False),
        (["--replay", "h100x8-healthy", "check"], False),
        (["check", "--replay=h100x8-healthy"], False),
        (["check", "--help"], False),
        (["check", "-h"], False),
        (["list"], False),
        (["memory", "check"], False),
        ([], False),
    ],
)
def test_which_command_lines_start_torch_early(argv: list[str], early: bool) -> None:
    assert entry.starts_torch_early(argv, {}) is early


def test_a_replay_named_in_the_environment_starts_no_torch() -> None:
    assert entry.starts_torch_early(["check"], {"GPUDIAG_REPLAY": "h100x8-healthy"}) is False


class FakeRunning:
    def __init__(self) -> None:
        self.killed = False

    def kill(self) -> None:
        self.killed = True


def _plan(python: str | None = None) -> gather.Plan:
    return gather.Plan(replay=None, torch_off="", functional_off="--quick", python=python)


def test_the_check_takes_the_early_child_once(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []

    def launch(python: str | None = None, functional: Any = None, ask: bool = False) -> FakeRunning:
        started.append({"python": python, "ask": ask})
        return FakeRunning()

    monkeypatch.setattr(torch_runtime, "launch", launch)
    torch_runtime.start_early()
    assert started == [{"python": None, "ask": True}]  # asking: the check tells it whether to test
    early = torch_runtime._early
    assert gather._launch(_plan(), wants_functional=False) is early
    assert torch_runtime.take_early() is None
    second = gather._launch(_plan(), wants_functional=False)  # none left: a new one, as asked
    assert second is not early and started[-1] == {"python": None, "ask": False}


def test_an_early_child_of_the_wrong_interpreter_or_not_wanted_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    children: list[FakeRunning] = []

    def launch(python: str | None = None, functional: Any = None, ask: bool = False) -> FakeRunning:
        children.append(FakeRunning())
        return children[-1]

    monkeypatch.setattr(torch_runtime, "launch", launch)
    torch_runtime.start_early()
    gather._launch(_plan(python="/venv/bin/python"), wants_functional=False)
    assert children[0].killed and not children[1].killed
    torch_runtime.start_early()
    gather._drop_early()
    assert children[2].killed and torch_runtime.take_early() is None


def _failing_torch(tmp_path: Path, sleep: float = 0.0) -> dict[str, str]:
    """A torch package that records each import (its process id) and then fails to import."""
    package = tmp_path / "torch"
    package.mkdir()
    marker = tmp_path / "imports"
    (package / "__init__.py").write_text(
        "import os, time\n"
        f"with open({str(marker)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
        f"time.sleep({sleep})\n"
        "raise OSError('libcudnn.so.9: cannot open shared object file')\n"
    )
    pythonpath = os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH", "")])])
    return {**os.environ, "PYTHONPATH": pythonpath, "COLUMNS": "120"}


@pytest.mark.slow
def test_a_live_check_runs_one_torch_child_and_reads_its_answer(tmp_path: Path) -> None:
    env = _failing_torch(tmp_path)
    env.pop("GPUDIAG_REPLAY", None)
    result = subprocess.run(
        [sys.executable, "-m", "gpudiag", "check", "--quick", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    import json

    data = json.loads(result.stdout)
    findings = {c["id"]: c["finding"] for c in data["checks"]}
    assert findings["compat.torch"] == "torch fails to import: OSError: libcudnn.so.9: cannot open shared object file"
    assert len((tmp_path / "imports").read_text().splitlines()) == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("args", [["check", "--quick"], ["check", "--quick", "--no-such-option"]])
def test_no_torch_child_outlives_an_interrupt_or_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    env = _failing_torch(tmp_path, sleep=30)
    env.pop("GPUDIAG_REPLAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    marker = tmp_path / "imports"
    deadline = time.monotonic() + 30
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode in (2, 130)
    pids = [int(line) for line in marker.read_text().splitlines()] if marker.exists() else []
    time.sleep(0.2)
    assert [pid for pid in pids if _alive(pid)] == []


@pytest.mark.slow
def test_the_torch_child_ends_without_the_interpreters_teardown(tmp_path: Path) -> None:
    """With torch loaded, Python's teardown takes ~0.4 s that the check would wait for: the child
    says everything, flushes and leaves (an atexit handler would run in a normal exit)."""
    skip_without_torch()
    marker = tmp_path / "teardown"
    (tmp_path / "sitecustomize.py").write_text(
        f"import atexit\natexit.register(lambda: open({str(marker)!r}, 'w').close())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    script = Path(torch_runtime.__file__).resolve().parent.parent / "children" / "torch_probe.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().splitlines()[-1].startswith("@@GPUDIAG_RESULT@@")
    assert not marker.exists()
