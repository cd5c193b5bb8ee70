"""`gpudiag top`: its rows (pure), who may be signalled, and the app driven headless by Textual's own
pilot (keys, mouse, sorting, filtering, the tree, a process's detail, the signal's confirmation on a real
child process) with snapshots of its screens at fixed sizes (tests/golden/top/*.svg)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpudiag import api
from gpudiag.top import rows
from gpudiag.top.host import LiveHost, ReplayedHost, cuda_env, may_signal
from tests.golden import GOLDEN, assert_matches_golden


def ui() -> Any:
    """gpudiag.top.app, imported by the tests that drive it (Textual costs ~0.5 s to import)."""
    pytest.importorskip("textual")
    import gpudiag.top.app

    return gpudiag.top.app


def widgets() -> Any:
    import textual.widgets

    return textual.widgets


TRAINING = "h100x8-training-64procs"


# --- rows ---------------------------------------------------------------------------------------


def test_sparkline_scales_to_the_top() -> None:
    assert rows.sparkline([0, 50, 100], 100.0) == "▁▅█"
    assert rows.sparkline([]) == ""
    assert len(rows.sparkline(range(100))) == rows.HISTORY


def test_filter_reads_users_gpus_and_words() -> None:
    f = rows.parse_filter("user:alice,bob gpu:1,3 Train")
    assert f.users == {"alice", "bob"} and f.gpus == {1, 3} and f.words == ("train",)
    assert rows.parse_filter("gpu:x").error == "gpu:x: not a GPU index"
    line = rows.ProcLine(1, 42, "alice", "C", 1, 1.0, 1, "cuda:0", "python train.py", "")
    assert rows.matches(line, f)
    assert not rows.matches(msgspec.structs.replace(line, gpu=2), f)
    assert not rows.matches(msgspec.structs.replace(line, user="eve"), f)
    assert rows.matches(line, rows.parse_filter("42"))  # a PID is text too


def _line(pid: int, mem: int | None, gpu: int = 0) -> rows.ProcLine:
    return rows.ProcLine(gpu, pid, "u", "C", mem, None, None, "", f"cmd {pid}", "")


def test_sort_puts_unknown_values_last_and_ties_in_gpu_pid_order() -> None:
    procs = [_line(3, None), _line(1, 10), _line(2, 10, gpu=1), _line(4, 30)]
    assert [p.pid for p in rows.sort_procs(procs, "mem", reverse=True)] == [4, 1, 2, 3]
    assert [p.pid for p in rows.sort_procs(procs, "pid", reverse=False)] == [1, 2, 3, 4]


def test_tree_nests_under_the_nearest_gpu_process_ancestor() -> None:
    launcher, rank0, rank1, worker, other = _line(10, 1), _line(11, 1), _line(12, 1), _line(13, 1), _line(20, 1)
    parents = {11: 10, 12: 5, 5: 10, 13: 11, 10: 1, 20: 1}  # 12's parent is a shell under the launcher
    nested = rows.tree([rank1, worker, other, rank0, launcher], parents)
    assert [(p.pid, p.depth) for p in nested] == [(20, 0), (10, 0), (12, 1), (11, 1), (13, 2)]
    assert nested[3].last and not nested[2].last
    assert [p.pid for p in rows.tree([rank0, launcher], {})] == [11, 10]  # no parents known: flat
    assert len(rows.tree([_line(1, 1), _line(2, 1)], {1: 2, 2: 1})) == 2  # a cycle still shows every row


def test_only_root_signals_other_users_processes() -> None:
    assert may_signal(1000, 1000) == ""
    assert may_signal(0, 0) == ""
    assert may_signal(1000, 0) == ""
    assert "another user" in may_signal(0, 1000)
    assert "cannot be read" in may_signal(None, 1000)


def test_live_host_refuses_another_users_process_before_trying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    host = LiveHost()
    assert "another user" in host.why_not(1)  # init, root's
    assert host.send(1, "KILL").startswith("PID 1 not signalled")


@pytest.mark.slow
def test_a_reused_pid_is_not_signalled() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        host = LiveHost()
        started = host.started(child.pid)
        assert started is not None
        refused = host.send(child.pid, "TERM", started - 5)  # confirmed about a process that started earlier
        assert refused.endswith("it is another process now (the one asked about has exited)")
        assert child.poll() is None
        assert host.send(child.pid, "TERM", started) == f"SIGTERM sent to PID {child.pid}"
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_replay_signals_nothing() -> None:
    assert "replay" in ReplayedHost().why_not(50000)
    assert ReplayedHost().send(50000, "KILL").startswith("PID 50000 not signalled")


def test_cuda_env_keeps_what_bears_on_cuda() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "1",
        "NCCL_DEBUG": "INFO",
        "HOME": "/root",
        "RANK": "3",
        "PYTORCH_CUDA_ALLOC_CONF": "x",
    }
    assert list(cuda_env(env)) == ["CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "PYTORCH_CUDA_ALLOC_CONF", "RANK"]


# --- the app, headless ----------------------------------------------------------------------------


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def table(app: Any, name: str) -> Any:
    return app.query_one(f"#{name}", widgets().DataTable)


def first_pid(app: Any) -> int:
    return app.proc_lines[table(app, "procs").cursor_row].pid


@pytest.mark.slow  # Textual's import alone is ~0.5 s
def test_the_example_shows_gpus_and_processes_and_quits_on_q() -> None:
    async def go() -> Any:
        with api.Sampler(TRAINING) as sampler:
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600, described=f"replay {TRAINING}")
            async with app.run_test(size=(80, 30)) as pilot:
                await pilot.pause()
                assert table(app, "gpus").row_count == 8
                assert table(app, "procs").row_count == 64
                before = app.export_screenshot()
                app.refresh_sample()  # the series' next moment: the changed cells drawn anew, none stale
                await pilot.pause()
                shown = str(table(app, "gpus").get_row_at(0)[1])  # 80 columns: GPU, UTIL, ...
                assert shown == f"{app.sample.machine.gpus[0].utilization.value.gpu_percent}%"
                assert app.export_screenshot() != before
                await pilot.press("q")
            return app

    assert run(go()).return_code == 0


@pytest.mark.slow
def test_keys_sort_reverse_filter_tree_and_ctrl_c() -> None:
    async def go() -> Any:
        with api.Sampler(TRAINING) as sampler:
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600)
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.pause()
                mems = [p.mem for p in app.proc_lines]
                assert mems == sorted(mems, reverse=True)  # default: GPU memory, largest first
                await pilot.press("r")
                assert [p.mem for p in app.proc_lines] == sorted(mems)
                await pilot.press("comma", "comma", "comma")  # 80 columns: mem -> user -> pid -> gpu
                assert app.sort_column == "gpu"
                assert [p.gpu for p in app.proc_lines] == sorted(p.gpu for p in app.proc_lines)
                await pilot.press("full_stop")
                assert app.sort_column == "pid"
                await pilot.press("slash", *"gpu:3", "enter")
                assert {p.gpu for p in app.proc_lines} == {3} and len(app.proc_lines) == 8
                await pilot.press("slash", "space", *"50031")  # added to what the box holds
                assert [p.pid for p in app.proc_lines] == [50031]
                await pilot.press("escape")  # leaves the box
                await pilot.press("escape")  # clears the filter
                assert len(app.proc_lines) == 64
                await pilot.press("slash", *"user:nobody")
                assert app.proc_lines == [] and table(app, "procs").row_count == 0
                await pilot.press("escape", "escape")
                await pilot.press("t")  # the tree: a replay records no parents, so it stays flat and says so
                assert app.tree_view and all(p.depth == 0 for p in app.proc_lines)
                assert "a replay records no parents" in str(app.query_one("#summary", widgets().Static).render())
                await pilot.press("K")  # a replay is never signalled: no confirmation is even asked
                assert not isinstance(app.screen, ui().ConfirmSignal)
                assert "this is a replay" in app.message
                await pilot.press("slash")
                await pilot.press("ctrl+c")  # even from the filter box: an interrupt, 130
            return app

    assert run(go()).return_code == 130


@pytest.mark.slow
def test_mouse_sorts_by_a_heading_and_g_keeps_one_gpu() -> None:
    async def go() -> None:
        with api.Sampler(TRAINING) as sampler:
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600)
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.pause()
                procs = table(app, "procs")
                await pilot.click("#procs", offset=(procs.columns["gpu"].get_render_width(procs) + 2, 0))
                await pilot.pause()
                assert app.sort_column == "pid"
                table(app, "gpus").focus()
                table(app, "gpus").move_cursor(row=5)
                await pilot.pause()
                assert app.message == "GPU 5: health ok"  # the GPU under the cursor: its findings
                await pilot.press("g")
                assert {p.gpu for p in app.proc_lines} == {5}
                assert app.query_one("#filter", widgets().Input).value == "gpu:5"
                await pilot.press("escape")
                assert len(app.proc_lines) == 64
                await pilot.click("#procs", offset=(10, 3))  # a row: the cursor moves there
                await pilot.pause()
                assert table(app, "procs").cursor_row == 2 and not isinstance(app.screen, ui().Detail)
                await pilot.click("#procs", offset=(10, 3))  # again: its detail
                await pilot.pause()
                assert isinstance(app.screen, ui().Detail)

    run(go())


@pytest.mark.slow
def test_detail_shows_allocator_and_forecast_where_the_tracker_reports_them() -> None:
    async def go() -> None:
        with api.Sampler("h100-leak-per-step") as sampler:
            sampler.sample()  # a forecast needs samples
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600)
            async with app.run_test(size=(100, 30)) as pilot:
                await pilot.pause()
                await pilot.press("enter")
                await pilot.pause()
                assert isinstance(app.screen, ui().Detail)
                text = str(app.screen.query_one(widgets().Static).render())
                assert "PID 4242" in text and "allocator (cuda:0): allocated" in text
                assert "forecast: this process fills up in" in text
                assert "environment: not recorded in a replay" in text
                await pilot.press("escape")
                assert not isinstance(app.screen, ui().Detail)

    run(go())


class RealPids:
    """A replay whose first processes are ``pids`` (real processes the test started, largest first), on
    a live host."""

    def __init__(self, sampler: api.Sampler, pids: list[int]) -> None:
        self.sampler, self.pids = sampler, pids

    @property
    def state(self) -> Any:
        return self.sampler.state

    def sample(self) -> api.Sample:
        s = self.sampler.sample()
        rows = list(s.memory.processes)
        for i, pid in enumerate(self.pids):
            used = api.Reading.of((1 << 40) - i)
            rows[i] = msgspec.structs.replace(
                rows[i], process=msgspec.structs.replace(rows[i].process, pid=pid, used_memory_bytes=used)
            )
        return msgspec.structs.replace(s, memory=msgspec.structs.replace(s.memory, processes=tuple(rows)))


@pytest.mark.slow
def test_a_signal_is_sent_only_after_the_confirmation() -> None:
    sent = [("T", signal.SIGTERM), ("K", signal.SIGKILL), ("I", signal.SIGINT)]
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in sent]
    try:

        async def go() -> None:
            with api.Sampler(TRAINING) as sampler:
                app = ui().TopApp(RealPids(sampler, [c.pid for c in children]), LiveHost(), interval=3600)
                async with app.run_test(size=(80, 30)) as pilot:
                    await pilot.pause()
                    for row, ((key, signum), child) in enumerate(zip(sent, children, strict=True)):
                        table(app, "procs").move_cursor(row=row)
                        assert first_pid(app) == child.pid
                        await pilot.press(key)
                        await pilot.pause()
                        assert isinstance(app.screen, ui().ConfirmSignal)
                        await pilot.press("n")
                        await pilot.pause()
                        assert child.poll() is None and "not sent" in app.message
                        await pilot.press(key)
                        await pilot.pause()
                        await pilot.press("y")
                        await pilot.pause()
                        assert app.message == f"SIG{signal.Signals(signum).name[3:]} sent to PID {child.pid}"

        run(go())
        assert [c.wait(timeout=10) for c in children] == [-signum for _, signum in sent]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


@pytest.mark.slow
def test_outside_text_reaches_the_screen_escaped() -> None:
    async def go() -> str:
        with api.Sampler("hostile-strings") as sampler:
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600, described="replay hostile")
            async with app.run_test(size=(160, 40)) as pilot:
                await pilot.pause()
                await pilot.press("enter")
                await pilot.pause()
                return app.export_screenshot()

    svg = run(go())
    assert "\x1b" not in svg and "\u202e" not in svg and "\x07" not in svg
    assert "\\x1b" in svg  # shown as its escape


# --- snapshots ----------------------------------------------------------------------------------


async def settled(app: Any, pilot: Any) -> None:
    """Until the footer has drawn its keys (Textual composes it after the first frame)."""
    for _ in range(100):
        await pilot.pause()
        if app.screen.query("FooterKey"):
            return
    raise AssertionError("the footer never drew its keys")


def screenshot(
    size: tuple[int, int], keys: tuple[str, ...] = (), replay: str = TRAINING, skip: int = 0, refreshes: int = 0
) -> str:
    """The screen at ``size`` after ``keys``; ``skip``: samples read before the app starts, ``refreshes``:
    samples it shows after its first."""

    async def go() -> str:
        with api.Sampler(replay) as sampler:
            for _ in range(skip):
                sampler.sample()
            app = ui().TopApp(sampler, ReplayedHost(), interval=3600, described=f"replay {replay}")
            async with app.run_test(size=size) as pilot:
                await settled(app, pilot)
                for _ in range(refreshes):
                    app.refresh_sample()
                    await pilot.pause()
                if keys:
                    await pilot.press(*keys)
                    await pilot.pause()
                    if not app.screen.query("Footer"):  # a modal screen: the one below has its footer
                        await pilot.pause()
                    else:
                        await settled(app, pilot)
                shot = app.export_screenshot(simplify=True)
                for _ in range(20):  # until a frame more changes nothing (layout may still be pending)
                    await pilot.pause(0.05)
                    again = app.export_screenshot(simplify=True)
                    if again == shot:
                        break
                    shot = again
                return shot

    return run(go())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "size", "keys"),
    [
        ("training-80x30", (80, 30), ()),
        ("training-160x45", (160, 45), ()),
        ("training-filtered-80x30", (80, 30), ("slash", *"gpu:2", "enter")),
        ("training-detail-100x30", (100, 30), ("enter",)),
    ],
)
def test_screens_match_their_snapshots(name: str, size: tuple[int, int], keys: tuple[str, ...]) -> None:
    assert_matches_golden(GOLDEN / "top" / f"{name}.svg", screenshot(size, keys))


@pytest.mark.slow
def test_a_refresh_draws_what_a_fresh_start_on_that_sample_draws() -> None:
    """The cells kept between refreshes (top.app.Table) are never stale: after a refresh the screen is the
    one an app started on that sample draws (80 columns show no history, the one thing that differs)."""
    refreshed = screenshot((80, 30), refreshes=2)
    assert refreshed != screenshot((80, 30))
    assert refreshed == screenshot((80, 30), skip=2)


@pytest.mark.slow
def test_no_color_drops_the_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    plain = screenshot((80, 30))
    assert plain != (GOLDEN / "top" / "training-80x30.svg").read_text()  # the same screen in colour
    assert_matches_golden(GOLDEN / "top" / "training-no-color-80x30.svg", plain)


# --- the command, as a person runs it -------------------------------------------------------------


@pytest.mark.slow
def test_the_command_in_a_terminal_shows_the_example_and_quits_on_q(tmp_path: Path) -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: gpudiag top on the pty, 80 columns
        os.environ.update({"COLUMNS": "80", "LINES": "30", "TERM": "xterm-256color"})
        os.execv(sys.executable, [sys.executable, "-m", "gpudiag", "--replay", TRAINING, "top"])
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 80, 0, 0))
    seen = b""
    deadline = time.monotonic() + 30
    while b"50007" not in seen and time.monotonic() < deadline:
        try:
            seen += os.read(fd, 65536)
        except OSError:
            break
    assert b"50007" in seen and b"H100" not in seen[:0]  # a process row drawn
    os.write(fd, b"q")
    while time.monotonic() < deadline:
        try:
            if not os.read(fd, 65536):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_command_refuses_a_pipe_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import build_app

    result = CliRunner().invoke(build_app("top"), ["--replay", TRAINING, "top"])
    assert result.exit_code == 2
    assert "needs a terminal" in result.output and "Traceback" not in result.output


def test_the_command_without_textual_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudiag.top import request

    monkeypatch.setitem(sys.modules, "textual", None)  # import textual -> ImportError
    from typer.testing import CliRunner

    from gpudiag.cli.app import build_app

    result = CliRunner().invoke(build_app("top"), ["--replay", TRAINING, "top"])
    assert request.INSTALL_HINT in result.output
    assert result.exit_code == 1


class Stalling:
    """A source whose reads after the first wait for ``release`` (an NVML call that does not return),
    or raise when ``fail`` is set."""

    def __init__(self, sampler: api.Sampler) -> None:
        import threading

        self.sampler, self.release, self.fail, self.reads = sampler, threading.Event(), False, 0

    @property
    def state(self) -> Any:
        return self.sampler.state

    def sample(self) -> api.Sample:
        self.reads += 1
        if self.reads > 1:
            if self.fail:
                raise OSError("NVML went away")
            self.release.wait(30)
        return self.sampler.sample()


@pytest.mark.slow
def test_a_hung_read_leaves_the_screen_answering_and_q_quits() -> None:
    async def go() -> tuple[Any, Stalling]:
        with api.Sampler(TRAINING) as sampler:
            source = Stalling(sampler)
            app = ui().TopApp(source, ReplayedHost(), interval=0.1)
            async with app.run_test(size=(80, 30)) as pilot:
                for _ in range(100):
                    await pilot.pause(0.05)
                    if app.message.startswith("the last read has taken"):
                        break
                assert app.message.startswith("the last read has taken"), app.message
                await pilot.press("r")  # keys still work
                assert not app.reverse
                source.release.set()
                for _ in range(100):
                    await pilot.pause(0.05)
                    if app.sample is not None and app.sample.number >= 1:
                        break
                assert app.sample.number >= 1 and app.message == ""  # the late sample shown, the warning gone
                source.fail = True
                for _ in range(100):
                    await pilot.pause(0.05)
                    if app.message.startswith("read failed"):
                        break
                assert app.message == "read failed: OSError: NVML went away"
                await pilot.press("q")
            return app, source

    app, _ = run(go())
    assert app.return_code == 0


def test_cuda_names_follow_the_process_own_visible_devices() -> None:
    from gpudiag.top.host import cuda_names

    class Host:
        live = True

        def environ(self, pid: int) -> dict[str, str] | None:
            return {1: {"CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 2: {}}.get(pid)

    sample = next(api.watch(replay="h100x8-healthy", count=1))
    name = cuda_names(Host())  # type: ignore[arg-type]
    assert [name(sample, gpu, 1) for gpu in (3, 1, 0)] == ["cuda:0", "cuda:1", ""]
    assert name(sample, 5, 2) == "cuda:5"  # unset: every GPU, in order
    assert name(sample, 0, 3) == ""  # environment not readable


@pytest.mark.slow
def test_live_host_reads_parents_up_the_chain() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        parents = LiveHost().parents([child.pid])
        assert parents[child.pid] == os.getpid()
        assert os.getpid() in parents  # and on up
        assert LiveHost().environ(child.pid) is not None  # our own child: readable
    finally:
        child.kill()
        child.wait()
