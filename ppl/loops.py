"""Static test of whether a `for` loop's iterations are independent, so it can run vectorised.

A vectorised loop runs its body once with the loop index as a batch axis. That is only correct when
no iteration reads what another one wrote, and when nothing in the body needs a single index value
(sizes, slices, branching). Anything unusual keeps the ordinary one-index-at-a-time loop; the
evaluator also falls back at run time if a vectorised run meets something it cannot do.
"""

from __future__ import annotations

from ppl import ast
from ppl.functions import lookup

_CACHE: dict[int, bool] = {}


def _names(node) -> set[str]:
    return {e.name for e in ast.iter_exprs(node) if isinstance(e, ast.Var)}


def _walk_stmts(s: ast.Stmt):
    yield s
    if isinstance(s, ast.Block):
        for inner in s.stmts:
            yield from _walk_stmts(inner)
    elif isinstance(s, ast.For | ast.ForEach | ast.While):
        yield from _walk_stmts(s.body)
    elif isinstance(s, ast.If):
        yield from _walk_stmts(s.then)
        if s.otherwise is not None:
            yield from _walk_stmts(s.otherwise)


def _target_name(lhs: ast.Expr) -> str:
    while isinstance(lhs, ast.Index):
        lhs = lhs.base
    return lhs.name


def vectorisable(loop: ast.For) -> bool:
    key = id(loop)
    if key not in _CACHE:
        _CACHE[key] = _check(loop)
    return _CACHE[key]


def _check(loop: ast.For) -> bool:
    var = loop.var
    stmts = list(_walk_stmts(loop.body))
    locals_: set[str] = {s.name for s in stmts if isinstance(s, ast.Decl)}
    inner_loop_vars = {s.var for s in stmts if isinstance(s, ast.For | ast.ForEach)}
    for s in stmts:
        if isinstance(
            s, ast.While | ast.ForEach | ast.Break | ast.Continue | ast.Reject | ast.If | ast.Print
        ):
            return False
    # variables written in the body that live outside it
    outer_writes: dict[str, list[ast.Assign]] = {}
    for s in stmts:
        if isinstance(s, ast.Assign):
            name = _target_name(s.lhs)
            if name not in locals_:
                outer_writes.setdefault(name, []).append(s)
    # loop-dependent names: the index, locals, outer arrays written per index
    dependent = {var} | locals_ | set(outer_writes)
    for name, writes in outer_writes.items():
        for w in writes:
            if w.op != "=" or not _is_loop_element(w.lhs, var):
                return False
        # every read of an outer array written here must be exactly name[var, ...]
        for s in stmts:
            reads = list(_reads(s))
            allowed = {
                id(e.base)
                for e in reads
                if isinstance(e, ast.Index)
                and isinstance(e.base, ast.Var)
                and e.base.name == name
                and _is_loop_element(e, var)
            }
            for e in reads:
                if isinstance(e, ast.Var) and e.name == name and id(e) not in allowed:
                    return False
    # inner loops: bounds must not depend on the index
    for s in stmts:
        if isinstance(s, ast.For) and s is not loop:
            if _names([s.lo, s.hi]) & dependent:
                return False
    # sizes, slices and size arguments must not depend on the index
    for s in stmts:
        if isinstance(s, ast.Decl):
            if _names(s.spec.sizes + s.spec.array_sizes) & dependent:
                return False
        for e in ast.iter_exprs(_stmt_exprs(s)):
            if isinstance(e, ast.Index):
                for item in e.items:
                    if item.kind != "single" and _names([item.lo, item.hi]) & dependent:
                        return False
            if isinstance(e, ast.Call):
                fn = lookup(e.name)
                if fn is not None:
                    for k in fn.size_args:
                        if k < len(e.args) and _names(e.args[k]) & (dependent | inner_loop_vars):
                            return False
    return True


def _is_loop_element(e: ast.Expr, var: str) -> bool:
    """`x[var]` or `x[var, j...]` with the other indices independent of the loop."""
    if not (isinstance(e, ast.Index) and isinstance(e.base, ast.Var)):
        return False
    first, rest = e.items[0], e.items[1:]
    if not (first.kind == "single" and isinstance(first.lo, ast.Var) and first.lo.name == var):
        return False
    return not rest  # element assignment below the first index is done one index at a time


def _stmt_exprs(s: ast.Stmt) -> list:
    """The expressions a statement itself holds (not those of nested statements)."""
    if isinstance(s, ast.Decl):
        return [s.init] if s.init is not None else []
    if isinstance(s, ast.Assign):
        return [s.lhs, s.rhs]
    if isinstance(s, ast.Tilde):
        return [s.lhs] + s.args
    if isinstance(s, ast.TargetInc):
        return [s.expr]
    if isinstance(s, ast.For):
        return [s.lo, s.hi]
    if isinstance(s, ast.CallStmt):
        return [s.call]
    if isinstance(s, ast.Print):
        return list(s.args)
    return []


def _reads(s: ast.Stmt):
    """Expressions read by a statement; an assignment's target counts only through its indexes."""
    if isinstance(s, ast.Assign):
        yield from ast.iter_exprs(s.rhs)
        lhs = s.lhs
        if s.op != "=":
            yield from ast.iter_exprs(lhs)
            return
        while isinstance(lhs, ast.Index):
            for item in lhs.items:
                yield from ast.iter_exprs([item.lo, item.hi])
            lhs = lhs.base
        return
    yield from ast.iter_exprs(_stmt_exprs(s))
