"""Choosing and opening a machine source: live NVML, or a replay."""

from __future__ import annotations

import sys
import types

import pytest

from gpudiag.errors import GpudiagError
from gpudiag.exitcodes import ExitCode
from gpudiag.model import NvmlStatus
from gpudiag.probe import collect as collect_mod


def test_stale_pynvml_copy_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = types.ModuleType("pynvml")
    stale.__file__ = "/site-packages/pynvml/__init__.py"
    monkeypatch.setitem(sys.modules, "pynvml", stale)
    with pytest.raises(GpudiagError) as err:
        collect_mod.collect()
    assert err.value.code == ExitCode.NVML_ERROR
    assert "pip uninstall pynvml" in err.value.message


def test_live_machine_without_driver_is_an_explained_state_not_an_exception() -> None:
    machine = collect_mod.collect()  # this CI machine has no NVIDIA driver
    if machine.nvml.status is NvmlStatus.OK:
        pytest.skip("an NVIDIA driver is present here")
    assert machine.gpus == ()
    assert machine.nvml.detail
    assert machine.nvml.driver_version.reason is not None


def test_replay_from_environment_variable_reaches_commands() -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    result = CliRunner().invoke(app, ["list", "--json"], env={"GPUDIAG_REPLAY": "h100x8-healthy"})
    assert result.exit_code == 0
    assert '"source": "replay:h100x8-healthy"' in result.stdout


def test_a_bug_is_one_line_and_exit_70_and_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from gpudiag.cli.app import app

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr("gpudiag.cli.list_cmd.read_machine", broken)
    monkeypatch.setenv("GPUDIAG_DEBUG", "")  # recorded, so that --debug's setting is undone after the test
    monkeypatch.delenv("GPUDIAG_DEBUG")
    result = CliRunner().invoke(app, ["--replay", "h100x8-healthy", "list"])
    assert result.exit_code == ExitCode.INTERNAL
    assert result.stderr.strip() == (
        "gpudiag: internal error: ZeroDivisionError: simulated bug (run with --debug for the traceback)"
    )
    debug = CliRunner().invoke(app, ["--debug", "--replay", "h100x8-healthy", "list"])
    assert debug.exit_code == ExitCode.INTERNAL
    assert "Traceback" in debug.stderr and "simulated bug" in debug.stderr
