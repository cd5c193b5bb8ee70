"""torch build facts read from its installed files, without importing torch (≈1.5 s)."""

from __future__ import annotations

import ast
import importlib.util
import os
from typing import TYPE_CHECKING

from gpudiag.model import Reading, Reason, TorchBuild

if TYPE_CHECKING:
    from os import PathLike


def torch_build() -> Reading[TorchBuild]:
    try:
        spec = importlib.util.find_spec("torch")  # locates the package without running it
    except (ImportError, ValueError) as exc:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"cannot locate torch: {exc}")
    if spec is None or not spec.submodule_search_locations:
        return Reading.missing(Reason.NOT_FOUND, "torch is not installed (pip install 'gpudiag[torch]')")
    return read_version_file(next(iter(spec.submodule_search_locations)))


def read_version_file(package_dir: str | PathLike[str]) -> Reading[TorchBuild]:
    """Parse torch/version.py, which the build writes as plain assignments (read with os.path: every
    live command reads it, and pathlib costs it ~5 ms of start-up)."""
    path = os.path.join(package_dir, "version.py")
    try:
        with open(path) as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError) as exc:
        return Reading.missing(Reason.UNKNOWN_ERROR, f"unreadable {path}: {exc}")
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and node.value is not None:
                    try:
                        values[target.id] = ast.literal_eval(node.value)
                    except ValueError:
                        continue
    version = values.get("__version__")
    if not isinstance(version, str):
        return Reading.missing(Reason.UNKNOWN_ERROR, f"{path} has no __version__")
    cuda, hip = values.get("cuda"), values.get("hip")
    return Reading.of(
        TorchBuild(
            version=version,
            cuda=cuda if isinstance(cuda, str) else None,
            hip=hip if isinstance(hip, str) else None,
            location=os.fspath(package_dir),
        )
    )
