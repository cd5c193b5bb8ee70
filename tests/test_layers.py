"""The layers' import rules (docs/design.md), read from the source with ast: the shape stays true.

- every module sits in one row of docs/design.md's layer table and imports only its own row and the
  rows above it, imports inside functions and under TYPE_CHECKING included; no import cycle but the
  known ones (KNOWN_CYCLES: each with why it is still there);
- the folders follow the layers too: no folder of gpudiag/ imports one that imports it back, and no
  cycle runs among them (lazy and TYPE_CHECKING imports included; KNOWN_TWO_WAY names a pair left
  to untangle, each with why);
- the model (values.py, its base; model.py, the details it may carry, details.py, and the
  declarations of NVML's readings, readings.py) imports nothing else of gpudiag;
- only the live NVML source (probe/collect.py, which hands the module to probe/nvml.py) and the
  replay package (the fake NVML) import pynvml;
- renderers never import probes or children;
- a child that another interpreter runs imports the standard library (and its sibling protocol) only;
- no Python program lives in a string: no module hands code to ``python -c``.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.source_trees import PACKAGE, tree

REPLAY = PACKAGE / "replay"  # the fake NVML, the example machines' loader
STANDALONE_CHILDREN = (
    "protocol",
    "torch_probe",
    "functional",
    "visible_probe",
    "diag",
    "patterns",
    "memtest",
    "stress",
    "allreduce",
)


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's tree, walked once for every rule here."""
    return tuple(ast.walk(tree(path)))


@functools.cache
def imports(path: Path) -> frozenset[str]:
    """Every module a file imports, anywhere in it (functions and TYPE_CHECKING blocks included)."""
    found: set[str] = set()
    for node in nodes(path):
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


# The machine model, its base (a reading and its vocabulary), what a reading's row says (spec), the
# per-GPU readings and the details it may carry, each reading its field beside its row.
MODEL = ("gpudiag.values", "gpudiag.model", "gpudiag.spec", "gpudiag.readings", "gpudiag.details")


def test_the_model_imports_nothing_of_gpudiag() -> None:
    for path in (
        PACKAGE / "values.py",
        PACKAGE / "model.py",
        PACKAGE / "spec.py",
        PACKAGE / "readings.py",
        *sorted((PACKAGE / "details").glob("*.py")),
    ):
        outside = [m for m in imports(path) if m.split(".")[0] == "gpudiag" and not m.startswith(MODEL)]
        assert outside == [], path


def _pynvml_imports(path: Path) -> list[int]:
    """Lines that import pynvml, however spelt (import, from-import, importlib, __import__)."""
    lines = []
    for node in nodes(path):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        if any(n == "pynvml" or n.startswith("pynvml.") for n in names) and isinstance(node, ast.stmt | ast.expr):
            lines.append(node.lineno)
    return lines


def test_the_import_finder_finds_every_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        "import pynvml\nfrom pynvml import nvmlInit\nimport importlib\n"
        "def f():\n    importlib.import_module('pynvml')\n    __import__('pynvml')\nimport pynvml_utils\n"
    )
    assert _pynvml_imports(sample) == [1, 2, 5, 6]


def test_only_the_live_source_and_the_fake_import_pynvml() -> None:
    # The fake (with its detail, MIG and event calls and its rows' index) stands in for pynvml and uses its constants.
    allowed = {
        PACKAGE / "probe" / "collect.py",
        *(
            REPLAY / f"{m}.py"
            for m in ("fake_nvml", "fake_answers", "fake_details", "fake_mig", "fake_events", "fake_rows", "c_boundary")
        ),
    }
    users = {p for p in modules() if _pynvml_imports(p)}
    assert users - allowed == set(), sorted(name(p) for p in users - allowed)
    assert PACKAGE / "probe" / "collect.py" in users
    # nvml.py works on whatever module it is given; it never imports one itself, not even lazily.
    assert _pynvml_imports(PACKAGE / "probe" / "nvml.py") == []


def test_renderers_never_import_probes() -> None:
    bad = {
        name(p): sorted(m for m in imports(p) if m.startswith(("gpudiag.probe", "gpudiag.children")))
        for p in modules(PACKAGE / "render")
    }
    assert {k: v for k, v in bad.items() if v} == {}


