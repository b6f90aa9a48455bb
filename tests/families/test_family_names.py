"""Adding a family touches its own file and the families' table (ppl/families/registry.py):
no module outside ppl/families/ names a family by a string literal, so none can test for one
by name and miss a family added later (a new family on auto's stochastic road once got a
Gaussian's fit and label that way)."""

from __future__ import annotations

import ast
from pathlib import Path

import ppl
from ppl.families.registry import FAMILIES

PACKAGE = Path(ppl.__file__).resolve().parent

#: Where a family's name is also a distribution's or a function's (gamma, bernoulli): the Stan
#: library and the language that checks calls to it.
NOT_FAMILIES = ("families", "library", "language")


def _family_literals(source: str) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and node.value in FAMILIES]  # fmt: skip


def test_no_module_outside_ppl_families_names_a_family():
    assert {"gaussian", "gamma", "bernoulli"} <= set(FAMILIES)
    offenders = [f"{path.relative_to(PACKAGE)}:{line}: {name!r}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if path.relative_to(PACKAGE).parts[0] not in NOT_FAMILIES
                 for line, name in _family_literals(path.read_text(encoding="utf-8"))]  # fmt: skip
    assert not offenders, "\n".join(offenders)


def test_the_scan_finds_a_family_named_in_code():
    code = 'if fam == "gamma":\n    pass\nblock = Block("x", "bernoulli", 0, 1)\n'
    assert _family_literals(code) == [(1, "gamma"), (3, "bernoulli")]
