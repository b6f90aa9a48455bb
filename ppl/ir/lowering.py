"""Lowering: the checked program as the IR's own `Program`, in the statements the backend runs.

The checked statements are copied (so that the passes can mark them and other lowerings stay
unaffected), then each `~` is lowered: on a built-in density it gets the `Distribution` it
evaluates and the expressions it passes (`T[L, U]`: the truncated density, the bounds after the
arguments); on a user-defined density it becomes the `target += foo_lpdf(y | ...)` it means,
marked with the `~` as written (`ppl ir` prints that).
"""

from __future__ import annotations

import copy

from ppl.ir.marks import marks_of
from ppl.ir.program import Program
from ppl.language import ast
from ppl.language.checker import CheckedProgram
from ppl.language.types import SType
from ppl.library.distributions import get_distribution
from ppl.library.distributions.truncated import truncated

_BLOCKS = ("transformed_data", "parameters", "transformed_parameters", "model",
           "generated_quantities")  # fmt: skip


def lower(checked: CheckedProgram) -> Program:
    """The checked program as an IR of its own, every `~` lowered."""
    tree = _copy_tree(checked.program, {})
    for f in tree.functions:
        if f.body is not None:
            f.body = _lower(f.body)
    for name in _BLOCKS:
        stmts = getattr(tree, name)
        stmts[:] = [_lower(s) for s in stmts]
    return Program(checked, tree)


def _lower(s: ast.Stmt) -> ast.Stmt:
    """The statement with every `~` in it lowered (one frame per level of nesting)."""
    if isinstance(s, ast.Tilde):
        return _lower_tilde(s)
    if isinstance(s, ast.Block):
        s.stmts[:] = [_lower(inner) for inner in s.stmts]
    elif isinstance(s, ast.For | ast.ForEach | ast.While):
        s.body = _lower(s.body)
    elif isinstance(s, ast.If):
        s.then = _lower(s.then)
        if s.otherwise is not None:
            s.otherwise = _lower(s.otherwise)
    return s


def _lower_tilde(s: ast.Tilde) -> ast.Stmt:
    sig = s.user_function
    if sig is not None:  # `y ~ foo(a, b)`: `target += foo_lpdf(y | a, b)`
        call = ast.Call(s.pos, name=sig.name, args=[s.lhs] + list(s.args), conditional=True)
        call.type = SType("real")
        call.user_function = sig
        lowered = ast.TargetInc(s.pos, call)
        marks_of(lowered).written = s
        return lowered
    marks = marks_of(s)
    dist = get_distribution(s.dist)
    marks.density, marks.density_args = dist, list(s.args)
    if s.truncation is not None and dist is not None:
        marks.density, marks.density_args = truncated(dist, s.args, s.truncation)
    return s


_TREE_MODULES = ("ppl.language.ast", "ppl.language.user_functions")
_NOT_COPIED = ("marks", "compiled")  # a lowering's own: each lowering starts afresh


def _copy_tree(node, memo: dict):
    """A copy of the syntax tree (nodes, their lists and dicts, function signatures) without any
    lowering's marks or compiled closures, sharing everything else (types, numbers, strings). One
    frame per level, not copy.deepcopy's five: a program of 100 nested `if`s stays within
    Python's recursion limit."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, list):
        new = memo[id(node)] = []
        for item in node:
            new.append(_copy_tree(item, memo))
        return new
    if isinstance(node, tuple):
        return tuple([_copy_tree(item, memo) for item in node])
    if isinstance(node, dict):
        new = memo[id(node)] = {}
        for key, item in node.items():
            new[key] = _copy_tree(item, memo)
        return new
    if type(node).__module__ not in _TREE_MODULES or not hasattr(node, "__dict__"):
        return node
    new = memo[id(node)] = copy.copy(node)
    for key, item in list(vars(node).items()):
        if key in _NOT_COPIED:
            del new.__dict__[key]
        else:
            new.__dict__[key] = _copy_tree(item, memo)
    return new
