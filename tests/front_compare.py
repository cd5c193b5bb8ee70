"""The plain front against the Typer command on one command line: the helpers both differential
tests (tests/test_list_fast.py, tests/test_plain_front.py) use."""

from __future__ import annotations

import pytest
import typer

from gpudiag import argv
from gpudiag.cli import plain, plain_front
from gpudiag.cli.app import build_app


def run_front(args: list[str], environ: dict[str, str] | None = None) -> int | None:
    """The front's exit code, or None when it leaves the line to Typer."""
    found = plain_front.read(argv.read(args), environ or {})
    return None if found is None else plain_front.run(found)


def run_typer(args: list[str]) -> int:
    line = argv.read(args)
    try:
        build_app(only=line.command)(args=line.args, prog_name="gpudiag")
    except SystemExit as stop:
        return int(stop.code or 0) if not isinstance(stop.code, str) else 1
    return 0


def assert_same(args: list[str], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The front and the Typer command on one line: the same bytes out, the same exit code."""
    monkeypatch.delenv("GPUDIAG_DEBUG", raising=False)
    capfd.readouterr()
    fast = run_front(args)
    fast_out, fast_err = capfd.readouterr()
    assert fast is not None, f"the front left {args} to Typer"
    monkeypatch.delenv("GPUDIAG_DEBUG", raising=False)  # --debug sets it for the process
    with monkeypatch.context() as patch:  # the Typer command as it printed before cli.plain: click's echo
        patch.setattr(plain, "write", lambda text, err=False: typer.echo(text, nl=False, err=err))
        slow = run_typer(args)
    slow_out, slow_err = capfd.readouterr()
    assert (fast, fast_out, fast_err) == (slow, slow_out, slow_err), args
