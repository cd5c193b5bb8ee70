"""Readable sizes: no module of gpudiag over 800 lines, no function body over 80, read with ast.

Today's offenders are listed by name; the list only shrinks: a module or function that grows past
the limit fails here, and so does one listed that is back under it (take it off the list).
"""

from __future__ import annotations

import ast

from tests.source_trees import PACKAGE, tree

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

# The modules still over the limit, to be split (a data table may live in a data module of its own).
LONG_MODULES: set[str] = set()
# The functions (module path:qualified name) whose body is still over the limit.
LONG_FUNCTIONS: set[str] = set()


def _modules() -> dict[str, str]:
    return {str(p.relative_to(PACKAGE)): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's body in lines, its docstring left out (it says why, and may be long)."""
    body = node.body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and _is_text(body[0].value) else body[0]
    return (node.end_lineno or first.lineno) - first.lineno + 1


def _is_text(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def long_functions(path: str, text: str | ast.Module) -> dict[str, int]:
    """The functions over the limit in a module (its text, or its tree) and their body lines."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                if (n := body_lines(child)) > MAX_FUNCTION_LINES:
                    out[f"{path}:{name}"] = n
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):  # a def is a statement
                visit(child, prefix)

    visit(ast.parse(text) if isinstance(text, str) else text, "")
    return out


def test_no_module_grows_past_800_lines() -> None:
    long = {path for path, text in _modules().items() if len(text.splitlines()) > MAX_MODULE_LINES}
    assert sorted(long - LONG_MODULES) == [], "split it (data tables may go to a data module)"
    assert sorted(LONG_MODULES - long) == [], "back under the limit: take it off LONG_MODULES"


def test_no_function_body_grows_past_80_lines() -> None:
    long: dict[str, int] = {}
    for path in _modules():
        long.update(long_functions(path, tree(PACKAGE / path)))
    assert sorted(set(long) - LONG_FUNCTIONS) == [], long
    assert sorted(LONG_FUNCTIONS - set(long)) == [], "back under the limit: take it off LONG_FUNCTIONS"


def test_the_measure_sees_a_long_function_and_its_nesting() -> None:
    """The checker itself can fail: a nested function and a method are measured, a docstring is not."""
    lines = "\n".join(f"        x = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    text = f'class C:\n    def m(self):\n        """Doc.\n\n        more\n        """\n{lines}\n'
    assert long_functions("t.py", text) == {"t.py:C.m": MAX_FUNCTION_LINES + 1}
    nested = f"def f():\n    def g():\n{lines}\n"
    assert long_functions("t.py", nested) == {"t.py:f": MAX_FUNCTION_LINES + 2, "t.py:f.g": MAX_FUNCTION_LINES + 1}
    short = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions("t.py", f'def f():\n    """Doc.\n\n    more\n    """\n{short}\n') == {}
