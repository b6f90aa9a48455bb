"""Loop-invariant expressions of a sequential `for` loop: computed in its first iteration, reused.

A recurrence (`for (t in 2:N)` in a forward algorithm, a GARCH filter) runs one iteration at a
time, and its body often holds expressions that do not involve anything the loop changes, such as
`log(theta[j, k])` inside `for (t) for (k) for (j)`. They take the same value in every iteration
of `t` (for the same values of the inner indexes `j`, `k`), so the evaluator keeps the first value
and reuses it: one autograd node instead of one per time step, for values and gradients alike.

An expression qualifies when none of its names is written in the loop (assigned, declared, the
loop's own index, an index of an inner loop whose bounds change), it draws no random numbers, and it
does some work (a call, an operator or an indexing, not a bare name or number). Only the largest
such expressions are kept; a constant the folding pass found is already computed once and left
alone. `run` records them on every `for` loop of the program (the evaluator uses them when the loop
runs one index at a time, and holds the cache: ppl.runtime.loop_memos).
"""

from __future__ import annotations

from ppl.ir.marks import marks_of
from ppl.ir.program import Program, walk
from ppl.ir.source_text import expr_text
from ppl.language import ast


def run(program: Program) -> None:
    for _, s in program.statements():
        if isinstance(s, ast.For):
            found = invariant_expressions(s)
            marks = marks_of(s)
            marks.invariants = found
            if found and not marks.vectorise:
                kept = ", ".join(expr_text(e) for e, _, _ in found[:3])
                more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
                program.decide("loop_invariants", s, f"for ({s.var}): computed once across its "
                               f"iterations: {kept}{more}")  # fmt: skip


def marked(loop: ast.For) -> list[tuple[ast.Expr, tuple[str, ...], bool]]:
    """The invariant expressions `run` marked on the loop (none when the pass did not run)."""
    marks = loop.marks
    return marks.invariants if marks is not None and marks.invariants is not None else []


def invariant_expressions(loop: ast.For) -> list[tuple[ast.Expr, tuple[str, ...], bool]]:
    """The largest expressions of the loop's body that are loop-invariant, or that depend on the
    loop only through its own index (`normal_lpdf(y[t] | mu[k], 1)`: computed for every index at
    once, as a vectorised loop would, then read per iteration), each with the inner-loop indexes it
    reads (the cache is keyed by their values) and whether it depends on the index."""
    marks = marks_of(loop)
    if marks.found_invariants is None:
        marks.found_invariants = _find(loop)
    return marks.found_invariants


def _find(loop: ast.For) -> list[tuple[ast.Expr, tuple[str, ...], bool]]:
    stmts = list(walk(loop.body))
    written = {loop.var}
    for s in stmts:
        if isinstance(s, ast.Decl):
            written.add(s.name)
        elif isinstance(s, ast.Assign):
            written.add(_target(s.lhs).name)
        elif isinstance(s, ast.ForEach):
            written.add(s.var)
    # an inner loop whose bounds the loop changes gives its index other values: written
    inner_loops = [s for s in stmts if isinstance(s, ast.For)]
    changed = True
    while changed:
        changed = False
        for s in inner_loops:
            if s.var not in written and _names([s.lo, s.hi]) & written:
                written.add(s.var)
                changed = True
    inner = {s.var for s in inner_loops} - written
    found: list[tuple[ast.Expr, tuple[str, ...], bool]] = []
    for s in stmts:
        for root in evaluated(s):
            _collect(root, written, inner, loop.var, found)
    return found


def _collect(e: ast.Expr, written: set[str], inner: set[str], var: str, found: list) -> None:
    if e is None or isinstance(e, ast.Num | ast.Str | ast.Var) or _folded(e):
        return
    names = _names(e)
    changing = names & written
    if (not changing or changing == {var}) and not draws(e) and not _trivial(e, var):
        found.append((e, tuple(sorted(names & inner)), bool(changing)))
        return
    for child in children(e):
        _collect(child, written, inner, var, found)


def _folded(e: ast.Expr) -> bool:
    """Whether constant folding computes `e` once already."""
    return e.marks is not None and e.marks.constant is not None


def _trivial(e: ast.Expr, var: str) -> bool:
    """`x[t]`: reading one element per iteration costs what reading a precomputed one does; an
    int scalar (`t - 1`, a comparison) is cheap Python arithmetic, and must stay a Python int to
    index element lists quickly."""
    t = getattr(e, "type", None)
    if t is not None and t.base == "int" and t.ndim == 0:
        return True
    return (
        isinstance(e, ast.Index)
        and isinstance(e.base, ast.Var)
        and all(i.kind == "single" and isinstance(i.lo, ast.Var | ast.Num) for i in e.items)
        and any(isinstance(i.lo, ast.Var) and i.lo.name == var for i in e.items)
    )


def children(e: ast.Expr) -> list:
    """The expressions `e` is computed from."""
    if isinstance(e, ast.BinOp):
        return [e.left, e.right]
    if isinstance(e, ast.UnOp):
        return [e.operand]
    if isinstance(e, ast.Call):
        return list(e.args)
    if isinstance(e, ast.Ternary):
        return [e.cond, e.if_true, e.if_false]
    if isinstance(e, ast.Index):
        return [e.base] + [x for item in e.items for x in (item.lo, item.hi) if x is not None]
    if isinstance(e, ast.ArrayExpr | ast.RowVectorExpr):
        return list(e.items)
    return []


def draws(e: ast.Expr) -> bool:
    return any(
        isinstance(x, ast.Call) and x.name.endswith(("_rng", "_lp")) for x in ast.iter_exprs(e)
    )  # a draw, or a user function that changes the target: redone every time


def _names(node) -> set[str]:
    return {e.name for e in ast.iter_exprs(node) if isinstance(e, ast.Var)}


def _target(lhs: ast.Expr) -> ast.Var:
    while isinstance(lhs, ast.Index):
        lhs = lhs.base
    return lhs


def evaluated(s: ast.Stmt) -> list:
    """The expressions a statement evaluates as values (an assignment's target only through its
    indexes; a declaration's sizes are left alone)."""
    if isinstance(s, ast.Decl):
        return [s.init] if s.init is not None else []
    if isinstance(s, ast.Assign):
        out = [s.rhs]
        lhs = s.lhs
        while isinstance(lhs, ast.Index):
            out += [x for item in lhs.items for x in (item.lo, item.hi) if x is not None]
            lhs = lhs.base
        return out
    if isinstance(s, ast.Tilde):
        return [s.lhs] + list(s.args)
    if isinstance(s, ast.TargetInc):
        if s.marks is not None and s.marks.written is not None:
            return list(s.expr.args)  # a lowered `~`: its value and arguments, as written
        return [s.expr]
    if isinstance(s, ast.If | ast.While):
        return [s.cond]
    if isinstance(s, ast.CallStmt):
        return [s.call]
    return []
