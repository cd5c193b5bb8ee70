"""The capture tool's command line: help and a wrong moment are argparse's lines, not tracebacks."""

from __future__ import annotations

import pytest

from tests.hardware import capture


def test_help_and_a_moment_not_captured_are_usage_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        capture.main(["--help"])
    assert stop.value.code == 0
    assert "--into MACHINE.json" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        capture.main(["--help-me"])
    assert stop.value.code == 2
    with pytest.raises(SystemExit) as stop:
        capture.main(["lunch"])
    assert stop.value.code == 2
    assert "no capture of moment 'lunch'" in capsys.readouterr().err