@pytest.mark.parametrize("child", STANDALONE_CHILDREN)
def test_a_child_another_interpreter_runs_imports_the_standard_library_only(child: str) -> None:
    siblings = {*STANDALONE_CHILDREN, "gpudiag.children", *(f"gpudiag.children.{c}" for c in STANDALONE_CHILDREN)}
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
        # A command's own option named -c (`dmon -c COUNT`, as nvidia-smi's) is no program.
        options = {
            id(arg)
            for node in nodes(path)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option"
            for arg in node.args
        }
        # ... nor is an option table's key (cli.plain_front: option -> (field, takes a value)).
        options |= {
            id(key)
            for node in nodes(path)
            if isinstance(node, ast.Dict)
            for key, value in zip(node.keys, node.values, strict=True)
            if isinstance(value, ast.Tuple)
        }
        for node in nodes(path):
            if isinstance(node, ast.Constant) and node.value == "-c" and id(node) not in options:
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

    jobs = {
        "entries",
        "rules",
        "order",
        "mig",
        "pytorch",
        "hints",
        "exports",
        "probe_report",
        "result",
        "picks",
        "request",
    }
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


# --- the layer table and the import graph ---------------------------------------------------

DESIGN = PACKAGE.parent / "docs" / "design.md"

# Cycles left on purpose, each with why (none since the model's base moved to values.py). Another
# cycle fails; so does one of these once it is gone.
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in modules() if "podresources" not in p.parts or p.stem == "__init__"}


