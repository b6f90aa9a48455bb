"""A model file is only ever parsed and compiled to our own operations: it cannot run host code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ppl.errors import PplError
from ppl.language.parser import parse

PACKAGE = Path(__file__).resolve().parents[2] / "ppl"
FORBIDDEN = {"eval", "exec", "compile", "__import__"}


def test_package_never_calls_eval_exec_or_compile():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in FORBIDDEN:
                    offenders.append(f"{path.name}:{node.lineno} {node.func.id}()")
    assert offenders == []


@pytest.mark.parametrize(
    "text",
    [
        'model { __import__("os").system("true"); }',
        "model { target += eval(1); }",
        "model { x = exec; }",
    ],
)
def test_host_code_in_a_model_is_rejected_as_a_user_error(text):
    from ppl.language.checker import check

    with pytest.raises(PplError):
        check(parse(text, "evil.model"))
