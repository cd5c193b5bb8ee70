"""docs/api.md's examples run as shown: each ```python block runs, and the ```text block right after it
is what it prints. The loggers' recipes (TensorBoard, Lightning, Hugging Face) run in a child against
stand-ins of those packages (not installed here) that record what they were handed.
After a deliberate change of what they print: ``python -m tests.test_api_docs`` rewrites the page."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
_BLOCK = re.compile(r"```python\n(?P<code>.*?)```(?:\n\n```text\n(?P<shown>.*?)```)?", re.S)
THIRD_PARTY = ("torch", "lightning", "transformers")


def blocks() -> list[tuple[int, str, str | None]]:
    text = PAGE.read_text()
    return [(text[: m.start()].count("\n") + 1, m["code"], m["shown"]) for m in _BLOCK.finditer(text)]


def _third_party(code: str) -> bool:
    return any(re.search(rf"^(from|import) {name}\b", code, re.M) for name in THIRD_PARTY)


def test_the_page_has_examples_of_each_part() -> None:
    code = "\n".join(c for _, c, _ in blocks())
    for name in ("read_machine", "run_checks", "exit_code", "health", "watch", "Collector", "add_scalar", "log_dict"):
        assert name in code, name
    assert sum(shown is not None for _, _, shown in blocks()) >= 5


@pytest.mark.parametrize(
    ("line", "code", "shown"),
    [b for b in blocks() if not _third_party(b[1])],
    ids=lambda v: f"api.md:{v}" if isinstance(v, int) else "",
)
def test_example_prints_what_the_page_shows(line: int, code: str, shown: str | None, monkeypatch) -> None:
    monkeypatch.delenv("GPUDIAG_REPLAY", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/api.md:{line}", "exec"), {"__name__": "__doc_example__"})
    assert shown is not None, f"docs/api.md:{line}: an example that prints nothing shown"
    assert out.getvalue() == shown


STUBS = {
    "torch/__init__.py": "",
    "torch/utils/__init__.py": "",
    "torch/utils/tensorboard/__init__.py": """
        class SummaryWriter:
            def __init__(self, logdir):
                self.scalars = []
            def add_scalar(self, key, value, step):
                assert isinstance(key, str) and isinstance(value, float) and isinstance(step, int)
                self.scalars.append((key, step))
            def close(self):
                steps = sorted({s for _, s in self.scalars})
                keys = {k for k, _ in self.scalars}
                print("steps", steps, "allocator", any(k.endswith("/allocated (MiB)") for k in keys),
                      "forecast", any(k.endswith("/time_to_oom (s)") for k in keys))
    """,
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "class Callback:\n    pass\n",
    "transformers/__init__.py": "class TrainerCallback:\n    pass\n",
}
# What runs the Lightning and Hugging Face callbacks as their trainers would.
DRIVE_CALLBACKS = """
class Module:
    def log_dict(self, figures):
        print("lightning logged", len(figures) > 10, all(isinstance(v, float) for v in figures.values()))
GpuFigures().on_train_batch_end(None, Module(), None, None, 0)
logs = {"loss": 0.5}
HfGpuFigures().on_log(None, None, None, logs=logs)
print("hf logged", logs["loss"], "gpudiag/gpu:0/memory_used (MiB)" in logs)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "code", "expected"),
    [
        (line, code, "lightning logged True True\nhf logged 0.5 True\n" if "GpuFigures" in code else None)
        for line, code, _ in blocks()
        if _third_party(code)
    ],
    ids=lambda v: f"api.md:{v}" if isinstance(v, int) else "",
)
def test_logger_recipes_run(line: int, code: str, expected: str | None, tmp_path: Path) -> None:
    for name, text in STUBS.items():
        path = tmp_path / "stubs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    program = code + (DRIVE_CALLBACKS if expected else "")
    env = {k: v for k, v in os.environ.items() if k != "GPUDIAG_REPLAY"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "stubs"), str(ROOT)])
    env["GPUDIAG_TRACK_DIR"] = str(tmp_path / "track")  # the tracker's entry, away from the user's
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (expected or "steps [0, 1, 2] allocator True forecast True\n")


def rewrite() -> None:
    """Put what each example prints under it (after a deliberate change: review `git diff docs/api.md`)."""
    os.environ.pop("GPUDIAG_REPLAY", None)
    text = PAGE.read_text()

    def shown(match: re.Match[str]) -> str:
        if _third_party(match["code"]) or match["shown"] is None:
            return match.group(0)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(match["code"], str(PAGE), "exec"), {"__name__": "__doc_example__"})
        return f"```python\n{match['code']}```\n\n```text\n{out.getvalue()}```"

    PAGE.write_text(_BLOCK.sub(shown, text))


if __name__ == "__main__":  # python -m tests.test_api_docs
    rewrite()
