"""The layers' import rules (README "Design"), read from the source with ast: the shape stays true.

- the model (model.py and the details it may carry, details.py) imports nothing else of gpudiag;
- only the live NVML source (probe/collect.py, which hands the module to probe/nvml.py) and the
  replay package (the fake NVML) import pynvml;
- renderers never import probes or children;
- a child that another interpreter runs imports the standard library (and its sibling protocol) only;
- no Python program lives in a string: no module hands code to ``python -c``.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gpudiag"
# The replay package: named gpudiag/replay/ (gpudiag/testing/ before the rename); whichever exists.
REPLAY = next((PACKAGE / name for name in ("replay", "testing") if (PACKAGE / name).is_dir()), None)
STANDALONE_CHILDREN = ("protocol", "torch_probe", "functional", "visible_probe")


@functools.cache
def tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule here."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports(path: Path) -> frozenset[str]:
    """Every module a file imports, anywhere in it (functions and TYPE_CHECKING blocks included)."""
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def modules(folder: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


MODEL = ("gpudiag.model", "gpudiag.details")  # the machine model, and the details it may carry


def test_the_model_imports_nothing_of_gpudiag() -> None:
    for path in (PACKAGE / "model.py", PACKAGE / "details.py"):
        outside = [m for m in imports(path) if m.split(".")[0] == "gpudiag" and not m.startswith(MODEL)]
        assert outside == [], path


def test_only_the_nvml_source_and_the_replay_package_import_pynvml() -> None:
    assert REPLAY is not None
    allowed = {PACKAGE / "probe" / "collect.py", *modules(REPLAY)}
    users = {p for p in modules() if any(m.split(".")[0] == "pynvml" for m in imports(p))}
    assert users - allowed == set(), sorted(name(p) for p in users - allowed)
    assert PACKAGE / "probe" / "collect.py" in users


def test_renderers_never_import_probes() -> None:
    bad = {
        name(p): sorted(m for m in imports(p) if m.startswith(("gpudiag.probe", "gpudiag.children")))
        for p in modules(PACKAGE / "render")
    }
    assert {k: v for k, v in bad.items() if v} == {}


@pytest.mark.parametrize("child", STANDALONE_CHILDREN)
def test_a_child_another_interpreter_runs_imports_the_standard_library_only(child: str) -> None:
    siblings = {"protocol", "functional", "gpudiag.children", *(f"gpudiag.children.{c}" for c in STANDALONE_CHILDREN)}
    outside = {
        m
        for m in imports(PACKAGE / "children" / f"{child}.py")
        if m not in siblings and m.split(".")[0] not in sys.stdlib_module_names
    }
    assert outside == set()


def test_no_program_lives_in_a_string() -> None:
    """Children are run by path; nothing builds code for ``python -c`` (or exec) any more."""
    offenders = []
    for path in modules():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Constant) and node.value == "-c":
                offenders.append(f"{name(path)}:{node.lineno} passes -c")
            # (eval of a type annotation, as serialize does, is typing, not a program)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "exec":
                offenders.append(f"{name(path)}:{node.lineno} calls {node.func.id}")
    assert offenders == []


def test_the_rules_see_what_they_judge() -> None:
    """The checker itself can fail: it finds the imports of a file that breaks each rule."""
    assert "pynvml" in imports(PACKAGE / "probe" / "collect.py")
    assert "torch" not in imports(PACKAGE / "children" / "torch_probe.py")  # imported by name at run time
    assert {"gpudiag.model", "gpudiag.probe.child"} <= imports(PACKAGE / "probe" / "torch_runtime.py")


def test_visibility_is_a_package_whose_modules_name_their_jobs() -> None:
    import gpudiag.visibility as visibility

    jobs = {"entries", "rules", "order", "mig", "pytorch", "hints", "exports", "probe_report", "result", "picks"}
    assert {p.stem for p in (PACKAGE / "visibility").glob("*.py")} == jobs | {"__init__"}
    assert visibility.resolve.__module__ == "gpudiag.visibility.rules"  # still the one pure entry point
    assert max(len(p.read_text().splitlines()) for p in (PACKAGE / "visibility").glob("*.py")) < 500


def test_the_check_command_only_parses_calls_and_renders() -> None:
    """The gathering (source, torch child, functional test, device nodes) lives in checks/gather.py."""
    used = imports(PACKAGE / "cli" / "check_cmd.py")
    assert not any(m.startswith(("gpudiag.probe", "gpudiag.children")) for m in used), used
    assert "gpudiag.checks.gather" in used


def test_command_modules_keep_annotations_evaluated() -> None:
    """Typer reads options from the command functions' annotations: as strings (PEP 563) they
    are compiled and evaluated at every start, which cost each command 3-4 ms."""
    commands = [path for path in modules(PACKAGE / "cli") if path.stem == "app" or path.stem.endswith("_cmd")]
    assert len(commands) >= 10
    lazy = [name(path) for path in commands if "\nfrom __future__ import annotations" in path.read_text()]
    assert lazy == []


def test_the_process_edge_imports_the_standard_library_only() -> None:
    """entry, argv and edge run before typer and rich load (the early torch start waits for them):
    at module level, the standard library and each other only (entry loads the CLI when it runs it;
    tests/test_exit_codes.py checks that typing and enum are not loaded either)."""
    own = {"gpudiag", "gpudiag.argv", "gpudiag.edge"}
    for stem in ("entry", "argv", "edge"):
        tree = ast.parse((PACKAGE / f"{stem}.py").read_text())
        used: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                used.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                used.update({node.module} if node.module != "gpudiag" else {f"gpudiag.{a.name}" for a in node.names})
        outside = {m for m in used if m.split(".")[0] not in sys.stdlib_module_names and m not in own}
        assert outside == set(), (stem, outside)
