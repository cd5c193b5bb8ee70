"""The committed completion scripts match the app, and each shell accepts and uses them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpudiag import completions

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT / "completions"


@pytest.mark.parametrize("filename", sorted(completions.SCRIPTS))
def test_committed_script_is_current(filename: str) -> None:
    committed = (COMPLETIONS / filename).read_text()
    assert committed == completions.SCRIPTS[filename](), (
        f"completions/{filename} is out of date: run `python -m gpudiag.completions completions/`"
    )


def test_every_command_and_option_is_offered() -> None:
    _root, commands = completions.model()
    script = completions.bash()
    for cmd in commands:
        assert cmd.name in script
        for opt in cmd.options:
            for name in opt.names:
                assert name in script


def _bash_complete(words: list[str]) -> list[str]:
    line = " ".join(words)
    program = (
        f"source {COMPLETIONS / 'gpudiag.bash'}\n"
        f"COMP_WORDS=({line})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_gpudiag\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True, cwd="/")
    return out.stdout.split()


def test_bash_completes_commands_options_and_values() -> None:
    assert "list" in _bash_complete(["gpudiag", "li"])
    assert _bash_complete(["gpudiag", "list", "--no-"]) == ["--no-processes"]
    assert _bash_complete(["gpudiag", "--color", "ne"]) == ["never"]
    assert "h100x8-healthy" in _bash_complete(["gpudiag", "--replay", "h100"])


@pytest.mark.parametrize(("shell", "filename"), [("zsh", "_gpudiag"), ("fish", "gpudiag.fish")])
def test_script_parses_in_its_shell(shell: str, filename: str) -> None:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed")
    result = subprocess.run([exe, "-n", str(COMPLETIONS / filename)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