def _resolve(name: str) -> str | None:
    """The gpudiag module an import names: the longest prefix that is one (``a.b.NAME`` is ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(path: Path) -> set[str]:
    """The gpudiag modules a file imports anywhere in it (functions and TYPE_CHECKING blocks included),
    relative imports resolved; ``from pkg import mod`` is the module, ``from mod import NAME`` the module."""
    own = module_name(path)
    package = own if path.stem == "__init__" else own.rpartition(".")[0]
    found: set[str | None] = set()
    for node in nodes(path):
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name) for a in node.names if a.name.split(".")[0] == "gpudiag")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base.split(".")[0] == "gpudiag":
                found.update(_resolve(f"{base}.{a.name}") for a in node.names)
    return {m for m in found if m is not None and m != own}


@functools.cache  # parsed once for the tests below
def import_graph() -> dict[str, set[str]]:
    return {name: module_imports(path) for name, path in MODULES.items()}


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """docs/design.md's layer table, top row first: (layer, the modules it names) per row. A file names
    one module (``model.py``: ``gpudiag.model``); a folder names it and every module under it
    (``probe/``: ``gpudiag.probe.``, ending in a dot)."""
    rows = []
    for line in text.splitlines():
        match = re.match(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|", line)
        if match:
            assert int(match.group(1)) == len(rows), f"the layer table's rows are numbered in order: {line[:40]}"
            paths = re.findall(r"`([^`]+)`", match.group(3))
            rows.append((match.group(2).strip(), [_named(p) for p in paths]))
    return rows


def _named(path: str) -> str:
    parts = path.rstrip("/").removesuffix(".py").split("/")
    module = ".".join(["gpudiag", *(p for p in parts if p != "__init__")])
    return module + "." if path.endswith("/") else module


def _names(entry: str, module: str) -> bool:
    return module == entry or (entry.endswith(".") and (module == entry[:-1] or module.startswith(entry)))


def layer_of(module: str, rows: list[tuple[str, list[str]]]) -> int | None:
    """The row whose longest matching entry names the module; None when no row does."""
    best: tuple[int, int] | None = None
    for rank, (_, entries) in enumerate(rows):
        for entry in entries:
            if _names(entry, module) and (best is None or len(entry) > best[0]):
                best = (len(entry), rank)
    return None if best is None else best[1]


def upward(graph: dict[str, set[str]], rows: list[tuple[str, list[str]]]) -> list[str]:
    out = []
    for module, used in sorted(graph.items()):
        mine = layer_of(module, rows)
        for other in sorted(used):
            theirs = layer_of(other, rows)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{module} ({rows[mine][0]}) imports {other} ({rows[theirs][0]})")
    return out


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The import cycles: every strongly connected set of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_sits_in_one_row_of_the_layer_table() -> None:
    rows = layer_table(DESIGN.read_text())
    assert len(rows) >= 8, "docs/design.md's layer table"
    assert [m for m in sorted(MODULES) if layer_of(m, rows) is None] == []
    named = [entry for _, entries in rows for entry in entries]
    assert sorted(e for e in set(named) if named.count(e) > 1) == []  # one row per path
    assert [e for e in named if not any(_names(e, m) for m in MODULES)] == []  # the table names no module that is gone


def test_no_module_imports_a_layer_below_it_in_the_table() -> None:
    """A layer imports its own row and the rows above it in docs/design.md, never one below."""
    assert upward(import_graph(), layer_table(DESIGN.read_text())) == []


def test_no_import_cycle_but_the_known_ones() -> None:
    assert cycles(import_graph()) == KNOWN_CYCLES


# --- packages: the folders of gpudiag/ ------------------------------------------------------

# Two packages left importing each other on purpose, each with why (a pair to untangle is named here
# until it is). Another such pair fails; so does one of these once it is gone.
KNOWN_TWO_WAY: set[frozenset[str]] = set()


def package_of(module: str) -> str:
    """The package a module belongs to: the folder it lives in (``checks/deep/`` is a package of its
    own); a module directly in gpudiag/ is a unit of its own."""
    parts = module.split(".")
    if len(parts) > 1 and PACKAGE.parent.joinpath(*parts).is_dir():
        return module  # a package's __init__
    return ".".join(parts[:-1]) if len(parts) > 2 else module


def package_graph(graph: dict[str, set[str]], of: Callable[[str], str] = package_of) -> dict[str, set[str]]:
    """Which package imports which: one module of one importing any module of the other."""
    out: dict[str, set[str]] = {}
    for module, used in graph.items():
        mine = of(module)
        out.setdefault(mine, set()).update(p for p in map(of, used) if p != mine)
    return out


def two_way(packages: dict[str, set[str]]) -> set[frozenset[str]]:
    return {frozenset({a, b}) for a, used in packages.items() for b in used if a in packages.get(b, ())}


def without(packages: dict[str, set[str]], pairs: set[frozenset[str]]) -> dict[str, set[str]]:
    """The package graph less both directions of the given pairs."""
    return {a: {b for b in used if frozenset({a, b}) not in pairs} for a, used in packages.items()}


def test_no_two_packages_import_each_other_but_the_known_ones() -> None:
    """A folder never imports a folder that imports it back (imports inside functions and under
    TYPE_CHECKING included): the folders follow the layers, not only the modules."""
    assert two_way(package_graph(import_graph())) == KNOWN_TWO_WAY


def test_no_cycle_among_packages() -> None:
    """Nor through others: no package reaches itself (bench → probe → children → bench, say). The
    modules directly in gpudiag/ count as packages of their own here."""
    assert cycles(without(package_graph(import_graph()), KNOWN_TWO_WAY)) == set()


def test_the_package_rules_can_fail() -> None:
    """On a made-up graph: a two-way pair and a longer loop between folders are both found."""
    graph = {
        "gpudiag.bench.runner": {"gpudiag.probe.child"},
        "gpudiag.probe.child": {"gpudiag.children.protocol"},
        "gpudiag.children.bench": {"gpudiag.bench.plan"},
        "gpudiag.checks.deep.rules": {"gpudiag.checks.base"},
        "gpudiag.checks.request": {"gpudiag.fleet.scheduled"},
        "gpudiag.fleet.faults": {"gpudiag.checks.rules", "gpudiag.model"},
    }
    packages = package_graph(graph)
    assert packages["gpudiag.checks.deep"] == {"gpudiag.checks"}  # a folder of its own
    assert packages["gpudiag.fleet"] == {"gpudiag.checks", "gpudiag.model"}  # model.py: a unit of its own
    assert two_way(packages) == {frozenset({"gpudiag.checks", "gpudiag.fleet"})}
    assert package_of("gpudiag.checks") == package_of("gpudiag.checks.base") == "gpudiag.checks"
    assert cycles(without(packages, two_way(packages))) == {
        frozenset({"gpudiag.bench", "gpudiag.probe", "gpudiag.children"})
    }


# --- the query package: the --query vocabulary, between the model and the renderers --------------

QUERY = "gpudiag.query"
QUERY_TABLES = ("gpudiag.query.smi_names", "gpudiag.query.reading_names")  # raw: query.gpu_fields parses them


def query_leaks(graph: dict[str, set[str]]) -> list[str]:
    """What breaks the query package's place: it importing a renderer or a command (formats and N/A
    rules are the renderer's, the command asks, never the other way), or a module besides
    query.gpu_fields reading the vocabulary's raw tables (each name is parsed once, in one place)."""
    out = []
    for module, used in sorted(graph.items()):
        inside = package_of(module) == QUERY
        for other in sorted(used):
            if inside and package_of(other) in ("gpudiag.render", "gpudiag.cli"):
                out.append(f"{module} imports {other}")
            elif module != "gpudiag.query.gpu_fields" and other in QUERY_TABLES:
                out.append(f"{module} reads {other}")
    return out


def test_the_query_package_imports_neither_renderers_nor_commands() -> None:
    graph = import_graph()
    assert query_leaks(graph) == []
    # The rule sees the package: the command asks it to parse, the renderer writes what it parsed.
    assert {"gpudiag.query.parse"} <= graph["gpudiag.cli.list_modes"]
    assert {"gpudiag.query.gpu_fields", "gpudiag.query.parse"} <= graph["gpudiag.render.csv_query"]


