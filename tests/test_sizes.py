"""Size limits that keep the package readable (issue 30): no module over MAX_FILE_LINES lines and
no function or method over MAX_FUNCTION_LINES lines, except those listed in EXCEPTIONS with a
reason. An exception that is no longer needed must be removed, so the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ppl"
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100

#: "path" (a module) or "path::qualified.name" (a function) -> why it may be over the limit
EXCEPTIONS: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def oversized() -> dict[str, int]:
    """Every module and function over its limit -> its length in lines."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found[name] = lines
        for qualname, node in _functions(ast.parse(text)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found[f"{name}::{qualname}"] = length
    return found


def test_no_module_or_function_over_the_limits():
    over = {k: n for k, n in oversized().items() if k not in EXCEPTIONS}
    assert not over, (
        f"over {MAX_FILE_LINES} lines (module) or {MAX_FUNCTION_LINES} lines (function): "
        + ", ".join(f"{k} ({n} lines)" for k, n in sorted(over.items()))
    )


def test_every_exception_is_still_needed():
    stale = sorted(set(EXCEPTIONS) - set(oversized()))
    assert not stale, f"within the limits now, remove from EXCEPTIONS: {', '.join(stale)}"