def test_each_table_of_names_is_parsed_in_one_module() -> None:
    """--query's names and -q's lines are strings in a small language each (``NAME[:PART][=FORMAT]``,
    ``PATH[:PART][=FORMAT]`` and the -q layout): one module reads each table, so none is parsed twice."""
    graph = import_graph()
    tables = (*QUERY_TABLES, "gpudiag.render.details_lines")
    readers = {table: sorted(m for m, used in graph.items() if table in used) for table in tables}
    assert readers == {
        "gpudiag.query.smi_names": ["gpudiag.query.gpu_fields"],
        "gpudiag.query.reading_names": ["gpudiag.query.gpu_fields"],
        "gpudiag.render.details_lines": ["gpudiag.render.details_view"],
    }


def test_the_query_rule_can_fail() -> None:
    graph = {
        "gpudiag.query.parse": {"gpudiag.query.gpu_fields", "gpudiag.render.format", "gpudiag.cli.plain"},
        "gpudiag.query.list_fields": {"gpudiag.query.gpu_fields", "gpudiag.query.smi_names"},
        "gpudiag.query.gpu_fields": {"gpudiag.query.smi_names", "gpudiag.model"},
        "gpudiag.render.csv_query": {"gpudiag.query.parse", "gpudiag.query.reading_names"},
        "gpudiag.cli.list_modes": {"gpudiag.query.parse", "gpudiag.render.csv_query"},
    }
    assert query_leaks(graph) == [
        "gpudiag.query.list_fields reads gpudiag.query.smi_names",
        "gpudiag.query.parse imports gpudiag.cli.plain",
        "gpudiag.query.parse imports gpudiag.render.format",
        "gpudiag.render.csv_query reads gpudiag.query.reading_names",
    ]


def test_every_import_of_gpudiag_names_a_module_that_exists() -> None:
    """A stale import after a rename (``gpudiag.watch`` for ``gpudiag.pacing``) fails here, not first
    in front of a user when the function that holds it runs."""
    stale = []
    for module, path in sorted(MODULES.items()):
        for node in nodes(path):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                names = [node.module]
            stale += [f"{module}:{node.lineno} {n}" for n in names if n.split(".")[0] == "gpudiag" and n not in MODULES]
    assert stale == []


def test_the_graph_sees_imports_in_functions_and_under_type_checking() -> None:
    graph = import_graph()
    assert "gpudiag.track.callbacks" in graph["gpudiag.track"]  # inside lightning_callback()
    assert "gpudiag.details" in graph["gpudiag.readings"]  # under TYPE_CHECKING
    assert "gpudiag.memory.ranks" in graph["gpudiag.memory.insights"]  # `from gpudiag.memory import ranks`
    assert "gpudiag.children.protocol" in graph["gpudiag.probe.child"]


def test_the_layer_and_cycle_checks_can_fail() -> None:
    """On a made-up graph: an import from a row below, and a cycle, are both found."""
    rows = [("base", ["gpudiag", "gpudiag.a"]), ("top", ["gpudiag.b.", "gpudiag.b.c"])]
    graph = {"gpudiag.a": {"gpudiag.b.c"}, "gpudiag.b": {"gpudiag.a"}, "gpudiag.b.c": {"gpudiag.b"}}
    assert upward(graph, rows) == ["gpudiag.a (base) imports gpudiag.b.c (top)"]
    assert cycles(graph) == {frozenset(graph)}
    assert layer_of("gpudiag.b.d", rows) == 1 and layer_of("gpudiag.b", rows) == 1
    assert layer_of("gpudiag.a.d", rows) is None  # a file names one module, not those below it
    assert layer_of("gpudiag.z", rows) is None  # the package's own __init__ row holds no other module
    table = "| 0 | base | `__init__.py`, `a.py`, `b/` | job |"
    assert layer_table(table) == [("base", ["gpudiag", "gpudiag.a", "gpudiag.b."])]


def test_collecting_the_tests_does_not_import_torch() -> None:
    """torch costs every collecting worker seconds: test modules ask for it with
    ``importlib.util.find_spec`` and import it inside the tests that use it in this process."""
    from tests.conftest import TORCH_IMPORTED_BY_COLLECTION

    assert TORCH_IMPORTED_BY_COLLECTION == [False]


def test_the_modules_that_share_a_start_are_one_work_unit() -> None:
    """The scheduler conftest gives xdist hands each of these modules to one worker whole."""
    from tests.conftest import ONE_WORKER_MODULES, work_unit

    root = Path(__file__).resolve().parent.parent
    assert all((root / module).is_file() for module in ONE_WORKER_MODULES)  # none renamed away
    assert (
        work_unit("tests/test_slurm.py::test_a[x-y]")
        == work_unit("tests/test_slurm.py::test_b")
        == "tests/test_slurm.py"
    )
    assert work_unit("tests/test_model.py::test_a") == "tests/test_model.py::test_a"
    assert work_unit("tests/test_sizes.py::test_a") == work_unit("tests/test_layers.py::test_b")  # one parse
